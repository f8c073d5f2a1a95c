"""Docker-built wheels at a commit, and docker runtimes that train on an artifact.

One toolchain image per era (``envs/docker/<toolchain>/Dockerfile``) builds both arms of a bug with
the same command and environment. Sources come from the user's clone through a shared clone per
build (the user's clone is never touched); a compiler cache volume is shared by all builds, so the
second arm recompiles only what the fix touched. Containers are never privileged, and no token is
passed to them: the build environment is only what the config names. The engine is spoken to
through its API (``engine.Engine``), never the CLI.
"""
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

from ..io import write_text
from .common import SRC
from .engine import Engine, gpu_requests
from .interpreters import PROBE as INTERPRETER
from .requirements import requirements_identity
from .sources import PROBE, sha256_file

ROOT = SRC.parent
TOOLCHAIN_REPO, RUNTIME_REPO = "bugimpact-toolchain", "bugimpact-runtime"  # this project's images
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")
FAILURE_PATTERNS = (  # most specific first; matched against the build log
    ("link", r"undefined reference|collect2: error|ld returned \d+ exit status|cannot find -l"),
    ("compile", r"error: |fatal error|compilation terminated|Error \d+$"),
    ("configure", r"CMake Error|Configuring incomplete|configure: error"),
    ("packaging", r"error: invalid command 'bdist_wheel'|no wheel was produced"),
)


class BuildFailed(Exception):
    def __init__(self, failure_class, message):
        super().__init__(message)
        self.failure_class = failure_class


# Variables that change how fast a build runs, never what it produces: kept out of the recipe hash,
# so changing them rebuilds and retrains nothing.
NOT_RECIPE = ("MAX_JOBS", "CMAKE_BUILD_PARALLEL_LEVEL", "CCACHE_MAXSIZE", "CCACHE_DIR")


def toolchain_dir(docker_cfg):
    folder = ROOT / "envs" / "docker" / docker_cfg["toolchain"]
    if not (folder / "Dockerfile").exists():
        raise FileNotFoundError(f"no toolchain {docker_cfg['toolchain']!r}: {folder}/Dockerfile is missing")
    return folder


def preset(docker_cfg):
    """The toolchain's era preset (``preset.yaml`` beside its Dockerfile): CUDA facts for preflight
    and the build environment that era needs."""
    path = toolchain_dir(docker_cfg) / "preset.yaml"
    return (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}


def build_env(docker_cfg):
    """The build's environment: the preset's (its CPU switches when USE_CUDA is 0), then the
    config's, which wins."""
    era = preset(docker_cfg)
    user = {k: str(v) for k, v in docker_cfg.get("build_env", {}).items()}
    env = {k: str(v) for k, v in (era.get("build_env") or {}).items()}
    if user.get("USE_CUDA", env.get("USE_CUDA")) == "0" or not era.get("cuda"):
        env.update({k: str(v) for k, v in (era.get("cpu_build_env") or {}).items()})
    env.update(user)
    return dict(sorted(env.items()))


def recipe(docker_cfg):
    """Everything that decides what a build produces, and its hash (the artifact key's suffix)."""
    folder = toolchain_dir(docker_cfg)
    env = build_env(docker_cfg)
    parts = {"dockerfile": (folder / "Dockerfile").read_text(), "toolchain": docker_cfg["toolchain"],
             "base_image": docker_cfg.get("base_image", ""),
             "build_command": docker_cfg["build_command"],
             "build_env": {k: v for k, v in env.items() if k not in NOT_RECIPE}}
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:10]
    parts["runner_env"] = {k: v for k, v in env.items() if k in NOT_RECIPE}
    return parts, digest


def _context(folder, dockerfile_text, ca_bundle):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Dockerfile").write_text(dockerfile_text)
    extra = Path(ca_bundle).read_bytes() if ca_bundle else b""
    (folder / "extra-ca.crt").write_bytes(extra)


def _build_args(base_image):
    args = {"BASE_IMAGE": base_image} if base_image else {}
    # predefined build args: Docker keeps them out of the image history
    args.update({var: os.environ[var] for var in PROXY_VARS if os.environ.get(var)})
    return args


def _probe(engine, image, code):
    """What ``code`` (a probe printing one JSON line) says in a fresh container of ``image``."""
    return json.loads(engine.output(image, ["python", "-c", code]).strip().splitlines()[-1])


def toolchain_name(docker_cfg):
    """The toolchain's identity: its name and recipe hash (the image tag, the record's file name)."""
    return f"{docker_cfg['toolchain']}-{recipe(docker_cfg)[1]}"


def build_toolchain(docker_cfg, log):
    """Build the toolchain image of this recipe unless it exists (the toolchain rule's job, so that
    parallel builds never race to make it); returns its record: tag, image id, recipe hash and the
    interpreter inside, that release wheels for a docker runtime must fit."""
    parts, digest = recipe(docker_cfg)
    tag = f"{TOOLCHAIN_REPO}:{toolchain_name(docker_cfg)}"
    engine = Engine()
    if engine.image_id(tag) is None:
        with tempfile.TemporaryDirectory() as tmp:
            _context(Path(tmp), parts["dockerfile"], docker_cfg.get("ca_bundle"))
            log.write(f"building toolchain image {tag}\n")
            log.flush()
            engine.build(tmp, tag, log, _build_args(parts["base_image"]))
    return {"tag": tag, "image_id": engine.image_id(tag),
            "host": socket.gethostname(), "toolchain": docker_cfg["toolchain"], "recipe_sha": digest,
            "python": _probe(engine, tag, INTERPRETER)}


