"""Docker-built wheels at a commit, and docker runtimes that train on an artifact.

One toolchain image per era (``envs/docker/<toolchain>/Dockerfile``) builds both arms of a bug with
the same command and environment. Sources come from the user's clone through a shared clone per
build (the user's clone is never touched); a compiler cache volume is shared by all builds, so the
second arm recompiles only what the fix touched. Containers are never privileged, and no token is
passed to them: the build environment is only what the config names.
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

from ..io import write_text
from .common import SRC
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


def docker(*args, check=True, **kwargs):
    out = subprocess.run(["docker", *args], capture_output=True, text=True, **kwargs)
    if check and out.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args[:2])} failed: {out.stderr.strip()[-1500:]}")
    return out


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
    import yaml
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
    args = []
    if base_image:
        args += ["--build-arg", f"BASE_IMAGE={base_image}"]
    for var in PROXY_VARS:  # predefined build args: Docker keeps them out of the image history
        if os.environ.get(var):
            args += ["--build-arg", f"{var}={os.environ[var]}"]
    return args


def toolchain_name(docker_cfg):
    """The toolchain's identity: its name and recipe hash (the image tag, the record's file name)."""
    return f"{docker_cfg['toolchain']}-{recipe(docker_cfg)[1]}"


def build_toolchain(docker_cfg, log):
    """Build the toolchain image of this recipe unless it exists (the toolchain rule's job, so that
    parallel builds never race to make it); returns its record: tag, image id, recipe hash and the
    interpreter inside, that release wheels for a docker runtime must fit."""
    from .interpreters import probe
    parts, digest = recipe(docker_cfg)
    tag = f"{TOOLCHAIN_REPO}:{toolchain_name(docker_cfg)}"
    if docker("image", "inspect", tag, check=False).returncode != 0:
        with tempfile.TemporaryDirectory() as tmp:
            _context(Path(tmp), parts["dockerfile"], docker_cfg.get("ca_bundle"))
            log.write(f"building toolchain image {tag}\n")
            log.flush()
            out = subprocess.run(["docker", "build", "-t", tag, *_build_args(parts["base_image"]),
                                  tmp], stdout=log, stderr=subprocess.STDOUT)
            if out.returncode != 0:
                raise RuntimeError(f"toolchain image {tag} did not build; see the log")
    return {"tag": tag, "image_id": docker("image", "inspect", "--format", "{{.Id}}", tag).stdout.strip(),
            "host": socket.gethostname(), "toolchain": docker_cfg["toolchain"], "recipe_sha": digest,
            "python": probe("python", prefix=("docker", "run", "--rm", "--network", "none", tag))}


def toolchain_present(toolchain):
    """The image a toolchain record names, checked before use: removed by hand (or by ``bugimpact
    gc``), its record must go too so that the toolchain rule builds it again."""
    here = socket.gethostname()
    if toolchain.get("host", here) != here:  # on a cluster, images live in each node's Docker
        raise BuildFailed("configure", f"toolchain image {toolchain['tag']} was built on "
                          f"{toolchain['host']}, and this job runs on {here}: run the toolchain, "
                          "docker_build and runtime jobs on one node (README: Running on a cluster)")
    found = docker("image", "inspect", "--format", "{{.Id}}", toolchain["tag"], check=False)
    if found.returncode != 0 or found.stdout.strip() != toolchain["image_id"]:
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
            env_args = [a for k, v in {**parts["build_env"], **parts["runner_env"]}.items()
                        for a in ("-e", f"{k}={v}")]
            script = f"{parts['build_command']} && cp dist/*.whl /out/"
            log.write(f"$ {script}\n")
            log.flush()
            volume = docker_cfg["ccache_volume"]
            args = ["--user", f"{os.getuid()}:{os.getgid()}", "-e", "HOME=/tmp", "-v", f"{src}:/src",
                    "-v", f"{wheels}:/out", "-v", f"{volume}:/ccache", *env_args, "-w", "/src", tag,
                    "bash", "-c", script]
            _ccache_volume(volume, tag)
            try:
                code = run_container(args, f"bugimpact-build-{commit[:12]}-{os.getpid()}", log,
                                     docker_cfg["timeout_s"])
            except subprocess.TimeoutExpired:
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


def run_container(args, name, log, timeout=None):
    """``docker run --rm --name NAME ARGS``; returns its exit code. On a timeout (re-raised) or an
    interrupt the container itself is killed and removed: killing the client leaves it running."""
    proc = subprocess.Popen(["docker", "run", "--rm", "--name", name, *args], stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        return proc.wait(timeout=timeout)
    except BaseException:
        remove_container(name)
        proc.kill()
        proc.wait()
        raise


def remove_container(name):
    """Kill and remove a container by name, through the CLI as every other docker call; gone
    already is fine."""
    docker("rm", "--force", name, check=False)


def _ccache_volume(volume, image):
    """A named volume owned by the build user (named volumes start owned by root)."""
    if docker("volume", "inspect", volume, check=False).returncode != 0:
        docker("volume", "create", volume)
        docker("run", "--rm", "-v", f"{volume}:/ccache", "--entrypoint", "chown", image,
               f"{os.getuid()}:{os.getgid()}", "/ccache")


RUNTIME_DOCKERFILE = """FROM {base}
COPY wheels /tmp/wheels
RUN /opt/py/bin/pip install --no-cache-dir {packages} && rm -rf /tmp/wheels
"""


def prepare_runtime(artifact, toolchain, requirements, gpus, folder):
    """A runtime image per artifact: the toolchain image plus its wheel, numpy and the configured
    extra requirements. The artifact's own toolchain keeps build and runtime ABI-compatible."""
    from .requirements import requirements_identity
    requirements = list(requirements)
    key = hashlib.sha256(json.dumps([artifact.get("wheel_sha256"), requirements_identity(requirements),
                                     toolchain["recipe_sha"]]).encode()).hexdigest()[:12]
    tag = f"{RUNTIME_REPO}:{key}"
    Path(folder).mkdir(parents=True, exist_ok=True)
    with open(Path(folder) / "build.log", "a") as log:
        base, _ = toolchain_present(toolchain)
        if docker("image", "inspect", tag, check=False).returncode != 0:
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
                out = subprocess.run(["docker", "build", "-t", tag, *_build_args(""), tmp],
                                     stdout=log, stderr=subprocess.STDOUT)
                if out.returncode != 0:
                    raise RuntimeError(f"runtime image {tag} did not build; see {folder}/build.log")
    probe = docker("run", "--rm", "--network", "none", tag, "python", "-c", PROBE).stdout
    return {"kind": "docker", "image": tag, "python": "python",
            "image_id": docker("image", "inspect", "--format", "{{.Id}}", tag).stdout.strip(),
            "gpus": gpus,
            "probe": json.loads(probe.strip().splitlines()[-1])}


