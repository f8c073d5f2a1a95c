"""Runtime kinds: where an arm's runs execute, each in one class behind one interface.

A kind says which artifact sources it runs (and why not the others), what its identity is made
of (part of the experiment key), which interpreter its wheels must fit, how a runtime is made, and
how the harness runs in it (a process by default; the docker kind's, a container). The plan,
the steps, preflight and the launcher ask the kind; adding one (conda, apptainer) is one class
registered in ``KINDS`` here or with ``@register`` from a plugin (``bugimpact.plugins``); the config
schema takes the names from there (``config.code_lists``)."""
import hashlib
import json
import os
import re
import subprocess

from ..io import read_json
from ..plugins import Registry
from . import interpreters
from .requirements import requirements_identity
from .runtimes import prepare_local, prepare_venv
from .source_kinds import host_source
from .source_kinds import source as source_of  # its methods take a source's name as `source`


class RuntimeKind:
    name = ""
    forks = False  # runs may fork from a server that imported torch once
    needs_toolchain = False  # made from the docker toolchain image
    chooses_python = False  # runs on runtime.python (else on the host's, or the image's)
    installs = True  # installs runtime.requirements (and a model's: ``models``) into each runtime
    # its runs see the host's own packages, as the host finds them (its PYTHONPATH too): a
    # model's code found there is what they import
    host_packages = False
    # the JSON schema of its own settings, ``runtime.<name>`` in the config (None: it has none);
    # a runtime is made with them (its record keeps them, and editing them remakes it)
    settings_schema = None

    def refusal(self, source):
        """Why this kind cannot run an artifact of ``source``, or "" when it can."""
        return ""

    def runs_in(self, source, runtime_cfg):
        """The kind an artifact of ``source`` actually runs in, in a study of this kind."""
        return self.name

    def reach_release(self, corrected, version):
        """The release a reach trace of a fix runs on here (``corrected``: the fix's arm;
        ``version``: reach.release, the sheet's release read), or None when it needs none."""
        return source_of(corrected["source"]).reach_release(corrected, version)

    def interpreter(self, runtime_cfg, recipe_sha):
        """The interpreter release wheels must fit (probed) and their wheel-tag target."""
        info = interpreters.host()
        return info, interpreters.wheel_tags(info)["key"]

    def identity(self, interpreter, recipe_sha):
        """What besides the requirements names this runtime: (a label, what is hashed)."""
        # the interpreter itself and its environment: the same binary called python or python3
        # (python -m snakemake or the snakemake script) is one interpreter
        return (f"py{interpreter['version']}",
                [os.path.realpath(interpreter["executable"]), interpreter["prefix"]])

    def make(self, manifest, folder, settings):
        """The runtime record for an artifact (``settings``: interpreter, requirements, gpus,
        toolchain_json, installer, cache)."""
        raise NotImplementedError

    def lost(self, runtime):
        """What a made runtime's record names that is gone (its interpreter, a venv deleted by
        hand, a compiled fix's override library): any, and the runtime is stale."""
        python = runtime.get("python")
        libraries = [lib["library"] for lib in ((runtime.get("override") or {}).get("libraries") or {}).values()]
        return [path for path in [python, *libraries] if path and not os.path.exists(path)]

    def content(self, runtime):
        """What a made runtime computes with, of its record: what its torch reports, the files its
        artifact put there (a wheel, an overlay), a compiled fix's override libraries by their
        bytes, what the model needed of it and the kind's own settings; not where it lies or how
        long it took. A runtime made again with the same content is the same runtime
        (``content_digest``): the runs made in it stand."""
        override = runtime.get("override") or {}
        return {"kind": runtime.get("kind"), "probe": runtime.get("probe"),
                "wheel_sha256": (runtime.get("artifact") or {}).get("wheel_sha256"),
                "overlay": runtime.get("overlay_installed"),
                "libraries": {build: lib.get("sha256") for build, lib in sorted((override.get("libraries") or {}).items())},
                "model_requirements": runtime.get("model_requirements"), "settings": runtime.get("settings")}

    def process(self, runtime, arguments, env):
        """How a harness process starts in this runtime: its command line (the runtime's Python
        with ``arguments``) and environment. A run's process and a fork server both start so,
        and every run forked from the server inherits what its start set (a priority, limits)."""
        return [runtime["python"], *arguments], env

    def run(self, runtime, spec, out, env, log, timeout=None):
        """Run the harness once (its output to ``log``); returns its exit code. After ``timeout``
        seconds, or on any interrupt, everything it started is killed, and only then is
        ``TimeoutError`` (or the interrupt) raised."""
        cmd, env = self.process(runtime, ["-m", "bugimpact.harness", "--spec", "-", "--out", str(out)], env)
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, text=True, env=env, stdout=log, stderr=log,
                                start_new_session=True)
        try:
            proc.communicate(json.dumps(spec), timeout=timeout)
        except BaseException as exc:
            try:
                os.killpg(proc.pid, 9)  # the session: what the harness started goes with it
            except ProcessLookupError:
                pass
            proc.wait()
            if isinstance(exc, subprocess.TimeoutExpired):
                raise TimeoutError(f"the harness still ran after {timeout}s") from None
            raise
        return proc.returncode


