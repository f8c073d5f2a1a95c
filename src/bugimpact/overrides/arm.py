"""The kernel part of a one-fix arm (a compiled fix of op files), made with the artifact: the
release's own source of the files the fix rebuilds (``release_source``), and the fix made on them
the one way it goes.

Where a clone holds the fix's commits, whether the release holds the fix is its history's to say
(the fix's commit in the release's, or a cherry-pick its notes list), and the fix is made by a
three-way merge of its own files at both commits, as git's revert and cherry-pick do
(``framework.apply.merged``): a release that moved or edited the lines around the fix keeps them.
Without the commits (a patch file alone), each change is placed by its own lines and the direction
is the one the release's files allow (``framework.apply.direction_of``). A fix whose own lines the
release changed after it cannot be taken back on it alone: refused, naming the commits that did."""
import difflib
import hashlib
import subprocess
from pathlib import Path

from .. import layout
from ..framework import cpp, entries, patch
from ..framework.apply import NoDirection, NotPlaced, direction_of, merged, place
from ..framework.callers import walk
from ..framework.tables import cached_tables
from . import (
    generated_code,
    generated_headers,
    generated_slices,
    generator_inputs,
    kernel_tree,
    parts,
    release_source,
    shared_headers,
)
from .clone_tree import CloneTree, clone_commit
from .parts import Refused
from .registration import DEFINES_SCHEMAS, defines_schemas, no_registration, registers_operators
from .release_source import Release, closure


class Entangled(Refused):
    """The fix's own lines and the release's are entangled: the release changed them after the fix
    (``fix_in_release``), or the fix builds on changes the release lacks. A release on the fix's
    other side, or nearer to it, may take it (``artifacts.other_side``)."""

    def __init__(self, message, fix_in_release):
        super().__init__(message)
        self.fix_in_release = fix_in_release


class Fix:
    """The compiled part of a fix: its parsed diff, and its own files at both commits where a
    clone holds them (``clone``, ``buggy``, ``corrected``)."""

    def __init__(self, diffs, clone="", buggy="", corrected=""):
        self.diffs = diffs
        known = bool(clone and buggy and corrected and clone_commit(clone, buggy) and clone_commit(clone, corrected))
        self.clone, self.buggy, self.corrected = (clone, buggy, corrected) if known else ("", "", "")
        self.trees = (CloneTree(clone, buggy), CloneTree(clone, corrected)) if known else None

    def holds(self, commit, files):
        """Whether the tree at ``commit`` (its ``files``) holds the fix: the fix's commit in its
        history; else (a cherry-pick on a release branch is another commit; or no commits, or
        another clone) its diff placing there in reverse, on more evidence than forwards."""
        if self.trees and commit and clone_commit(self.clone, commit) and subprocess.run(
                ["git", "-C", self.clone, "merge-base", "--is-ancestor", self.corrected, commit],
                capture_output=True).returncode == 0:
            return True
        try:
            return direction_of(self._on(files), self.copy(files))[0] == "reverse"
        except NotPlaced:
            return False

    def made(self, files, side, commit=""):
        """``files`` (path -> bytes) with the fix made on them (``side`` old: forwards, new: in
        reverse), and where each change went; raises ``NotPlaced`` naming what conflicts (and,
        with the history, the commits that changed the fix's lines since: ``commit``, the tree's)."""
        diffs = self._on(files)
        if not self.trees:
            out, placement, _ = place(diffs, self.copy(files), side)
            return out, placement
        old, new = self.trees
        out, placement = {}, []
        for fd in diffs:
            before, after = old.read_bytes(fd.old_path or fd.name), new.read_bytes(fd.path or fd.name)
            try:
                if before is None or after is None:  # a file the fix adds or removes: placed whole
                    raise NotPlaced(f"{fd.name}: added or removed by the fix")
                try:
                    out[fd.name] = merged(files[fd.name], before, after, side, fd.name)
                    how = "three-way merge of the fix's own file"
                except NotPlaced as by_line:
                    if not entries.kind_of(fd.name):
                        raise
                    try:  # a generators' list: its entries apart (``framework.entries``)
                        out[fd.name], how = entries.merged(files[fd.name], before, after, side, fd.name), "by entry"
                    except NotPlaced as by_entry:
                        raise NotPlaced(f"{by_line}; {str(by_entry).split(': ', 1)[1]}") from None
                placement.append({"file": fd.name, "line": 1, "placed": how})
            except NotPlaced as exc:
                try:  # a merge conflict the changed lines alone may still place
                    made, where, _ = place([fd], self.copy({fd.name: files[fd.name]}), side)
                except NotPlaced:
                    raise NotPlaced(f"{exc}{self._since(commit, side, fd.name)}") from None
                out.update(made)
                placement += where
        return out, placement

    def _since(self, commit, side, path):
        """Which commits changed ``path`` between the fix and the tree at ``commit``, in words."""
        if not commit or not clone_commit(self.clone, commit):
            return ""
        span = f"{self.corrected}..{commit}" if side == "new" else f"{commit}..{self.buggy}"
        log = subprocess.run(["git", "-C", self.clone, "log", "--format=%h %s", span, "--", path],
                             capture_output=True, text=True).stdout.splitlines()
        if not log:
            return ""
        what = ("the release changed them after the fix" if side == "new"
                else "the fix builds on changes the release lacks")
        return f"; {what}: {len(log)} commit(s) to {Path(path).name}, {'; '.join(log[:3])}"

    def _on(self, files):
        return [fd for fd in self.diffs if fd.name in files]

    def copy(self, files):
        """The copy the diff is placed on: ``files``, and None for each other path the diff names
        (a file the release lacks)."""
        return {**{p: None for fd in self._on(files) for p in (fd.path, fd.old_path) if p}, **files}


