"""Each pipeline step as one function over explicit files and settings: called by the Snakemake
script shims (``scripts/``, one per rule, with the rule's params), and by the tests."""
import logging
import time
from pathlib import Path

from .io import InputError, read_csv, read_json, write_csv, write_json
from .redact import RedactingFilter

log = logging.getLogger("bugimpact")


def mine(cfg, repo, out_bugs, out_counts):
    """Step 1 (``cfg``: the config's ``mine``)."""
    from .mine.github import GitHubClient
    from .mine.releases import fetch_releases, load_snapshot, select_releases
    from .mine.run import mine as mine_releases, write_outputs
    if cfg["source"] == "snapshot":
        releases = load_snapshot(cfg["snapshot"])
    else:
        releases = fetch_releases(repo, cfg["cache"], GitHubClient(base_url=cfg["api_url"]),
                                  cfg["refresh"])
    chosen = select_releases(releases, cfg["tags"], cfg["versions"], cfg["include_prereleases"],
                             cfg["include_drafts"])
    log.info("%d of %d releases selected: %s", len(chosen), len(releases),
             ", ".join(r["tag_name"] for r in chosen))
    rows, counts = mine_releases(chosen, cfg.get("section_patterns"), repo)
    write_outputs(rows, counts, out_bugs, out_counts)
    log.info("%d bug-fix entries mined", len(rows))
    return rows, counts


def resolvers_from_config(cfg, api_url, repo):
    """The resolvers ``cfg`` (the config's ``resolve``) names, in order."""
    from .mine.github import GitHubClient
    from .resolve import ApiResolver, GitResolver, KnownResolver
    out = []
    for name in cfg["resolvers"]:
        if name == "git":
            if not cfg["clone"]:
                log.warning("resolver git skipped: resolve.clone is not set")
                continue
            out.append(GitResolver(cfg["clone"], repo, cfg["default_branch"] or None))
        elif name == "known":
            if cfg["known"]:
                out.append(KnownResolver(cfg["known"]))
        elif name == "api":
            out.append(ApiResolver(GitHubClient(base_url=api_url), repo))
    return out


def resolve(cfg, api_url, repo, bugs_csv, out_commits):
    """Step 2 (``cfg``: the config's ``resolve``)."""
    from .resolve import resolve_bugs, write_commits
    _, bugs = read_csv(bugs_csv)
    rows = resolve_bugs(bugs, resolvers_from_config(cfg, api_url, repo))
    if cfg["clone"]:
        from .resolve import mark_from_diff
        mark_from_diff(rows, cfg["clone"])
    write_commits(rows, out_commits)
    done = sum(1 for r in rows if r["status"] == "resolved")
    log.info("%d of %d bugs resolved; the rest are listed with their reason", done, len(rows))
    return rows


def merge_sheet(sheet_path, bugs_csv, commits_csv, out_merge):
    """Merge mining and resolution into the sheet (a side effect: the sheet is a person's, never an
    output), and report what changed."""
    from . import sheet as sheets
    from .config import SHEET_SCHEMA
    _, bugs = read_csv(bugs_csv)
    _, commits = read_csv(commits_csv)
    summary = sheets.update_sheet(sheet_path, bugs, commits, SHEET_SCHEMA)
    write_json(out_merge, {"sheet": str(sheet_path), **summary})
    log.info("sheet %s: %s", sheet_path, summary)
    return summary


def funnel(sheet_path, out_funnel):
    """The funnel, from the sheet as it is now: an edit to the sheet refreshes it."""
    from . import sheet as sheets
    _, rows, _ = sheets.read_sheet(sheet_path)
    write_csv(out_funnel, sheets.funnel(rows), ("stage", "count"))


def prepare_data(data_cfg, challenge, out_npz, out_meta):
    """A challenge's official files (``data_cfg``: the config's ``data``) to a canonical .npz."""
    from .datasets import prepare
    return prepare(challenge, out_npz, out_meta, data_cfg["cifar10"], data_cfg["mnist"])


