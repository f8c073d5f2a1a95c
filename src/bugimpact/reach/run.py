"""The workflow's reach step: judge each fix against a trace of the workload on a release (the
trace itself: ``steps.traces``)."""
import logging
import time
from pathlib import Path

from ..artifacts.diffs import fix_diff, fix_trees, landed_commits
from ..artifacts.source_kinds import source
from ..framework import patch
from ..framework.tables import DirTree, GitTree, SourceTree, cached_tables
from ..io import read_json, write_json
from ..layout import REACH_TABLES
from ..overrides.release_source import archive_of, read_archive
from ..train import RunTarget, short_spec
from .static import map_diff, needs_tables
from .verdict import judge

log = logging.getLogger("bugimpact.reach")
JUDGED_AT = "judged_at"  # when a verdict was made: in its file only (``judge_bug``)


def trace_spec(train_cfg, steps, data_npz, data_sha256, artifact, key=""):
    """The harness spec of a reach trace: the study's experiment, a seed of its own, the data."""
    return short_spec(train_cfg, RunTarget("__reach__", "trace", {"artifact": artifact}, 0, key),
                      data_npz, data_sha256, trace={"steps": steps})


def tables_tree(sources, reach_cfg, arm, diff_text):
    """The tree to read the operator tables from: a clone at the corrected commit; else the
    release's own source shipped beside a kernel fix's patch, the one its one-fix arm rebuilds
    (``artifacts.release_files``: its changed files and operator declarations, so a function
    called from files it does not hold is ``unknown``, never guessed); else the snapshot (of
    ``reach.tables``) where most of the diff's hunks are found."""
    clone = sources.get("fix_clone")
    if clone and arm.get("buggy_sha") and arm.get("corrected_sha"):
        return GitTree(clone, arm["corrected_sha"])
    if arm.get("patch"):
        archive = archive_of(arm["patch"])
        if archive.exists():
            return SourceTree(read_archive(archive))
    folder = Path(reach_cfg.get("tables") or "")
    if not reach_cfg.get("tables") or not folder.is_dir():
        raise LookupError(
            "no operator tables: " + (f"the clone {clone} holds no commit that makes this patch (its "
                                      "index lines name blobs it lacks): give the fix's buggy_sha and "
                                      "corrected_sha" if clone else
                                      "set resolve.clone (or artifacts.onefix.clone)")
            + ", ship its release's source beside the patch (bin/release-sources), or set reach.tables "
              "to a folder of source snapshots")
    candidates = ([folder] if (folder / "aten").is_dir()
                  else sorted(p for p in folder.iterdir() if (p / "aten").is_dir()))
    files = patch.parse(diff_text)
    def located(root):
        tree = DirTree(root)
        return sum(1 for fd in files for h in fd.hunks
                   if (text := tree.read(fd.name)) is not None and patch.locate(h, text.splitlines()))
    best = max(candidates, key=lambda root: (located(root), root.name))
    return DirTree(best, label=f"snapshot {best.name[:12]}")


def map_fix(diff_text, sources, reach_cfg, arm, cache_dir):
    """The static mapping of one fix's diff; the operator tables are read only for C++ changes,
    the fix's own files (``artifacts.diffs.fix_trees``) for where its changed lines run. A fix
    given as a patch alone is read at the commits the clone says it was made between
    (``landed_commits``), where the clone holds them."""
    clone = sources.get("fix_clone")
    if clone and arm.get("patch") and not (arm.get("buggy_sha") and arm.get("corrected_sha")):
        found = landed_commits(clone, diff_text)
        if found:
            arm = dict(arm, buggy_sha=found[0], corrected_sha=found[1])
    old_tree, new_tree = fix_trees(sources, arm)
    if not needs_tables(diff_text):
        return map_diff(diff_text, None, old_tree, new_tree)
    tables = cached_tables(tables_tree(sources, reach_cfg, arm, diff_text), cache_dir)
    return map_diff(diff_text, tables, old_tree, new_tree)


