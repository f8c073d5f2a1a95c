"""The framework's own code, read on the host before anything is built: its trees at a commit or
a release (``tables``: git, a tarball, a release's sources, and the operator tables read from
them), its C++ as tokens (``cpp``), a fix's diff and where it applies in another copy (``patch``),
the fix made on a copy in the one direction it goes (``apply``), and what each of its files is
(``paths``). The steps that judge, isolate and build a fix
(``reach``, ``artifacts``, ``resolve``) all read it; it imports none of them."""