def seeds(study_seed, policy, bug, out):
    from .experiment import write_seeds
    write_seeds(out, study_seed, bug, policy)


def toolchain(docker_cfg, out, log_path):
    """The toolchain image, built once per recipe by its own job; its record is the output."""
    from .artifacts.docker import build_toolchain
    with open(log_path, "a") as handle:
        record = build_toolchain(docker_cfg, handle)
    write_json(out, record)
    log.info("toolchain %s: %s, python %s", record["tag"], record["image_id"][:19],
             record["python"]["version"])
    return record


def docker_build(docker_cfg, spec, toolchain_json, out, log_path):
    """Step 4: build the wheel at a commit in the toolchain image; a failure is a result."""
    from .artifacts.docker import build_wheel
    if not docker_cfg["clone"]:
        raise ValueError("artifacts.docker.clone: a local clone of the framework is needed")
    manifest = build_wheel(spec["commit"], docker_cfg, read_json(toolchain_json), Path(out).parent,
                           log_path)
    write_json(out, manifest)
    log.info("build of %s: %s", spec["commit"][:12], manifest["status"])
    return manifest


def build_status(bug, arm, artifact_manifest, out, reach_json=None):
    if artifact_manifest is None:  # stopped by reach before any artifact was asked for
        from .reach.run import summary_line
        write_json(out, {"bug": bug, "arm": arm, "artifact": "", "status": "skipped",
                         "failure_class": "", "build_seconds": 0,
                         "log_tail": summary_line(read_json(reach_json))})
        return
    manifest = read_json(artifact_manifest)
    status = {"bug": bug, "arm": arm, "artifact": Path(artifact_manifest).parent.name,
              "status": manifest.get("status", "ok"), "failure_class": manifest.get("failure_class", ""),
              "build_seconds": manifest.get("build_seconds", ""), "log_tail": manifest.get("log_tail", "")}
    write_json(out, status)


def build_summary(statuses, out):
    rows = [read_json(p) for p in statuses]
    write_csv(out, rows, ("bug", "arm", "artifact", "status", "failure_class", "build_seconds",
                          "log_tail"))


def artifact_sources(config):
    """Where the artifact step gets wheels and fixes from: how it fetches, never what (the artifact
    is named by its id), so the rule gives these as an untracked param."""
    return {"wheel_cache": config["artifacts"]["wheel_cache"],
            "pip_index_url": config["artifacts"]["pip_index_url"],
            "fix_clone": config["artifacts"]["onefix"]["clone"] or config["resolve"].get("clone", ""),
            "fix_api": config["artifacts"]["onefix"]["api"], "api_url": config["mine"]["api_url"],
            "repo": config["repo"]}


def artifact(sources, spec, out, toolchain_json=None):
    """A manifest for a non-docker artifact (the docker builds have their own step); ``sources``
    is ``artifact_sources``, ``toolchain_json`` the docker runtime's toolchain record.

    An artifact that cannot be made (a release that does not exist for the runtime's Python, a fix
    that cannot be isolated on a release) is a result: status failed, its class and the reason. The
    bug becomes incomplete and the rest of the study goes on."""
    from .artifacts.onefix import Refused
    from .artifacts.sources import ChecksumMismatch, write_manifest
    started = time.time()
    try:
        if spec["source"] == "onefix":
            manifest = _onefix_artifact(sources, spec, Path(out).parent)
        else:
            manifest = _release_artifact(sources, spec, toolchain_json)
    except InputError:
        raise
    except Refused as exc:
        manifest = {"source": spec["source"], "status": "failed", "failure_class": "refused",
                    "error": str(exc), "log_tail": str(exc)}
    except ChecksumMismatch as exc:
        manifest = {"source": spec["source"], "status": "failed", "failure_class": "checksum",
                    "error": str(exc), "log_tail": str(exc)}
    except Exception as exc:  # noqa: BLE001 - recorded, with its message, as the artifact's failure
        manifest = {"source": spec["source"], "status": "failed", "failure_class": "download",
                    "error": str(exc), "log_tail": str(exc)[-2000:]}
    if manifest["status"] == "failed":
        log.error("artifact %s failed (%s): %s", spec["source"], manifest["failure_class"],
                  manifest["error"])
    manifest["build_seconds"] = round(time.time() - started, 3)
    write_manifest(out, manifest)
    return manifest


