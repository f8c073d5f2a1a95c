"""Before hours of builds: everything about a study that can be checked in seconds.

``bugimpact preflight`` (and the workflow's first job, which every build and artifact waits for)
prints one table: each check, pass or fail, what it found, and the fix for a failure. Checks:
accepted commits in the clone; each commit's submodules and the URL each will fetch (after
``git_rewrites``); the Docker engine and the toolchain image or its base image; free disk against the
builds still to make; the GPUs (``nvidia-smi``) against the toolchain's CUDA and architectures and the
release wheels' CUDA era; the dataset files and their checksums; the runtime's interpreter and the
wheel each release arm will use; the C++ compiler a kernel fix's override library needs.
"""
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from . import layout
from .artifacts import interpreters, onefix
from .artifacts.interpreters import pip_target
from .artifacts.runtimes import list_gpus
from .artifacts.source_kinds import source, sources
from .artifacts.sources import pypi_cache_dir
from .challenges import problems, raw_file
from .io import InputError
from .overrides.release_build import BuildRefused, compiler

# Compute capability by GPU name, for drivers too old to report compute_cap.
KNOWN_GPUS = (("H100", 9.0), ("H200", 9.0), ("GH200", 9.0), ("L40", 8.9), ("L4", 8.9),
              ("A100", 8.0), ("A30", 8.0), ("A10", 8.6), ("A40", 8.6), ("RTX 30", 8.6),
              ("T4", 7.5), ("RTX 20", 7.5), ("V100", 7.0), ("P100", 6.0), ("P40", 6.1), ("K80", 3.7))


@dataclass
class Check:
    name: str
    status: str  # pass, warn or FAIL
    detail: str
    fix: str = ""


def run(config, plan, nvidia_smi=None, timeout=20, gated=()):
    """Every check for this config and plan (``nvidia_smi``: recorded output, for tests);
    ``gated``: bugs that reach stopped, whose builds will never start."""
    checks = []
    arms = [(name, arm, spec) for name, bug in sorted(plan.bugs.items()) for arm, spec in bug.spec["arms"].items()]
    built_arms = [(bug, arm, spec) for bug, arm, spec in arms  # builds that reach does not stop
                  if source(spec["source"]).built and bug not in gated]
    if gated:
        checks.append(Check("reach", "pass", f"no build needed for {', '.join(sorted(gated))}: "
                            "the workload cannot reach what they fix"))
    refused = {bug: spec["onefix"] for bug, _, spec in arms if spec.get("onefix")}
    if refused:  # known before any download: the sheet's verdict was read from the real diff
        checks.append(Check("one-fix sheet rows", "warn", "; ".join(
            f"{bug}: {why}" for bug, why in sorted(refused.items())) + ": refused, no runs",
            "reject those rows (or build them: artifacts.source docker)"))
    # the arms whose commits a clone must hold: a build's (not stopped by reach), and a diff's
    # that no patch file gives
    checks += _commits(config, [(bug, arm, spec) for bug, arm, spec in arms
                                if source(spec["source"]).commit_fields and bug not in refused
                                and not spec.get("patch")
                                and not (source(spec["source"]).built and bug in gated)])
    if built_arms:
        checks += _submodules(config, built_arms, timeout)
    if built_arms or plan.kind.needs_toolchain:
        checks += _docker(config)
        checks += _disk(config, plan, built_arms)
    checks += _gpus(config, plan, nvidia_smi)
    checks += [check for challenge in plan.challenges() for check in _data(config, challenge)]
    checks += _interpreter(config, plan)
    checks += _compiler(arms)
    return checks


