"""Wall time of the default study (config.yaml as shipped) from a fresh copy of the project, with
dependencies installed, on this machine's cores. Target: under 10 minutes on 2 cores.

    python bench/default_study.py [--cores 2]
"""
import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from workflow import project_copy  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = project_copy(Path(tmp) / "p")
        start = time.time()
        out = subprocess.run([sys.executable, "-m", "snakemake", "--cores", str(args.cores)],
                             cwd=work, capture_output=True, text=True)
        wall = time.time() - start
        assert out.returncode == 0, out.stderr[-3000:]
        verdicts = (work / "results" / "stats" / "verdicts.csv").read_text()
    print(verdicts.strip())
    print(f"default study on {args.cores} cores: {wall:.0f} s ({wall / 60:.1f} min)")
    print(f"ratio to the 10-minute target = {wall / 600:.2f}")


if __name__ == "__main__":
    main()
