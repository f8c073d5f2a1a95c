"""Small models whose layers call the CPU kernels of two of the paper's fixes."""