def _target_interpreter(spec, toolchain_json):
    """The interpreter a release wheel must fit: the venv's (probed when the plan was made), or
    the docker runtime image's (probed by the toolchain job)."""
    if spec.get("python"):
        return spec["python"]
    if not toolchain_json:
        raise ValueError("a docker runtime's wheel needs the toolchain's record")
    return read_json(toolchain_json)["python"]


def _release_artifact(sources, spec, toolchain_json=None):
    from .artifacts import sources as wheels
    started = time.time()
    if spec["source"] == "installed":
        return wheels.installed_manifest()
    if spec["source"] == "pypi":
        python = _target_interpreter(spec, toolchain_json)
        wheel = wheels.pypi_wheel(spec["version"], sources["wheel_cache"], python,
                                  sources["pip_index_url"])
        manifest = wheels.wheel_manifest("pypi", wheel, started)
        manifest.update(version_requested=spec["version"], python=python)
        return manifest
    if spec["source"] == "wheel":
        wheel = wheels.user_wheel(spec["wheel"], spec.get("sha256", ""), sources["wheel_cache"])
        return wheels.wheel_manifest("wheel", wheel, started)
    raise ValueError(f"artifact source {spec['source']!r} is built by the docker step")


def _onefix_artifact(sources, spec, folder):
    """A release wheel plus this arm's overlay of the fix's Python files."""
    import hashlib
    from .artifacts import onefix
    from .artifacts.diffs import fix_diff
    release = dict(spec["release"], python=spec.get("python"))
    base = _release_artifact(sources, release)
    try:
        diff_text, origin = fix_diff(sources, spec)
    except onefix.Refused:
        if str(spec.get("onefix", "")).startswith("no:"):  # the resolver read the real diff
            raise onefix.Refused(f"{spec['onefix'][4:]}, which a release wheel cannot take (the "
                                 f"sheet's onefix, read from the fix's diff)") from None
        raise
    patch_text, kinds = onefix.isolate(diff_text, wheel_files=onefix.wheel_files(base["wheel"]))
    fix_in_release, direction, overlay = onefix.make_overlay(
        base["wheel"], patch_text, kinds["python"], spec["arm"], folder)
    return {**base, "source": "onefix", "arm": spec["arm"], "release": release,
            "diff_origin": origin, "diff_sha256": hashlib.sha256(diff_text.encode()).hexdigest(),
            "patch": str((folder / "fix.diff").resolve()),
            "patch_sha256": hashlib.sha256(patch_text.encode()).hexdigest(),
            "files_changed": kinds["python"], "files_not_shipped": kinds["not_shipped"],
            "fix_in_release": fix_in_release, "apply": direction,
            "overlay_dir": str((folder / "overlay").resolve()), "overlay": overlay}


RUNTIME_SETTINGS = {"interpreter": None, "requirements": (), "gpus": "", "toolchain_json": None,
                    "installer": "uv", "cache": "data/cache/uv"}