def container_name(out):
    """A run's container name, unique per record path, so a timeout can remove it."""
    return "bugimpact-run-" + hashlib.sha256(str(Path(out).resolve()).encode()).hexdigest()[:16]


def run_command(runtime, out, env, data):
    """``docker run`` for one harness run: harness and data read-only, the run folder writable,
    no network, the caller's uid, the harness environment variables, GPUs when configured."""
    out = Path(out).resolve()
    spec_env = ["PYTHONHASHSEED", "CUBLAS_WORKSPACE_CONFIG", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                "CUDA_VISIBLE_DEVICES"]
    data_dir = Path(data).resolve().parent
    cmd = ["docker", "run", "--rm", "-i", "--name", container_name(out), "--network", "none", "--user",
           f"{os.getuid()}:{os.getgid()}", "-e", "HOME=/tmp", "-e", "PYTHONPATH=/bugimpact/src",
           "-e", "PYTHONDONTWRITEBYTECODE=1",
           "-v", f"{SRC}:/bugimpact/src:ro", "-v", f"{out.parent}:{out.parent}"]
    cmd += ["-v", f"{data_dir}:{data_dir}:ro"]
    for name in spec_env:
        if env.get(name) is not None:
            cmd += ["-e", f"{name}={env[name]}"]
    if runtime.get("gpus"):
        cmd += ["--gpus", runtime["gpus"]]
    return cmd + [runtime["image"], "python", "-m", "bugimpact.harness", "--spec", "-",
                  "--out", str(out)]
