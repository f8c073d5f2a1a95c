"""``bugimpact gc``: only what no current config or run record refers to is listed, and removed."""
import json
import os
import re
import subprocess
import sys

import yaml
from conftest import ROOT, config_with, make_wheel

from bugimpact.config import SHEET_SCHEMA
from bugimpact.plan import Plan


def no_engine_env(tmp_path):
    """gc's environment where no Docker engine answers: images are tested with a real engine in
    test_docker.py."""
    return dict(os.environ, DOCKER_HOST=f"unix://{tmp_path}/no-engine.sock", PYTHONPATH=str(ROOT / "src"))


def put(path, content=""):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def test_gc_lists_then_removes_only_what_nothing_refers_to(tmp_path):
    config = config_with(sheet=str(tmp_path / "none.csv"),
                         **{"artifacts.wheel_cache": "cache"})
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(config))
    res = tmp_path / "results"
    runtime_id = Plan(config, SHEET_SCHEMA).artifacts["installed"].runtime
    old_wheel = put(tmp_path / "cache" / "pypi" / "torch-1.4.0" / "cp37" / "torch-1.4.0.whl", "w")
    kept = [
        put(res / "artifacts" / "installed" / "manifest.json", {"source": "installed"}),
        put(res / "runtimes" / runtime_id / "installed" / "runtime.json", {"kind": "local"}),
        # an artifact that only a record names: its manifest and its wheel are the run's provenance
        put(res / "artifacts" / "pypi-1.4.0-cp37" / "manifest.json", {"wheel": str(old_wheel)}),
        put(res / "runs" / "b" / "k" / "buggy" / "0.json", {"spec": {"artifact": "pypi-1.4.0-cp37"}}),
        old_wheel,
    ]
    garbage = {
        "artifact": res / "artifacts" / "docker-0123456789ab-abc",
        "runtime": res / "runtimes" / "venv-py3.7-00000000" / "pypi-1.4.0-cp37",
        "toolchain record": res / "toolchains" / "cpu-0000000000.json",
        "cached wheel": tmp_path / "cache" / "pypi" / "torch-1.5.0" / "cp37" / "torch-1.5.0.whl",
    }
    put(garbage["artifact"] / "manifest.json", {"source": "docker"})
    # a cached download is the project's when a manifest it wrote names it
    put(res / "artifacts" / "pypi-1.5.0-cp37" / "manifest.json", {"wheel": str(garbage["cached wheel"])})
    garbage["artifact "] = res / "artifacts" / "pypi-1.5.0-cp37"
    # one that no manifest names is a person's: never listed, never removed
    theirs = put(tmp_path / "cache" / "mine" / "torch-9.9-cp37-cp37m-linux_x86_64.whl", "their build")
    kept.append(theirs)
    put(garbage["artifact"] / "torch-1.0-cp37.whl", "x" * 5000)
    put(garbage["runtime"] / "venv" / "bin" / "python", "")
    put(garbage["toolchain record"], {"tag": "bugimpact-toolchain:cpu-0000000000"})
    put(garbage["cached wheel"], "w")

    def gc(*args):
        return subprocess.run([sys.executable, "-m", "bugimpact", "gc", "--keep", "study.yaml",
                               *args], cwd=tmp_path, capture_output=True, text=True,
                              env=no_engine_env(tmp_path))

    dry = gc()
    assert dry.returncode == 0, dry.stderr
    listed = sorted(re.findall(r"^(.+?)\s+[\d.]+ MB  (.+)$", dry.stdout, re.M))
    assert listed == sorted((kind.strip(), str(path.relative_to(tmp_path))) for kind, path in garbage.items())
    assert "5 item(s)" in dry.stdout and "dry run: nothing removed" in dry.stdout
    assert all(p.exists() for p in garbage.values())

    done = gc("--remove")
    assert done.returncode == 0 and "removed 5 item(s)" in done.stdout
    assert not any(p.exists() for p in garbage.values())
    assert all(p.exists() for p in kept)
    assert "nothing to remove" in gc().stdout


def test_gc_removes_the_uv_cache_entries_no_kept_venv_links_and_counts_linked_bytes_once(tmp_path):
    """uv venvs are hard links to uv's cache: a removed venv frees only its own files, and a cache
    entry is garbage only when no kept venv links to it."""
    from bugimpact.artifacts.runtimes import uv_binary
    config = config_with(sheet=str(tmp_path / "none.csv"), **{"runtime.cache": "uv"})
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(config))
    runtime_id = Plan(config, SHEET_SCHEMA).artifacts["installed"].runtime
    shared = make_wheel(tmp_path, "shared", {"shared.py": "x = 1\n" * 200_000})
    alone = make_wheel(tmp_path, "alone", {"alone.py": "y = 2\n" * 300_000})
    venvs = {"kept": tmp_path / "results" / "runtimes" / runtime_id / "installed" / "venv",
             "gone": tmp_path / "results" / "runtimes" / "venv-py3.7-00000000" / "pypi-1.4.0-cp37" / "venv"}
    env = dict(os.environ, UV_CACHE_DIR=str(tmp_path / "uv"))
    uv = uv_binary()
    for which, wheels in (("kept", [shared]), ("gone", [shared, alone])):
        subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venvs[which])], check=True, env=env)
        subprocess.run([uv, "pip", "install", "-q", "--offline", "--link-mode", "hardlink", "--python",
                        str(venvs[which] / "bin" / "python"), *map(str, wheels)], check=True, env=env)
    entries = {p.name for p in (tmp_path / "uv").glob("archive-v*/*/")}
    by_module = {m: next(e for e in (tmp_path / "uv").glob("archive-v*/*/") if (e / f"{m}.py").exists())
                 for m in ("shared", "alone")}
    assert len(entries) == 2

    dry = subprocess.run([sys.executable, "-m", "bugimpact", "gc", "--keep", "study.yaml"],
                         cwd=tmp_path, capture_output=True, text=True, env=no_engine_env(tmp_path))
    assert dry.returncode == 0, dry.stderr
    listed = {what: float(mb) for kind, mb, what in re.findall(r"^(.+?)\s+([\d.]+) MB  (.+)$", dry.stdout, re.M)}
    assert set(listed) == {str(venvs["gone"].parent.relative_to(tmp_path)),
                           str(by_module["alone"].relative_to(tmp_path))}
    # the removed venv's links free nothing: its module bytes are counted with the cache entry
    assert listed[str(by_module["alone"].relative_to(tmp_path))] >= 1.7
    assert listed[str(venvs["gone"].parent.relative_to(tmp_path))] < 1.0
    done = subprocess.run([sys.executable, "-m", "bugimpact", "gc", "--keep", "study.yaml", "--remove"],
                          cwd=tmp_path, capture_output=True, text=True, env=no_engine_env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert by_module["shared"].exists() and not by_module["alone"].exists() and not venvs["gone"].exists()
    imported = subprocess.run([str(venvs["kept"] / "bin" / "python"), "-c", "import shared; print(shared.x)"],
                              capture_output=True, text=True)
    assert imported.stdout.strip() == "1"