def _compiler(arms):
    """The C++ compiler that builds kernel fixes' override libraries, where an arm's diff (a patch
    file) changes kernels: found, with its version, or its absence named before any build."""
    bugs = set()
    for bug, _, spec in arms:
        if spec.get("patch") and Path(spec["patch"]).is_file() and source(spec["source"]).overrides:
            try:
                if onefix.isolate(Path(spec["patch"]).read_text(encoding="utf-8"))[2] is not None:
                    bugs.add(bug)
            except onefix.Refused:
                continue  # refused by its artifact, with the reason
    if not bugs:
        return []
    try:
        _, version = compiler()
    except BuildRefused as exc:
        return [Check("compiler", "FAIL", f"{exc} ({', '.join(sorted(bugs))})", "apt-get install g++")]
    return [Check("compiler", "pass", f"{version} builds the kernels of {', '.join(sorted(bugs))}")]


# Failures that stop the workflow's builds. The others are also recorded by their own steps when
# the workflow runs (a missing wheel, data, a GPU a wheel cannot use), so the rest goes on there.
BUILD_CHECKS = ("submodules", "docker", "toolchain image", "disk", "gpus vs toolchain")


def failed(checks, builds_only=False):
    """The failed checks (``builds_only``: those that stop the builds, the built sources'
    commits among them)."""
    builds = set(BUILD_CHECKS) | {f"commits ({name})" for name, s in sources().items() if s.built}
    return [c for c in checks if c.status == "FAIL" and (not builds_only or c.name in builds)]


def table(checks):
    """The checks as a plain-text table, failures with their fix."""
    width = max([len(c.name) for c in checks] + [5])
    lines = [f"{'check':<{width}}  status  detail", f"{'-' * width}  ------  ------"]
    for c in checks:
        lines.append(f"{c.name:<{width}}  {c.status:<6}  {c.detail}")
        if c.fix:
            lines.append(f"{'':<{width}}          fix: {c.fix}")
    bad = failed(checks)
    lines.append(f"preflight: {len(checks)} checks, {len(bad)} failed"
                 + (f" ({', '.join(c.name for c in bad)})" if bad else ""))
    return "\n".join(lines) + "\n"


def _git(clone, *args, timeout=60):
    return subprocess.run(["git", "-C", str(clone), *args], capture_output=True, text=True,
                          timeout=timeout)


def _commits(config, arms):
    """Whether each source's clone holds the commits its arms name (``Source.commit_fields``); a
    missing clone fails a build (``Source.built``) and only warns otherwise (a diff can also come
    from the API)."""
    checks = []
    for name in sorted({spec["source"] for _, _, spec in arms}):
        kind = source(name)
        mine = [(bug, arm, spec) for bug, arm, spec in arms if spec["source"] == name]
        clone, key = kind.clone(config)
        wanted = sorted({spec[k] for _, _, spec in mine for k in kind.commit_fields})
        if not clone or not Path(clone).exists():
            checks.append(Check(f"commits ({name})", "FAIL" if kind.built else "warn",
                                f"{len(wanted)} commits to check, but {key} is "
                                f"{clone or 'not set'}",
                                f"clone the framework once and set {key} to it"))
            continue
        missing = [sha for sha in wanted if _git(clone, "cat-file", "-e", f"{sha}^{{commit}}").returncode]
        if missing:
            bugs = sorted({b for b, _, s in mine for k in kind.commit_fields if s.get(k) in missing})
            checks.append(Check(f"commits ({name})", "FAIL",
                                f"{len(missing)} of {len(wanted)} not in {clone}: "
                                f"{', '.join(m[:12] for m in missing[:5])} (bugs {', '.join(bugs[:5])})",
                                f"git -C {clone} fetch origin, or correct those rows of the sheet"))
        else:
            checks.append(Check(f"commits ({name})", "pass", f"all {len(wanted)} in {clone}"))
    return checks


def rewrite(url, rewrites):
    """The URL git will fetch: the longest matching ``insteadOf`` prefix replaced, as git does."""
    best = max((old for old in rewrites if url.startswith(old)), key=len, default=None)
    return rewrites[best] + url[len(best):] if best is not None else url