def why_not_shipped(exc, fix):
    """Why the release lacks files the fix changes (``release_source.NotShipped``): where the fix's
    own tree has them before it, the release took them away or moved them after the fix, or they
    came after the release; either way another release may take the fix (``Entangled``,
    ``artifacts.other_side``). A file the fix adds, or a release without history, is refused."""
    if not fix.trees or exc.tree is None or any(fix.trees[0].read_bytes(p) is None for p in exc.paths):
        return Refused(str(exc))
    in_release = fix.holds(exc.tree.commit, {})
    return Entangled(f"{exc}; " + ("the release changed them after the fix (took the file away or moved it)"
                                   if in_release else "the fix builds on changes the release lacks (the file "
                                   "came after the release)"), in_release)


def changed_functions(path, before, after):
    """The functions of ``before`` (a file's bytes) whose lines differ in ``after``."""
    old, new = before.decode("utf-8", "replace").splitlines(), after.decode("utf-8", "replace").splitlines()
    lines = set()
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag != "equal":
            lines.update(range(i1 + 1, max(i2, i1 + 1) + 1))
    funcs = cpp.functions("\n".join(old))
    return [(path, fn) for fn in {cpp.enclosing(funcs, n) for n in lines} - {None}]


def caller_files(tables, files, placed):
    """The files beyond ``files`` whose operators or stub kernels run a function the fix changes
    through calls outside the dispatcher and the stubs (a helper another file's kernel calls, the
    callers between them, along every way), with those operators or stubs: a kernel rebuilt
    without them keeps calling the release's copy. Read from the walk reach's operators come from
    (``framework.callers``). ``tables``: the release's operator tables (``framework.tables``);
    ``placed``: the files with the fix made. Refuses a caller that is neither an op file nor a CPU
    stub kernel (a header's inline code)."""
    changed = [pair for path, data in files.items() if path in placed and path.endswith(".cpp")
               for pair in changed_functions(path, data, placed[path])]
    need = {}
    for (path, _, _), ends in walk(tables, changed).ends_without_stubs().items():
        if ends and path not in files:
            need.setdefault(path, set()).update(ends)
    cannot = sorted(p for p in need if parts.part_of(p) not in ("op", "stub"))
    if cannot:
        raise Refused(f"the fix changes code that {', '.join(cannot[:3])} call{'s' if len(cannot) == 1 else ''} "
                      f"on the way to {', '.join(sorted(need[cannot[0]])[:3])}: "
                      f"{parts.part_of(cannot[0])} code, which an override library does not rebuild")
    return need


