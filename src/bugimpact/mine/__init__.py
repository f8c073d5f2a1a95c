"""Step 1: mine release notes into the list of fixed bugs."""
