"""Step 4 for a compiled fix on a release wheel: the override arm. Its changed files rebuilt from
the release's own source with the fix made or taken back (``release_source``, ``reconstruct``,
``arm``), the library that registers their operators over the release's (``registration``,
``release_locals``, ``release_build``, ``build``), and the check of it on the study's workload
that gives each arm its outcome (``check``). ``artifacts`` makes an arm with it; it imports no
step."""