def _submodules(config, docker_arms, timeout):
    cfg = config["artifacts"]["docker"]
    clone, rewrites = cfg["clone"], cfg.get("git_rewrites", {})
    if not clone or not Path(clone).exists():
        return []
    urls, missing_entries = {}, set()
    for sha in sorted({spec["commit"] for _, _, spec in docker_arms}):
        out = _git(clone, "config", "--blob", f"{sha}:.gitmodules", "--get-regexp",
                   r"^submodule\..*\.url$")
        for line in out.stdout.splitlines():
            name, url = line.split(" ", 1)
            name = name[len("submodule."):-len(".url")]
            urls.setdefault(rewrite(url, rewrites), set()).add(url)
            if not (Path(clone) / ".git" / "modules" / name).exists():
                missing_entries.add(name)
    if not urls:
        return [Check("submodules", "pass", "the commits name no submodules")]
    unreachable = []
    for url in sorted(urls):
        try:
            probe = subprocess.run(["git", "-c", "protocol.file.allow=always", "ls-remote",
                                    "--exit-code", "-q", url, "HEAD"], capture_output=True,
                                   text=True, timeout=timeout,
                                   env=dict(os.environ, GIT_TERMINAL_PROMPT="0"))
            ok = probe.returncode in (0, 2)  # 2: reachable, no HEAD ref
        except subprocess.TimeoutExpired:
            ok = False
        if not ok:
            unreachable.append(url)
    shown = ", ".join(f"{sorted(urls[u])[0]} -> {u}" if sorted(urls[u])[0] != u else u
                      for u in sorted(urls)[:3])
    checks = []
    if unreachable:
        checks.append(Check("submodules", "FAIL",
                            f"{len(unreachable)} of {len(urls)} submodule URLs cannot be fetched: "
                            f"{', '.join(unreachable[:4])}",
                            "mirror them and add artifacts.docker.git_rewrites: {old-prefix: "
                            "new-prefix} (applied in the build's clone only)"))
    else:
        checks.append(Check("submodules", "pass", f"{len(urls)} URLs reachable ({shown}"
                            f"{', ...' if len(urls) > 3 else ''})"))
    if missing_entries:
        checks.append(Check("submodule entries", "warn",
                            f"{len(missing_entries)} submodules not initialised in the clone "
                            f"({', '.join(sorted(missing_entries)[:4])}): each build fetches them",
                            f"git -C {clone} submodule update --init --recursive, then mirror"))
    return checks


def _docker(config):
    from .artifacts.docker import TOOLCHAIN_REPO, recipe, toolchain_name  # the Docker SDK: only for a docker study
    from .artifacts.engine import Engine  # the Docker SDK: only where an engine is used
    cfg = config["artifacts"]["docker"]
    if not Engine.answers():
        return [Check("docker", "FAIL", "no Docker engine answers",
                      "start dockerd (bin/start-docker), or use release wheels (source pypi/onefix)")]
    engine = Engine()
    parts = recipe(cfg)[0]
    tag = f"{TOOLCHAIN_REPO}:{toolchain_name(cfg)}"
    if engine.image_id(tag):
        return [Check("toolchain image", "pass", f"{tag} exists")]
    base = cfg.get("base_image") or re.search(r"ARG BASE_IMAGE=(\S+)", parts["dockerfile"]).group(1)
    if engine.image_id(base):
        return [Check("toolchain image", "pass", f"{tag} will be built from {base} (present)")]
    if engine.in_registry(base):
        return [Check("toolchain image", "pass", f"{tag} will be built from {base} (in its registry)")]
    return [Check("toolchain image", "FAIL", f"{tag} is not built and its base image {base} is "
                  "neither here nor reachable in a registry",
                  "docker pull/load the base image, set artifacts.docker.base_image to one you have, "
                  "or make one with bin/make-base-image")]


def _disk(config, plan, docker_arms):
    from .artifacts.docker import preset  # the Docker SDK: only for a docker study
    per_build = float(preset(config["artifacts"]["docker"]).get("disk_gb_per_build", 2))
    todo = sorted({spec["artifact"] for _, _, spec in docker_arms
                   if not Path(layout.ARTIFACT.format(artifact=spec["artifact"])).exists()})
    need = per_build * len(todo)
    folder = Path(".").resolve()
    free = shutil.disk_usage(folder).free / 1e9
    return [disk_check(need, free, len(todo), per_build, folder)]