def toolchain_present(toolchain):
    """The image a toolchain record names, checked before use: removed by hand (or by ``bugimpact
    gc``), its record must go too so that the toolchain rule builds it again."""
    here = socket.gethostname()
    if toolchain.get("host", here) != here:  # on a cluster, images live in each node's Docker
        raise BuildFailed("configure", f"toolchain image {toolchain['tag']} was built on "
                          f"{toolchain['host']}, and this job runs on {here}: run the toolchain, "
                          "docker_build and runtime jobs on one node (README: Running on a cluster)")
    if Engine().image_id(toolchain["tag"]) != toolchain["image_id"]:
        raise BuildFailed("configure", f"toolchain image {toolchain['tag']} ({toolchain['image_id'][:19]}) "
                          "is gone or was rebuilt: delete its record under results/toolchains/ and "
                          "rerun, which builds it again")
    return toolchain["tag"], toolchain["image_id"]


def rewrite_args(docker_cfg):
    """``git -c`` options that fetch submodules from where the config says (old prefix -> new);
    given to the build's own clone only, never written into the user's clone."""
    args = ["-c", "protocol.file.allow=always"]  # local mirrors are a plain path
    for old, new in sorted(docker_cfg.get("git_rewrites", {}).items()):
        args += ["-c", f"url.{new}.insteadOf={old}"]
    return args