def made_on(fix, source, files, version):
    """Whether the release (its ``source``, its rebuilt ``files``) holds the fix, and the files
    with the fix made the other way and where each change went (module doc); refuses
    (``Refused``) a fix that does not go on them, naming why."""
    commit = source.facts.get("commit") or source.facts.get("branch_point") or ""
    fix_in_release = None
    try:
        if fix.trees:
            fix_in_release = source.facts.get("fix", "").startswith(("in the branch point", "cherry-picked")) \
                if source.reconstructed else fix.holds(commit, files)
            placed, placement = fix.made(files, "new" if fix_in_release else "old", commit)
        else:
            direction, placed, placement = direction_of(fix.diffs, fix.copy(files))
            fix_in_release = direction == "reverse"
    except NoDirection as exc:
        raise Refused(str(exc)) from None
    except NotPlaced as exc:
        words = (f"the fix does not apply to torch {version}'s own files as {source.read_from} has them "
                 f"({'in reverse' if fix_in_release else 'forwards'}): {exc}")
        raise (Refused(words) if fix_in_release is None else Entangled(words, fix_in_release)) from None
    removed = sorted(path for path in files if path in placed and placed[path] is None)
    if removed:  # seen: pr33534 added cpu/CatKernel.cpp, so taking it back on 1.5.0 removes it
        raise Refused(f"making the fix {'in reverse' if fix_in_release else 'forwards'} removes "
                      f"{', '.join(removed)}: a library beside torch {version} cannot take a file's code away")
    if all(placed.get(path, data) == data for path, data in files.items()):
        # seen: a fix in the branch point's history that a later commit took back (pr27211)
        raise Refused(f"making the fix {'in reverse' if fix_in_release else 'forwards'} changes none of torch "
                      f"{version}'s own files ({source.read_from}): the release "
                      f"{'no longer holds it (a later commit undid or replaced it)' if fix_in_release else 'holds it already'}"
                      ", so both arms would be the release")
    return fix_in_release, placed, placement


def generator_inputs_of(source, paths, version):
    """The release's own generator inputs a fix changes (``Kernels.generator_inputs``), read from
    its tree: its generators run there (``generated_code``). A release whose registration is not
    known is refused: the arm's generated code changes which kernel a key calls, which only a
    registration takes over (an interposed op file changes the kernels, not which one is called)."""
    if not paths:
        return {}
    if not registers_operators(version):
        raise Refused(f"the fix changes which kernel its operators' keys call ({', '.join(paths[:3])}), which only "
                      f"registered kernels take over: {no_registration(version, paths)}")
    if not isinstance(source.tree, CloneTree):
        raise Refused(f"the fix changes torch {version}'s generator inputs ({', '.join(paths[:3])}), whose "
                      f"generated code is made from the release's tree, and {source.read_from} is no clone")
    inputs = {p: source.tree.read_bytes(p) for p in paths}
    # a core header the tree no longer checks in (1.4 on) is written by its generator alone
    inputs = {p: data for p, data in inputs.items() if data is not None or not generator_inputs.CHECKED_IN.search(p)}
    missing = sorted(p for p, data in inputs.items() if data is None)
    if missing:
        raise Refused(f"{', '.join(missing)} not in torch {version}'s tree ({source.read_from})")
    return inputs