def disk_check(need_gb, free_gb, builds, per_build, folder):
    detail = (f"{builds} builds to make x {per_build:g} GB = {need_gb:.0f} GB needed, "
              f"{free_gb:.0f} GB free at {folder}")
    if need_gb > free_gb:
        return Check("disk", "FAIL", detail, "free disk, or build fewer bugs at a time "
                     "(bugimpact run --bug <bug>)")
    return Check("disk", "pass" if need_gb < 0.8 * free_gb else "warn", detail)


def require_gpu(nvidia_smi="nvidia-smi"):
    """Refuse ``train.device: cuda`` on a machine that shows no GPU (a local run; on a cluster
    the nodes have them, and the preflight's gpus check reads them there)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if not list_gpus((nvidia_smi, "-L")) or visible in ("", "-1"):
        raise InputError("config", "train.device is cuda, but this machine shows no GPU (nvidia-smi "
                         "-L lists none, or CUDA_VISIBLE_DEVICES hides them): run on a GPU machine, "
                         "submit through a cluster profile, or set train.device: cpu",
                         field="train.device")


def parse_nvidia_smi(text):
    """[(name, compute capability, driver)] from ``nvidia-smi --query-gpu=name,compute_cap,
    driver_version --format=csv,noheader`` (or its two-column form from older drivers)."""
    gpus = []
    for line in text.strip().splitlines():
        cells = [c.strip() for c in line.split(",")]
        if not cells or not cells[0]:
            continue
        name, driver = cells[0], cells[-1]
        cap = next((float(c) for c in cells[1:-1] if re.fullmatch(r"\d+\.\d+", c)), None)
        if cap is None:
            cap = next((c for key, c in KNOWN_GPUS if key in name), None)
        gpus.append((name, cap, driver))
    return gpus


def _version(text):
    return tuple(int(p) for p in re.findall(r"\d+", str(text))[:3])


def _releases(plan):
    """The torch releases the arms install (pypi versions and one-fix releases), oldest first."""
    return sorted({a.get("version") or a.get("release", {}).get("version")
                   for b in plan.bugs.values() for a in b.spec["arms"].values()
                   if source(a["source"]).fits_interpreter} - {None}, key=_version)


def _gpus(config, plan, recorded):
    if config["train"]["device"] != "cuda":
        return [Check("gpus", "pass", "device cpu: no GPU needed")]
    if recorded is None:
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name,compute_cap,driver_version",
                                  "--format=csv,noheader"], capture_output=True, text=True, timeout=60)
            recorded = out.stdout if out.returncode == 0 else ""
        except (OSError, subprocess.TimeoutExpired):
            recorded = ""
    gpus = parse_nvidia_smi(recorded)
    if not gpus:
        return [Check("gpus", "FAIL", "device cuda, but nvidia-smi shows no GPU",
                      "run on a GPU machine with the NVIDIA driver, or set train.device: cpu")]
    checks = []
    arms = [spec for b in plan.bugs.values() for spec in b.spec["arms"].values()]
    caps = sorted({cap for _, cap, _ in gpus if cap is not None})
    names = ", ".join(f"{n} (sm_{int(c * 10) if c else '?'}, driver {d})" for n, c, d in gpus)
    if any(source(a["source"]).built for a in arms):
        from .artifacts.docker import build_env, preset  # the Docker SDK: only for a docker study
        cfg = config["artifacts"]["docker"]
        era = preset(cfg)
        archs = build_env(cfg).get("TORCH_CUDA_ARCH_LIST") or era.get("arch_list") or ""
        top = max((float(a) for a in re.findall(r"\d+\.\d+", archs)), default=None)
        too_new = [c for c in caps if top is not None and c > top + 0.05]
        driver_low = [d for _, _, d in gpus if era.get("min_driver")
                      and _version(d) < _version(era["min_driver"])]
        if era.get("cuda") and too_new:
            checks.append(Check("gpus vs toolchain", "FAIL",
                                f"{names}: toolchain {cfg['toolchain']} builds CUDA {era['cuda']} "
                                f"for sm {archs}, which cannot run on sm_{int(max(too_new) * 10)}",
                                "use an older GPU (V100, T4), train.device: cpu, or release wheels "
                                "and one-fix artifacts (source pypi/onefix) of a CUDA era that fits"))
        elif driver_low:
            checks.append(Check("gpus vs toolchain", "FAIL", f"{names}: CUDA {era['cuda']} needs "
                                f"driver >= {era['min_driver']}", "update the NVIDIA driver"))
        else:
            checks.append(Check("gpus vs toolchain", "pass", f"{names}; toolchain CUDA "
                                f"{era.get('cuda')} for sm {archs}"))
    releases = _releases(plan)
    # torch < 1.7 wheels are CUDA 10.x builds (up to sm_75); sm_90 needs CUDA 11.8+ (torch 2.x)
    old = [v for v in releases if _version(v) < (1, 7) and caps and max(caps) >= 8.0]
    newer = [v for v in releases if _version(v) < (2, 0) and caps and max(caps) >= 9.0]
    if old:
        checks.append(Check("gpus vs release wheels", "FAIL",
                            f"{names}: torch {', '.join(old)} wheels are CUDA 10.x builds for up to "
                            "sm_75", "use a V100/T4-era GPU, or train.device: cpu (the wheels run there)"))
    elif newer:
        checks.append(Check("gpus vs release wheels", "warn",
                            f"{names}: torch {', '.join(newer)} wheels predate sm_90 kernels (PTX only)"))
    elif releases:
        checks.append(Check("gpus vs release wheels", "pass", f"{names}; torch {', '.join(releases)}"))
    if not checks:
        checks.append(Check("gpus", "pass", names))
    return checks


def _data(config, challenge):
    """A challenge's raw file (train's, or a workload's its bugs train), as the challenge checks it."""
    found = problems(challenge, config["data"])
    if found:
        return [Check("data", "FAIL", f"{challenge}: {'; '.join(p for p, _ in found)}",
                      "; ".join(dict.fromkeys(fix for _, fix in found)))]
    raw = raw_file(challenge, config["data"])
    return [Check("data", "pass", f"{challenge}: {raw or 'no raw file'}, as it checks it")]


