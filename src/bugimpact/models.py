"""A study's model, host side: what of it enters the experiment key and every runtime's identity,
and what a runtime must hold to build it (``train.model`` and ``train.model_options``; the harness
builds it: ``harness/models.py``, whose ``registry.model_protocol`` tells the protocols apart).

- ``builtin`` (vggx, alexnet, smallcnn, lstm, transformer, prototypes): its code is the harness's, keyed by ``HARNESS_VERSION``;
- ``dotted`` (``module:Class``): its code, found on the host's path without importing it (its
  top-level package's files, hashed), enters the experiment key; where the host has no copy it
  comes from ``runtime.requirements``, whose content names the runtime (``requirements``);
- ``torchvision`` (``torchvision.<name>``): each runtime holds the torchvision released for its
  torch (``data/torchvision/compatibility.csv``, torchvision's published table), installed like
  the other requirements (the local kind, which installs nothing, must already have it); the
  table is in every runtime's identity, the version it gave in the runtime's record."""
import hashlib
import importlib.machinery
import logging
import os
import subprocess
import sys
from pathlib import Path

from .artifacts.interpreters import describe, wheel_tags
from .artifacts.requirements import folder_sha256
from .artifacts.source_kinds import release_version
from .artifacts.sources import IndexUnanswered, index_versions
from .harness.registry import model_protocol
from .io import ConfigError, read_csv
from .layout import ROOT

TORCHVISION_TABLE = ROOT / "data" / "torchvision" / "compatibility.csv"
log = logging.getLogger("bugimpact")
_said = set()  # what a model's key cannot hold is said once per process, not at every key


class Refused(RuntimeError):
    """A runtime that cannot hold the model (no torchvision for its torch or its Python)."""


class Model:
    protocol = ""

    def __init__(self, name):
        self.name = name  # its options are in the experiment key as they are (train.model_options)

    def code(self):
        """What of the model's code enters the experiment key (None: the harness version does)."""
        return None

    def runtime_needs(self):
        """What every runtime of the study needs for this model, in its identity (None: nothing)."""
        return None

    def requirements(self, torch_version):
        """The pins (distribution, version) a runtime of ``torch_version`` installs for it."""
        return []


class Builtin(Model):
    protocol = "builtin"


class Dotted(Model):
    protocol = "dotted"

    def code(self):
        module = self.name.replace(":", ".").rpartition(".")[0]
        found = host_copy(module)
        if found is None:
            if module not in _said:
                _said.add(module)
                log.warning("model %s: %s is not importable on the host, so the experiment key "
                            "holds no hash of its code: only runtime.requirements that install it name "
                            "it (by their content), and without them no run can import it",
                            self.name, module)
            return None
        # its content only: a project moved or copied keeps its runs
        return folder_sha256(found) if found.is_dir() else hashlib.sha256(found.read_bytes()).hexdigest()


class Torchvision(Model):
    protocol = "torchvision"

    def __init__(self, name, table=TORCHVISION_TABLE):
        super().__init__(name)
        self.table = Path(table)

    def runtime_needs(self):
        return {"torchvision": hashlib.sha256(self.table.read_bytes()).hexdigest()}

    def requirements(self, torch_version):
        base = str(torch_version).split("+")[0]
        _, rows = read_csv(self.table)
        found = [row["torchvision"] for row in rows if row["torch"] == base]
        if not found:
            raise Refused(f"{self.name} needs the torchvision released for torch {torch_version}, and "
                          f"{self.table.name} names none (a build from source, or a release it does "
                          "not list)")
        return [("torchvision", found[0])]


PROTOCOLS = {cls.protocol: cls for cls in (Builtin, Dotted, Torchvision)}


def model_of(train):
    """The model ``train`` (the config's ``train``) names, as its protocol's object."""
    protocol = model_protocol(train["model"])
    if protocol is None:
        raise ConfigError(f"unknown model {train['model']!r}", field="train.model")
    return PROTOCOLS[protocol](train["model"])


def host_copy(module):
    """The file or top-level package folder ``module`` is imported from on the host's path, found
    without importing anything (a model's package may import torch); None when it has none."""
    top, *rest = module.split(".")
    spec = importlib.machinery.PathFinder.find_spec(top, sys.path)
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    return Path(spec.origin) if spec.origin and not rest else None


def pins(train, manifest, kind, interpreter, sources):
    """The packages (distribution, version) a runtime of ``manifest``'s torch installs for the
    study's model (``train``: its train.model and options; ``kind``: the runtime's kind); Refused
    when none exists for that torch, or, for a kind that installs them, for the runtime's
    ``interpreter`` (asked of ``sources``' package index, when it answers)."""
    if not train:
        return []
    needed = model_of(train).requirements(release_version(manifest))
    if needed and kind.installs and isinstance(interpreter, dict) and sources:
        for dist, version in needed:
            try:
                versions = index_versions(wheel_tags(interpreter), sources["pip_index_url"], dist)
            except IndexUnanswered as exc:  # the installer will say, if it cannot either
                log.info("%s", exc)
                continue
            if version not in versions:
                raise Refused(f"no {dist} {version} wheel for {describe(interpreter)} (torch "
                              f"{release_version(manifest)}'s); the versions that exist for it: "
                              f"{', '.join(versions[-8:]) or 'none'}")
    return needed


def held(pins, runtime):
    """The versions of ``pins`` the runtime's interpreter imports (a runtime made by a kind that
    installs nothing must already hold them); ``models.Refused`` when one is not the pinned one.
    A docker runtime's interpreter is in its image, where its installer checked the pins."""
    python = runtime.get("python", "")
    if not os.path.isabs(python):
        return dict(pins)
    found = {}
    for dist, _ in pins:
        out = subprocess.run([python, "-c", f"import {dist}; print({dist}.__version__)"],
                             capture_output=True, text=True)
        found[dist] = out.stdout.strip().split("+")[0] if out.returncode == 0 else None
    wrong = [f"{dist} {version} (it has {found[dist] or 'none'})" for dist, version in pins
             if found[dist] != version]
    if wrong:
        raise Refused(f"the {runtime['kind']} runtime ({python}) lacks {', '.join(wrong)}: "
                      "install it there, or use runtime.kind venv, which installs it")
    return found
