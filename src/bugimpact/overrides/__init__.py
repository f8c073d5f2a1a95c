"""The compiled arm of a one-fix bug: a release wheel, and one override library per arm holding the
fix's changed C++ rebuilt from the release's own source, with the fix made or taken back. It
imports no step; the steps call it in this order, one function each:

1. **prepare** (the artifact step, on the host, seconds): ``arm.prepare`` reads the release's own
   source of the files the fix changes (``release_source``: a clone's tag or release commit,
   GitHub, an archive, or a ``reconstruct``-ion checked by its ``generated_headers``), makes the
   fix on them the one way it goes, and writes the tree the runtime builds from. Its route
   (``parts.Route``, decided per release: op files registered where the release's registration
   is known, ``registration``; TH, infrastructure, and op files elsewhere, interposed,
   ``interposed``; CPU stub kernels into the release's stubs, ``stubs``) is named in the manifest.
   A release entangled with the fix raises ``arm.Entangled``, and the artifact tries a release
   nearer the fix (``artifacts.other_side``). What no library can take is refused with a cause
   from one table (``refusals``; the diff's part, ``parts``; a codegen fix's generator inputs,
   ``generator_inputs``). A fix whose generator inputs say only which kernel a key calls has its
   arm's generated code made and judged by definition (``generated_code``): the library then
   registers the arm's kernels as its generated code calls them; a derivative formula's changed
   backward nodes are compiled as a slice of their generated file and interposed.
2. **build** (the runtime step, about a minute): ``build.build`` compiles three libraries with
   the release's own flags (``release_build``): ``faithful`` (the release's files), ``canary``
   (instrumented) and ``arm``, binding what the release keeps to itself (``release_locals``) and
   keeping compiled objects by what was compiled (``objects``).
3. **check** (the override_check step, on the study's workload): ``check.judge`` reads four short
   runs (the release profiled, faithful, canary, arm): the faithful build trains as the release
   does, bit for bit; the workload runs through the library; the rebuilt code runs. Its outcome
   is one of ``check.OUTCOMES``.
4. **gate** (the arms step, before any run): ``gate.unreplaced`` names an operator reach says the
   workload runs through the changed code that the library does not replace; a failed check or
   such an operator stops the bug with one reason.
"""