def judge_bug(bug, spec, sources, reach_cfg, trace_json, out, cache_dir=REACH_TABLES):
    """The reach verdict of one bug, written to ``out``; what cannot be judged is ``unknown``."""
    started = time.time()
    result = {"bug": bug, "verdict": "unknown", "reached": [], "unknown": [], "not_reached": []}
    kind = spec.get("kind")
    arms = spec["arms"]
    if kind == "control":
        faults = sorted({a.get("fault") for a in arms.values() if a.get("fault")})
        same = arms["buggy"] == arms["corrected"]
        result.update(verdict="reached" if faults else ("not reached" if same else "unknown"),
                      reached=[f"fault {f}, injected by the harness" for f in faults],
                      not_reached=["both arms are the same build"] if same else [])
    else:
        arm = source(arms["corrected"]["source"]).fix(arms)
        try:
            diff_text, origin = fix_diff(sources, {k: v for k, v in arm.items() if v})
            mapping = map_fix(diff_text, sources, reach_cfg, arm, cache_dir)
            static_s = time.time() - started
            trace = read_json(trace_json) if trace_json else None
            if not trace or trace.get("status") != "ok":
                result["unknown"] = [f"no trace of the workload: {(trace or {}).get('reason', 'none')}"]
                result["mapping"] = mapping.as_dict()
            else:
                result.update(judge(mapping, trace), mapping=mapping.as_dict())
            result.update(diff=origin, static_s=round(static_s, 3))
        except Exception as exc:  # noqa: BLE001 - a fix that cannot be mapped is unknown, said why
            # the verdict says why in a line; the job's log keeps the traceback
            log.warning("bug %s: its fix could not be mapped", bug, exc_info=True)
            result["unknown"] = [f"{type(exc).__name__}: {exc}"]
    result["scope"] = scope(trace_json, result)
    result["wall_s"] = round(time.time() - started, 3)
    # A remade verdict never has the bytes of the one before. The arms gate, a checkpoint, waits on
    # it, and the statistics on the gate: Snakemake expects the gate to be remade once the verdict
    # is, but skips it when the verdict's bytes did not change, and then drops the statistics and
    # their changed settings from that run without a word (snakemake#1493 is of this kind). The
    # gate leaves this out, so what comes after is still the same bytes for the same verdict.
    result[JUDGED_AT] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    write_json(out, result)
    log.info("%s: %s", bug, result["verdict"])
    return result


def scope(trace_json, result):
    if not trace_json or not Path(trace_json).exists():
        return ""
    trace = read_json(trace_json)
    if trace.get("status") != "ok":
        return ""
    s = trace["spec"]
    return (f"{s['model']} on {s['challenge']}, batch {s['batch_size']}/{s['test_batch_size']}, "
            f"{s['optimizer']}, {trace['steps']} steps traced on torch {trace['torch_version']} "
            f"({trace['device']}); tables {result.get('tables') or (result.get('mapping') or {}).get('tables', '?')}")


def verdict_settings(reach_cfg):
    """What of ``reach`` a bug's verdict is judged with (the reach rule's tracked param): not the
    releases the reach matrix traces, so that naming them judges no bug again."""
    return {k: v for k, v in reach_cfg.items() if k != "releases"}


def gate(reach, device):
    """Whether a reach verdict stops its bug before artifacts and runs (where reach.skip applies):
    not reached, or not reached on cpu in a CPU study."""
    if not reach:
        return False
    verdict = reach.get("verdict")
    return verdict == "not reached" or (verdict == "not reached on cpu" and device == "cpu")


def summary_line(reach):
    v = reach.get("verdict", "unknown")
    detail = reach.get("reached") or reach.get("unknown") or reach.get("not_reached") or []
    return f"{v}: {'; '.join(detail[:3])}" if detail else v
