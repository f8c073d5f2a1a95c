"""bin/code-metrics holds the package to its limits (no cycle between folders, no file over 400
lines, at most 120 imports inside functions, each explained) and names what passes one."""
import subprocess
import sys

from conftest import ROOT


def metrics(checkout):
    return subprocess.run([sys.executable, str(ROOT / "bin" / "code-metrics"), str(checkout)],
                          capture_output=True, text=True)


def test_the_package_keeps_its_limits():
    out = metrics(ROOT)
    assert out.returncode == 0, out.stdout
    assert "import cycles between folders: 0 []" in out.stdout
    assert "unexplained: 0 []" in out.stdout


def test_each_limit_passed_is_named(tmp_path):
    package = tmp_path / "src" / "bugimpact"
    for folder in ("alpha", "beta"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "alpha" / "one.py").write_text("from ..beta import two\n" + "x = 1\n" * 401)
    (package / "beta" / "two.py").write_text(
        "def f():\n    from ..alpha import one\n    return one\n\n\n"
        "def g():\n    import json  # explained: only here\n    return json\n")
    (package / "many.py").write_text("def h():\n" + "    import os  # explained\n" * 120 + "    return os\n")
    out = metrics(tmp_path)
    assert out.returncode == 1
    assert "LIMIT: 122 imports inside functions, over 120" in out.stdout
    assert "LIMIT: files over 400 lines: [(402, 'alpha/one.py')]" in out.stdout, out.stdout
    assert "LIMIT: cycles between folders: [['bugimpact.alpha', 'bugimpact.beta']]" in out.stdout
    assert "LIMIT: 1 imports inside functions unexplained" in out.stdout
    assert "unexplained: 1 ['beta/two.py:2']" in out.stdout


def test_a_train_job_imports_none_of_the_heavy_packages():
    """What keeps the imports inside functions that remain: a train job (the rule that runs
    thousands of times) imports the step package and the launcher, and none of the packages those
    imports spare it."""
    heavy = ("numpy", "scipy", "matplotlib", "requests", "jinja2", "jsonschema", "github", "docker",
             "sklearn", "torch", "markdown_it", "yaml")
    out = subprocess.run([sys.executable, "-c", "import sys, bugimpact.steps.training, bugimpact.train; "
                          f"print(sorted(set({heavy!r}) & set(sys.modules)))"],
                         capture_output=True, text=True, env={"PYTHONPATH": str(ROOT / "src"), "PATH": ""})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
