"""A small CNN with circular (periodic) padding, for images that wrap around."""
