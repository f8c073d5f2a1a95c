import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "data" / "release_notes" / "pytorch"


@pytest.fixture
def notes():
    return {p.stem: p.read_text("utf-8") for p in FIXTURES.glob("*.md")}


def cuda_available():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    """Tests marked gpu skip cleanly where torch sees no CUDA device (CI has none). The files
    marked slow or docker as a whole (whole studies, builds, a cluster) run first, each file's
    tests in their order: over make test's workers (a file to a worker), none of them is left to
    end the run alone."""
    gpu = [item for item in items if item.get_closest_marker("gpu")]
    if gpu and not cuda_available():
        for item in gpu:
            item.add_marker(pytest.mark.skip(reason="no CUDA device: a GPU test"))
    items.sort(key=lambda item: not _whole_file_is(item, ("slow", "docker")))


def _whole_file_is(item, names):
    marks = getattr(item.module, "pytestmark", []) if item.module else []
    return any(mark.name in names for mark in (marks if isinstance(marks, list) else [marks]))


def docker_available():
    from bugimpact.artifacts.engine import Engine
    return Engine.answers()


def untar(archive, dest):
    """Extract one of our own fixtures as plain files (tarfile's "data" filter, which Python 3.14
    makes the default; before 3.11.4 there is no filter to ask for)."""
    import tarfile
    archive.extractall(dest, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))


def git(repo, *args, env=None):
    full_env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
                    GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com", **(env or {}))
    out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=full_env,
                         check=True)
    return out.stdout.strip()


def config_with(**changes):
    """The default config.yaml with dotted keys changed, validated (defaults filled)."""
    import yaml

    from bugimpact.config import validate_config
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    for dotted, value in changes.items():
        node = config
        *path, last = dotted.split(".")
        for key in path:
            node = node.setdefault(key, {})
        node[last] = value
    return validate_config(config)


def make_wheel(folder, name, files, version="1.0", requires=()):
    """A real wheel (what pip and uv install: METADATA with its Requires-Dist, WHEEL, RECORD)
    holding ``files`` ({path: text}); ``name`` may be a package that exists (torch) or not."""
    import zipfile
    wheel = Path(folder) / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    content = dict(files, **{f"{info}/METADATA": meta, f"{info}/WHEEL":
                             "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"})
    content[f"{info}/RECORD"] = "".join(f"{p},,\n" for p in content) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in content.items():
            archive.writestr(path, text)
    return wheel
