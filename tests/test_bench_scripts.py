"""The benchmarks in bench/ are run by hand, seldom: each must at least import what it uses (one
once imported ``launch`` from where it no longer lived, and failed only when run)."""
import runpy

import pytest
from conftest import ROOT


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "bench").glob("*.py")))
def test_a_benchmark_script_imports_what_it_uses(script):
    names = runpy.run_path(str(ROOT / "bench" / script), run_name="bench_import_check")
    assert callable(names.get("main")), f"bench/{script} has no main()"