def generated_for(source, inputs, arm_inputs, fix_in_release, version, shipped):
    """What an arm's generated code changes, judged (``generated_code``): the release tree's
    generators run on its own ``inputs`` and on the arm's (``arm_inputs``). Returns the
    manifest's ``generated`` (the operators whose kernels the arm's library must register, the
    backward nodes it interposes, the operators it adds with their Variable kernels, the generated
    files that differ, those left out), the generated headers placed for the arm's own files (path
    in the tree -> bytes: the wheel's own header, ``shipped``, with what the arm's generators
    change in it merged in, so that a reconstruction's own differences stay out), the slices of
    generated files the library compiles (path in the tree -> (the release's slice, the arm's):
    the backward nodes', ``generated_slices.sliced``; the Variable kernels of operators the arm
    adds, ``generated_slices.sliced_kernels``) and the arm's declarations (the ``arm-yaml`` side);
    refuses what no library takes, naming it (``Entangled`` where a release before the fix may)."""
    tree = source.tree
    made = {side: generated_headers.generate(tree.clone, tree.commit, files={**tree.changed, **side_inputs},
                                             autograd=True)
            for side, side_inputs in (("release", inputs), ("arm", arm_inputs))}
    broken = next((m["error"] for m in made.values() if m.get("error")), None)
    if broken:
        raise Refused(f"torch {version}'s generated code could not be made from its tree: {broken}")
    release, arm = made["release"]["files"], made["arm"]["files"]
    differ = generated_code.compared(release, arm)
    judged = generated_code.judged(differ, fix_in_release,
                                   (generated_code.registered(release), generated_code.registered(arm)))
    if judged.refusal:
        raise (Entangled(judged.refusal, fix_in_release) if judged.earlier else Refused(judged.refusal))
    if judged.added and not defines_schemas(version):
        raise Refused(f"the arm's generated code adds operators the release does not have ({', '.join(judged.added[:3])}"
                      f"{' ...' if len(judged.added) > 3 else ''}): registering a new schema is built for torch "
                      f"{', '.join('.'.join(map(str, v)) for v in DEFINES_SCHEMAS)}, not {version}")
    unlike = generated_code.unlike_the_wheel(source.facts.get("generated_headers"), judged, version)
    if unlike:
        raise Refused(unlike)
    headers = {}
    for name in judged.headers:  # ATen's under its own name, the autograd layer's under torch/
        include = (generated_code.AUTOGRAD_COMPILED_IN + name.rsplit("/", 1)[-1] if name.startswith("torch/")
                   else f"ATen/{name}")  # as the wheel ships it
        path, wheels = include if name.startswith("torch/") else f"aten/src/{include}", shipped.get(include)
        try:
            headers[path] = arm[name] if wheels is None else merged(wheels, release[name], arm[name], "old", name)
        except NotPlaced as exc:
            raise Refused(f"the arm's generated {name} does not go on torch {version}'s own: {exc}") from None
    slices = {}  # path the build compiles -> (the release's slice, the arm's)
    if judged.nodes:
        slices[generated_code.NODES_COMPILED_AS] = tuple(
            generated_slices.sliced(side[judged.nodes_file].decode("utf-8", "replace"), judged.nodes).encode()
            for side in (release, arm))
    for name, keys in judged.variable.items():
        slices[generated_code.AUTOGRAD_COMPILED_IN + name.rsplit("/", 1)[-1]] = tuple(
            generated_slices.sliced_kernels(side[name].decode("utf-8", "replace"), keys, judged.added).encode()
            for side in (release, arm))
    yamls = {**source.yamls, **{p: arm_inputs[p] for p in release_source.YAMLS if p in arm_inputs}}
    return ({"operators": judged.operators, "nodes": [generated_code.NODE.match(k).group(1) for k in judged.nodes],
             "headers": sorted(headers), "differ": sorted(differ), "release_serves": judged.served,
             "arm_lacks": judged.lacking, "arm_adds": judged.added,
             "variable_kernels": sorted(k[4:k.index("(")] for keys in judged.variable.values() for k in keys),
             "left_out": generated_code.left_out(release, arm), "left_out_for_added": judged.added_left_out,
             "seconds": [made["release"].get("seconds"), made["arm"].get("seconds")]}, headers, slices, yamls)


def _naming_shared(kernels, source, files, placed, release, version):
    """The files of the release that name what the fix changes in ATen's shared headers
    (``shared_headers``), read into ``files`` with the headers they include: rebuilt too, each by
    its part's route, though the fix changes none of them. Returns them (path -> the names each
    holds) and the kernels whose parts decide the route."""
    shared = kernels.files.get("shared")
    if not shared:
        return {}, kernels
    if source.tree is None:
        raise Refused(f"the fix changes code of shared headers ({', '.join(shared)}), whose includers are found "
                      f"in the release's tree, and {source.read_from} is no clone")
    naming = shared_headers.rebuilt_for({p: (files[p], placed.get(p, files[p])) for p in shared},
                                        source.tree.clone, source.tree.commit, files, version)
    for path in release_source.with_includers(source.tree, sorted(naming)):  # a TH generic file's includers too
        files[path] = source.tree.read_bytes(path)
    more, standins = closure(source.tree.read_bytes, sorted(naming), release.headers, source.tree.include_roots)
    source.includes.update(more)
    source.standins = sorted(set(source.standins) | set(standins))
    rebuilt = kernels.with_files(naming)
    if rebuilt.part == "header":
        raise Refused(f"no compiled file of torch {version} names what the fix changes in {', '.join(shared)}, "
                      "and the fix changes no other: both arms would compile the same")
    return naming, rebuilt


