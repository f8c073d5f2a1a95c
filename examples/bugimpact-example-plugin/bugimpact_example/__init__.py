"""bugimpact's example plugin: ``plugin`` registers (host side), ``model`` trains (in a runtime)."""
