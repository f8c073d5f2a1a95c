"""What the runtime modules share and import from nowhere else: the harness's source folder and
the timeout a run ends in."""
from pathlib import Path

SRC = Path(__file__).resolve().parents[2]  # put on a run's path: the harness and nothing else


class RunTimeout(Exception):
    pass