def _git(args, cwd, log, failure_class):
    out = subprocess.run(["git", *args], cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
    if out.returncode != 0:
        raise BuildFailed(failure_class, f"git {' '.join(args)} failed")


def classify(log_text):
    for name, pattern in FAILURE_PATTERNS:
        if re.search(pattern, log_text, re.MULTILINE):
            return name
    return "compile"


def _tail(path, lines=40):
    text = Path(path).read_text(errors="replace") if Path(path).exists() else ""
    return "\n".join(text.splitlines()[-lines:])


def build_wheel(commit, docker_cfg, toolchain, out_dir, log_path):
    """Build the wheel of ``commit`` in the toolchain image (``build_toolchain``'s record); returns the manifest (``status`` ok or failed, never raises
    for a failed build: the failure is a result)."""
    out_dir = Path(out_dir)
    started = time.time()
    parts, digest = recipe(docker_cfg)
    manifest = {"source": "docker", "commit": commit, "toolchain": docker_cfg["toolchain"],
                "recipe_sha": digest, "build_command": parts["build_command"],
                "build_env": parts["build_env"], "runner_env": parts["runner_env"],
                "git_rewrites": docker_cfg.get("git_rewrites", {}), "log": str(log_path)}
    work = Path(tempfile.mkdtemp(prefix=f"bugimpact-build-{commit[:12]}-"))
    try:
        with open(log_path, "a") as log:
            tag, image_id = toolchain_present(toolchain)
            manifest.update(toolchain_image=tag, toolchain_image_id=image_id)
            src = work / "src"
            _git(["clone", "--quiet", "--shared", "--no-checkout", str(docker_cfg["clone"]), str(src)],
                 work, log, "checkout")
            _git(["checkout", "--quiet", commit], src, log, "checkout")
            _git([*rewrite_args(docker_cfg), "submodule", "update", "--init", "--recursive"], src,
                 log, "submodules")
            wheels = work / "out"
            wheels.mkdir()
            script = f"{parts['build_command']} && cp dist/*.whl /out/"
            log.write(f"$ {script}\n")
            log.flush()
            engine, volume = Engine(), docker_cfg["ccache_volume"]
            _ccache_volume(engine, volume, tag)
            try:
                code = engine.run(
                    # one name per artifact: the next attempt removes a container a killed job left
                    tag, ["bash", "-c", script], name=f"bugimpact-build-{commit[:12]}-{digest}",
                    log=log, timeout=docker_cfg["timeout_s"], user=f"{os.getuid()}:{os.getgid()}",
                    environment={"HOME": "/tmp", **parts["build_env"], **parts["runner_env"]},
                    volumes={str(src): {"bind": "/src", "mode": "rw"},
                             str(wheels): {"bind": "/out", "mode": "rw"},
                             volume: {"bind": "/ccache", "mode": "rw"}},
                    working_dir="/src")
            except TimeoutError:
                log.write(f"\ntimed out after {docker_cfg['timeout_s']}s: container removed\n")
                raise BuildFailed("timeout", f"build exceeded {docker_cfg['timeout_s']}s") from None
        built = sorted(wheels.glob("*.whl"))
        if code != 0:
            raise BuildFailed(classify(Path(log_path).read_text(errors="replace")),
                              f"build command exited {code}")
        if not built:
            raise BuildFailed("packaging", "no wheel was produced")
        out_dir.mkdir(parents=True, exist_ok=True)
        wheel = out_dir / built[0].name
        shutil.copyfile(built[0], wheel)
        manifest.update(status="ok", wheel=str(wheel.resolve()), wheel_sha256=sha256_file(wheel),
                        version_from_wheel=built[0].name.split("-")[1])
    except BuildFailed as exc:
        manifest.update(status="failed", failure_class=exc.failure_class, error=str(exc),
                        log_tail=_tail(log_path))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    manifest["build_seconds"] = round(time.time() - started, 2)
    return manifest


def _ccache_volume(engine, volume, image):
    """A named volume owned by the build user (named volumes start owned by root)."""
    if engine.volume(volume):
        engine.output(image, [f"{os.getuid()}:{os.getgid()}", "/ccache"], entrypoint="chown",
                      volumes={volume: {"bind": "/ccache", "mode": "rw"}})


RUNTIME_DOCKERFILE = """FROM {base}
COPY wheels /tmp/wheels
RUN /opt/py/bin/pip install --no-cache-dir {packages} && rm -rf /tmp/wheels
"""


def prepare_runtime(artifact, toolchain, requirements, folder):
    """A runtime image per artifact: the toolchain image plus its wheel, numpy and the configured
    extra requirements. The artifact's own toolchain keeps build and runtime ABI-compatible."""
    requirements = list(requirements)
    key = hashlib.sha256(json.dumps([artifact.get("wheel_sha256"), requirements_identity(requirements),
                                     toolchain["recipe_sha"]]).encode()).hexdigest()[:12]
    tag = f"{RUNTIME_REPO}:{key}"
    Path(folder).mkdir(parents=True, exist_ok=True)
    engine = Engine()
    with open(Path(folder) / "build.log", "a") as log:
        base, _ = toolchain_present(toolchain)
        if engine.image_id(tag) is None:
            with tempfile.TemporaryDirectory() as tmp:
                wheels = Path(tmp) / "wheels"
                wheels.mkdir()
                packages = ["numpy"]
                for item in ([artifact["wheel"]] if artifact.get("wheel") else []) + requirements:
                    if item.endswith(".whl") and Path(item).exists():
                        shutil.copyfile(item, wheels / Path(item).name)
                        packages.append(f"/tmp/wheels/{Path(item).name}")
                    else:
                        packages.append(item)
                write_text(Path(tmp) / "Dockerfile", RUNTIME_DOCKERFILE.format(
                    base=base, packages=" ".join(f"'{p}'" for p in packages)))
                engine.build(tmp, tag, log, _build_args(""))
    return {"kind": "docker", "image": tag, "python": "python", "image_id": engine.image_id(tag),
            "probe": _probe(engine, tag, PROBE)}


def container_name(out):
    """A run's container name, unique per record path: a run killed before it could remove its
    container has it removed by the next attempt."""
    return "bugimpact-run-" + hashlib.sha256(str(Path(out).resolve()).encode()).hexdigest()[:16]


# what the harness process needs of the launcher's environment (threads, hashing); its GPU is
# given as a device of the container (``container_gpus``), never by the host's number
HARNESS_ENV = ("PYTHONHASHSEED", "CUBLAS_WORKSPACE_CONFIG", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def container_gpus(env):
    """The host GPUs a run's container gets: the ones its launcher claimed or was assigned (the
    run's CUDA_VISIBLE_DEVICES, in the host's numbering), none for a CPU run. Inside, docker
    numbers them from 0, so the host's numbers are not passed in."""
    return [d for d in (env.get("CUDA_VISIBLE_DEVICES") or "").split(",") if d.strip()]


def run_harness(runtime, spec, out, env, log, timeout=None):
    """One harness run in its runtime image: harness, data and spec read-only, the run folder
    writable, no network, the caller's uid, the harness environment variables, GPUs when
    claimed for it (``container_gpus``). Returns the exit code; ``TimeoutError`` once the container is gone."""
    out = Path(out).resolve()
    data_dir = Path(spec["data"]).resolve().parent
    with tempfile.TemporaryDirectory(prefix="bugimpact-spec-") as tmp:
        spec_file = Path(tmp) / "spec.json"
        spec_file.write_text(json.dumps(spec))
        return Engine().run(
            runtime["image"], ["python", "-m", "bugimpact.harness", "--spec", "/bugimpact/spec.json",
                               "--out", str(out)],
            name=container_name(out), log=log, timeout=timeout, network_mode="none",
            user=f"{os.getuid()}:{os.getgid()}",
            environment={"HOME": "/tmp", "PYTHONPATH": "/bugimpact/src", "PYTHONDONTWRITEBYTECODE": "1",
                         **{name: env[name] for name in HARNESS_ENV if env.get(name) is not None}},
            volumes={str(SRC): {"bind": "/bugimpact/src", "mode": "ro"},
                     str(spec_file): {"bind": "/bugimpact/spec.json", "mode": "ro"},
                     str(out.parent): {"bind": str(out.parent), "mode": "rw"},
                     str(data_dir): {"bind": str(data_dir), "mode": "ro"}},
            device_requests=gpu_requests(container_gpus(env)))