def runtime(kind, artifact_manifest, out, settings=None):
    """The runtime that trains on one artifact; one that cannot be made is a recorded failure.
    ``settings`` (defaults: ``RUNTIME_SETTINGS``): the interpreter, extra ``requirements``,
    docker's ``gpus``, the docker runtime's ``toolchain_json``, and how a venv is made
    (``installer``, uv or pip, and uv's ``cache``)."""
    from .artifacts import runtimes
    manifest = read_json(artifact_manifest)
    folder = Path(out).parent
    if manifest.get("status") == "failed":
        what = "build" if manifest.get("source") == "docker" else "artifact"
        result = {"kind": kind, "status": "failed",
                  "reason": f"{what} failed ({manifest.get('failure_class')}): {manifest.get('error')}"}
    else:
        from .artifacts.kinds import kind as runtime_kind
        try:
            result = runtime_kind(kind).make(manifest, folder, {**RUNTIME_SETTINGS, **(settings or {})})
        except InputError:
            raise
        except Exception as exc:  # noqa: BLE001 - recorded: the bug becomes incomplete, not the study
            log.error("runtime %s failed: %s", kind, exc)
            result = {"kind": kind, "status": "failed", "reason": f"runtime failed: {exc}"}
    result["artifact"] = manifest
    runtimes.write_runtime(out, result)
    return result


def arms(bug, runtime_jsons, out, reach_json=None, gated=""):
    """Whether a bug's two arms can run, read from their runtimes once both are made: a refused or
    failed artifact, or a runtime that could not be made, stops the bug before any run is
    scheduled, with one short reason. Also what each arm is, for the verdict's scope, and the
    bug's reach verdict; ``gated``: the reach verdict that stopped it before its artifacts."""
    from .artifacts.onefix import describe
    from .reach.run import summary_line
    reach = read_json(reach_json) if reach_json else None
    if gated:
        result = {"bug": bug, "runnable": False, "gated": gated, "reach": reach, "arms": {},
                  "reason": f"no artifacts, no runs: reach says {summary_line(reach)}"}
        write_json(out, result)
        log.info("%s: %s", bug, result["reason"])
        return result
    runtimes = {arm: read_json(path) for arm, path in runtime_jsons.items()}
    failed = {arm: r.get("reason", "runtime unavailable") for arm, r in runtimes.items()
              if r.get("status") == "failed"}
    if len(failed) == len(runtimes) and len(set(failed.values())) == 1:
        reason = next(iter(failed.values()))  # both arms on one refused fix: said once
    else:
        reason = "; ".join(f"{arm}: {why}" for arm, why in failed.items())
    result = {"bug": bug, "runnable": not failed, "reach": reach,
              "reason": f"no runs: {reason}" if failed else "",
              "arms": {arm: describe(r.get("artifact") or {}) for arm, r in runtimes.items()}}
    write_json(out, result)
    log.info("%s: %s", bug, result["reason"] or "both arms ready")
    return result


def train_run(train_cfg, bug, arm, arm_spec, run_index, key, seeds_json, data_npz, data_meta,
              runtime_json, out, log_path):
    """Step 5: one run. ``train_cfg`` (the config's ``train``) gives the experiment, which is also
    in ``key``, and how runs are attempted: retries, timeout, GPUs, the fork server."""
    from .train import build_spec, train_one
    spec = build_spec(train_cfg, bug, arm, arm_spec, int(run_index),
                      archived_seeds(seeds_json, train_cfg, bug), data_npz, read_json(data_meta),
                      key, arm_spec["artifact"])
    return train_one(spec, out, log_path, read_json(runtime_json), retries=train_cfg["retries"],
                     threads=train_cfg["threads"], gpus=train_cfg["gpus"],
                     timeout=train_cfg["timeout_s"], fork_server=train_cfg["fork_server"])


def archived_seeds(path, train_cfg, bug):
    """The bug's archived seeds. The arms gate archives them before any run is asked for; a run
    asked for directly, or after the archive was lost, archives them again: they are a function
    of the study seed, the policy and the bug, so the file comes back identical."""
    from .experiment import write_seeds
    from .plan import check_seeds
    if not Path(path).exists():
        write_seeds(path, train_cfg["study_seed"], bug, train_cfg["seed_policy"])
        log.warning("%s: the seeds archive was missing; archived again from the study seed", bug)
    check_seeds(Path(path), bug)
    return read_json(path)