def _interpreter(config, plan):
    if not plan.kind.chooses_python or plan.interpreter is None:
        return []
    info = plan.interpreter
    checks = [Check("interpreter", "pass", interpreters.describe(info))]
    releases = _releases(plan)
    if not releases:
        return checks
    tags = interpreters.wheel_tags(info)
    cache = config["artifacts"]["wheel_cache"]
    cached = [v for v in releases if list((pypi_cache_dir(cache, v) / tags["key"]).glob("torch-*.whl"))]
    available = _available(tags, config["artifacts"]["pip_index_url"])
    absent = [v for v in releases if v not in cached and available is not None and v not in available]
    detail = (f"torch {', '.join(releases)} for {tags['key']}: {len(cached)} cached, "
              f"{len(releases) - len(cached) - len(absent)} to download")
    if absent:
        return checks + [Check("release wheels", "FAIL", f"{detail}; no wheel of "
                               f"{', '.join(absent)} for it", f"versions that exist for it: "
                               f"{', '.join(sorted(available, key=_version)[:40])}")]
    if available is None and len(cached) < len(releases):
        return checks + [Check("release wheels", "warn", f"{detail}; the index did not answer")]
    return checks + [Check("release wheels", "pass", detail)]


def _available(tags, index_url=""):
    """The torch versions the index has for these wheel tags, or None when it cannot be asked."""
    cmd = [sys.executable, "-m", "pip", "index", "versions", "torch", *pip_target(tags, index_url)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return None
    match = re.search(r"Available versions: (.*)", out.stdout)
    return [v.strip() for v in match.group(1).split(",")] if match else None