class Local(RuntimeKind):
    """The host's interpreter and its torch (or the venv runtime's interpreter, for the installed
    torch of a venv study)."""
    name = "local"
    forks = True
    installs = False
    host_packages = True

    def refusal(self, source):
        if source_of(source).on_host:
            return ""
        return (f"runtime.kind local runs only the installed torch, not a {source} arm: set "
                "runtime.kind venv (or docker), as configs/releases.yaml does")

    def reach_release(self, corrected, version):
        """The host's own torch: the only one this kind runs."""
        return {"source": host_source()}

    def make(self, manifest, folder, settings):
        return prepare_local(manifest, settings["interpreter"]["executable"], self.name)


class Venv(RuntimeKind):
    """A virtual environment per artifact, made from ``runtime.python`` (uv: linked from one cache)."""
    name = "venv"
    forks = True
    chooses_python = True

    def runs_in(self, source, runtime_cfg):
        """The installed torch runs on the venv's interpreter itself (a venv over the same
        site-packages adds nothing), so switching a study to venv for its one-fix rows keeps the
        runs of its installed-torch controls. Not with extra requirements: those go into a venv."""
        return "local" if source_of(source).on_host and not runtime_cfg["requirements"] else self.name

    def interpreter(self, runtime_cfg, recipe_sha):
        info = interpreters.find(runtime_cfg["python"])
        return info, interpreters.wheel_tags(info)["key"]

    def make(self, manifest, folder, settings):
        return prepare_venv(manifest, folder, settings["interpreter"]["executable"],
                            settings["requirements"], settings["installer"], settings["cache"], self.name)


class Docker(RuntimeKind):
    """A runtime image per artifact, from the toolchain image that built it."""
    name = "docker"
    needs_toolchain = True

    def refusal(self, source):
        return "" if source_of(source).in_docker else f"a {source} arm runs in a venv runtime: set runtime.kind venv"

    def interpreter(self, runtime_cfg, recipe_sha):
        return None, f"image-{recipe_sha}"  # inside the image: the artifact job asks it

    def lost(self, runtime):
        return []  # its interpreter is inside its image

    def content(self, runtime):
        return {**super().content(runtime), "image_id": runtime.get("image_id")}

    def identity(self, interpreter, recipe_sha):
        return "image", recipe_sha

    def make(self, manifest, folder, settings):
        from .docker import prepare_runtime  # the Docker SDK: only in a docker runtime
        return prepare_runtime(manifest, read_json(settings["toolchain_json"]),
                               settings["requirements"], folder)

    def run(self, runtime, spec, out, env, log, timeout=None):
        from .docker import run_harness  # the Docker SDK: only in a docker runtime
        return run_harness(runtime, spec, out, env, log, timeout)


KINDS = Registry("runtime kind", "runtime.kind", {kind.name: kind() for kind in (Local, Venv, Docker)})


def register(cls):
    """Add a runtime kind class (a plugin's: ``bugimpact.plugins``); a class decorator."""
    KINDS.add(cls.name, cls())
    return cls


runtime_kinds = KINDS.every  # name -> RuntimeKind, the plugins' included
kind = KINDS.named


def content_digest(runtime):
    """The digest of a made runtime's content (``RuntimeKind.content``), by which its runs know it."""
    text = json.dumps(kind(runtime["kind"]).content(runtime), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def runtime_pattern():
    """The ``{runtime}`` wildcard: a kind's name, then what ``runtime_id`` adds."""
    return "(?:%s)-[A-Za-z0-9_.-]+" % "|".join(map(re.escape, runtime_kinds()))


def runtime_id(runtime_cfg, interpreter, recipe_sha="", model_needs=None):
    """The runtime's identity, a path component: its kind, the interpreter's version (or
    ``image``), and a hash of what the kind names it by, of the extra requirements' content and
    of what the model needs of it (``models.Model.runtime_needs``: the torchvision table)."""
    name = runtime_cfg["kind"]
    label, what = kind(name).identity(interpreter, recipe_sha)
    named = [name, what, requirements_identity(runtime_cfg.get("requirements", []))]
    digest = hashlib.sha256(json.dumps(named + ([model_needs] if model_needs else [])).encode()
                            ).hexdigest()[:8]
    return f"{name}-{label}-{digest}"