def early(runs, bug, records, out, repeats=()):
    """The early decision, made from the first ``runs`` pairs (and the repeats): it only asks
    for later records (``Plan.needed``), so redoing it never touches a finished one."""
    from .records import read_record
    from .stats.analysis import early_decision
    decision = early_decision([read_record(p) for p in records], runs,
                              [read_record(p) for p in repeats] if repeats else None)
    decision["bug"] = bug
    write_json(out, decision)
    log.info("%s: %s (%s)", bug, decision["decision"], decision["reason"])
    return decision


def sequential_options(design, stats_cfg):
    """The analysis's view of train.sequential (``design``: ``study_design``): the design of each
    bug, which spends the bug's share of the study's alpha, and its futility rules; or None."""
    from .stats.sequential import design_from_config
    built = design_from_config(design["sequential"], design["runs"], stats_cfg["alpha"],
                               stats_cfg["power"], design.get("family", 1))
    if built is None:
        return None
    return {"design": built, "min_effect": stats_cfg["min_effect"],
            "futility_power": design["sequential"]["futility_power"]}


def bug_stats(stats_cfg, design, bug, records, out_csv, out_json, tags="", arms_json=None,
              decisions=()):
    """One bug's statistics; ``design``: the config's train ``runs``, ``seed_policy`` and
    ``sequential`` (``study_design``); ``arms_json``: the ``arms`` gate of the bug;
    ``decisions``: the early decision and sequential looks that chose its records."""
    from .stats.tables import bug_stats as compute
    return compute(bug, records, stats_cfg, design["runs"], design["seed_policy"], out_csv, out_json,
                   tags, sequential_options(design, stats_cfg),
                   read_json(arms_json) if arms_json else None,
                   early=next((read_json(p) for p in decisions if "/early/" in str(p)), None))


def study_design(train_cfg, family=1):
    """What the statistics need to know of how runs were made; ``family``: the bugs of the study
    (controls included), among which a group-sequential design shares the study's alpha."""
    return {**{k: train_cfg[k] for k in ("runs", "seed_policy", "sequential")}, "family": family}


def stage(stats_cfg, design, bug, pairs, records, out):
    """One interim look (``design``: ``study_design``), asked for only when the looks before it
    continued; a look that lacks a finished pair says continue (the runs are there to be made)."""
    from .records import read_record
    from .stats.analysis import finite, finished_pairs, sequential_look
    from .stats.exact import metric_values
    options = sequential_options(design, stats_cfg)
    metric = stats_cfg["metrics"][0]
    pairs_ok = finished_pairs([read_record(p) for p in records], pairs)
    bad = [] if pairs_ok is None else [
        f"{r['spec'].get('arm')} run {r['spec'].get('run')}" for pair in pairs_ok for r in pair
        if not finite(r["metrics"].get(metric))]
    if pairs_ok is None or bad:  # a non-finite metric is a failed measurement, as in the analysis
        why = (f"{metric} is not a finite number in {', '.join(bad)}" if bad
               else f"a run of the first {pairs} pairs did not finish")
        decision = {"decision": "continue", "runs": pairs, "reason": why}
    else:
        values = metric_values([r for pair in pairs_ok for r in pair], metric)  # exact if counted
        look = sequential_look(options["design"], values[0::2], values[1::2], stats_cfg["alpha"],
                               options["min_effect"], options["futility_power"])
        decision = dict(look, runs=pairs, metric=metric)
    decision["bug"] = bug
    write_json(out, decision)
    log.info("%s after %d pairs: %s (%s)", bug, pairs, decision["decision"], decision["reason"])
    return decision


def study_stats(study, stats_cfg, bugs, bug_jsons, funnel_csv, out_pvalues, out_verdicts,
                out_summary):
    from .stats.tables import study_tables
    funnel_rows = read_csv(funnel_csv)[1] if funnel_csv and Path(funnel_csv).exists() else []
    return study_tables(bug_jsons, bugs, study, stats_cfg, funnel_rows, out_pvalues, out_verdicts,
                        out_summary)


