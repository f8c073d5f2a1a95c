"""Step 4: framework artifacts (a build plus its manifest) and the runtimes that train on them."""