def prepare(kernels, sources, arm, wheel, version, folder):
    """The kernel part of a one-fix arm: the release's own source of the files the fix rebuilds,
    the fix made on them the one way it goes (module doc), and the tree the runtime builds the
    override from (``build.build``): ``release/`` (the faithful build's files), ``arm/`` (this
    arm's), ``include/`` (headers the wheel lacks) and ``yaml/``.

    Returns ``(fix_in_release, apply, part)``: ``part`` is None where this arm is the release as
    shipped (nothing to build), else the manifest's ``kernels``. Refuses (``Refused``) where no
    release source is at hand or the fix does not go on it."""
    release = Release.of_wheel(wheel, version)
    fix = Fix([fd for fd in patch.parse(kernels.diff) if fd.name in kernels.built + kernels.generator_inputs],
              sources.get("fix_clone") or "", arm.get("buggy_sha") or "", arm.get("corrected_sha") or "")
    record = layout.RECONSTRUCTION.format(version=version, wheel=release.sha256[:16])
    try:
        source = release_source.find(sources, arm, release, kernels.built, fix, record)
    except release_source.NotShipped as exc:
        raise why_not_shipped(exc, fix) from None
    except LookupError as exc:
        raise Refused(str(exc)) from None
    files = dict(source.files)
    for path in kernels.built:  # a generic file is compiled only where a file of its library includes it
        if not parts.compile_units(path, files):
            raise Refused(f"{path} is compiled by its includer, and no file of torch {version}'s "
                          f"{source.read_from} includes it")
    inputs = generator_inputs_of(source, kernels.generator_inputs, version)
    fix_in_release, placed, placement = made_on(fix, source, {**files, **inputs}, version)
    for path in kernels.files.get("declarations", ()):  # judged by its diff: now by the whole file
        section = parts.whole_file_section(files[path], placed.get(path, files[path]))
        if parts.only_list_entries(section):  # an enumeration the release's libraries number: kept
            placed[path] = files[path]
            placement = [*placement, {"file": path, "line": 1, "placed": "not: the release's list kept (entries "
                                                                         "added or taken away)"}]
            continue
        changes = parts.includer_code(section)
        if changes:
            raise Refused(f"{path}: as torch {version}'s whole file reads, the fix changes {changes}, not "
                          "declarations only: its includers, not rebuilt, would compile otherwise")
    direction = "reverse" if fix_in_release else "forward"
    apply = None if arm["arm"] == ("corrected" if fix_in_release else "buggy") else direction
    naming, rebuilt = _naming_shared(kernels, source, files, placed, release, version)
    route = rebuilt.route_on(registers_operators(version))
    callers = {}
    # the files whose operators run a changed helper: rebuilt too (an interposed function is
    # reached from every caller through the release's own symbol table)
    # judged alike for both arms, the one that is the release as released too: each is refused on
    # the same release for the same reason, so both walk to the same release (``other_side``)
    if source.tree is not None and route.registers:
        callers = caller_files(cached_tables(source.tree, layout.REACH_TABLES), files, placed)
        for path in callers:
            files[path] = source.tree.read_bytes(path)
        more, standins = closure(source.tree.read_bytes, sorted(callers), release.headers, source.tree.include_roots)
        source.includes.update(more)
        source.standins = sorted(set(source.standins) | set(standins))
    generated, arm_side, changed = None, {**files, **{p: d for p, d in placed.items() if p in files}}, kernels.built
    if inputs:
        generated, headers, slices, yamls = generated_for(
            source, inputs, {p: placed.get(p, d) for p, d in inputs.items()}, fix_in_release, version, release.headers)
        arm_side.update(headers)
        for path, (faithful, arms) in slices.items():  # compiled as the release's slice and the arm's
            files[path], arm_side[path] = faithful, arms
            changed = sorted({*changed, path})
            if path == generated_code.NODES_COMPILED_AS:
                route = route.interposing()
    if all(arm_side.get(p) == d for p, d in files.items()) and not (generated or {}).get("operators"):
        raise Refused(f"the fix changes nothing torch {version}'s CPU build compiles"
                      f"{' (its generated code differs in ' + ', '.join(generated['differ'][:3]) + ' only)' if generated else ''}"
                      ": both arms would be the release")
    tree = (Path(folder) / "kernels").resolve()
    sides = {"release": files, "arm": arm_side if apply else files}
    if generated and apply:
        sides["arm-yaml"] = yamls
    digests = kernel_tree.write(tree, source, sides)
    part = {"part": rebuilt.part, "route": str(route), "interposed_parts": list(route.interposed_parts),
            "changed": changed,
            "cuda_left_out": kernels.files.get("cuda", []),
            "rebuild": sorted({u for p in files if not p.endswith(".h") for u in parts.compile_units(p, files)}),
            "units": {p: parts.compile_units(p, files) for p in sorted(files) if parts.GENERIC.match(p)},
            "tree": str(tree),
            "rebuilt_for_callers": {path: sorted(ops) for path, ops in sorted(callers.items())},
            "rebuilt_for_shared_headers": naming,
            "source": source.describe(), "placement": placement, "sha256": digests,
            **({"generated": generated} if generated else {}),
            "diff_sha256": hashlib.sha256(kernels.diff.encode()).hexdigest()}
    return fix_in_release, apply, part if apply else None