def bug_done(bug, stats_json, out):
    """The bug's verdict and its reason, one line (what ``bugimpact run --bug`` ends with)."""
    from .io import write_text
    row = (read_json(stats_json).get("rows") or [{}])[0]
    line = f"{bug}: {row.get('verdict', 'no verdict')}: {row.get('reason', '')}"
    write_text(out, line + "\n")
    log.info("%s", line)


def bug_figure(bug_json, out):
    from .stats.figures import bug_figure as draw
    data = read_json(bug_json)
    draw(data["info"]["bug"], data["rows"][0]["verdict"] if data["rows"] else "",
         data["info"]["values"], out)


def std_figure(bug_jsons, out):
    from .stats.figures import std_figure as draw
    from .stats.tables import std_values
    draw(std_values(bug_jsons), out)


def study_setup(config):
    """The report's one-line description of the study's setup."""
    t = config["train"]
    return (f"{t['model']} on {t['challenge']}, {t['epochs']} epochs, {t['runs']} runs per arm, "
            f"seed policy {t['seed_policy']}, {t['threads']} thread(s), device {t['device']}; "
            f"alpha {config['stats']['alpha']}, {config['stats']['correction']} correction over "
            f"the tested bugs x metrics.")


def report(study, setup, verdicts, pvalues, summary, figures, std_png, builds, out):
    from .stats.report import render
    render(study, setup, verdicts, pvalues, summary, builds, {Path(f).stem: f for f in figures},
           std_png, out)


def preflight(config, out=None, nvidia_smi=None, builds_only=False, reach_jsons=None):
    """Everything checkable in seconds before builds start; raises when a check fails, after
    logging the table. The workflow's builds wait for this job, which fails only for the checks
    that concern builds (``builds_only``): the other failures are recorded by their own steps.
    ``reach_jsons``: reach verdicts (default: those written); a bug they stop needs no build."""
    from . import preflight as checks
    from .config import SHEET_SCHEMA
    from .plan import Plan
    plan = Plan(config, SHEET_SCHEMA)
    gated = plan.gated_bugs(plan.reach_gating_jsons() if reach_jsons is None else reach_jsons)
    results = checks.run(config, plan, Path(nvidia_smi).read_text() if nvidia_smi else None,
                         gated=gated)
    text = checks.table(results)
    log.info("preflight:\n%s", text)
    bad = checks.failed(results, builds_only)
    if bad:
        raise InputError("preflight", f"{len(bad)} check(s) failed, so no build starts:\n"
                         f"{checks.table(bad)}")
    if out:
        from .io import write_text
        write_text(out, text)
    return results


def failures_at_end(summary_csv, builds_csv):
    """Lines for the terminal when the workflow ends: every artifact that could not be made and
    every bug with failed runs; empty when nothing failed."""
    lines = []
    if Path(builds_csv).exists():
        lines += [f"  artifact for {r['bug']} ({r['arm']}): {r['failure_class']}: "
                  f"{(r['log_tail'] or '').strip().splitlines()[-1][:200] if r['log_tail'] else ''}"
                  for r in read_csv(builds_csv)[1] if r["status"] == "failed"]
    if Path(summary_csv).exists():
        lines += [f"  {r['name']}" for r in read_csv(summary_csv)[1] if r["section"] == "failed"]
    return (["bugimpact: these failed (recorded; their bugs are incomplete, the rest of the study "
             "is written):"] + lines) if lines else []


def run_script(snakemake, func, **kwargs):
    """Run a step under Snakemake with its log file receiving everything the step says."""
    handler = logging.FileHandler(snakemake.log[0]) if snakemake.log else logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    handler.addFilter(RedactingFilter())  # no token reaches a log file, whoever logged it
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.INFO)
    try:
        func(**kwargs)
    except Exception:
        log.exception("step failed")
        raise

