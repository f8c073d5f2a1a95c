# The two commands of the README. Each makes (once) and uses its own environment, .venv, so the
# machine's Python is never written to (PEP 668 systems refuse that); a torch already installed
# there is seen and reused (--system-site-packages), not downloaded again.
BASE_PYTHON ?= python3
VENV ?= .venv
CORES ?= 2
# The suite's files over WORKERS workers, each file's tests in one of them, in order (its module
# fixtures made once). One more worker than cores: the suite waits on processes, pip and disk (one
# at a time it used 1.13 of 2 cores)
WORKERS ?= $(shell echo $$(($(CORES) + 1)))
PARALLEL ?= -n $(WORKERS) --dist loadfile
PY := $(CURDIR)/$(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: study test test-long test-python python-checks
study:  ## the default study end to end: offline, CPU, a few minutes
	BASE_PYTHON=$(BASE_PYTHON) VENV=$(VENV) bin/setup-host
	$(PY) -m bugimpact run --cores $(CORES)  # snakemake, run again where it lost jobs

test:   ## lint (ruff, snakefmt), then every test but the long measurements, the Docker ones included
	BASE_PYTHON=$(BASE_PYTHON) VENV=$(VENV) bin/setup-host --test
	$(PY) -m ruff check src tests bench scripts examples
	$(PY) -m snakefmt --check Snakefile rules/
	$(PY) -m pytest -ra -m "not long" $(PARALLEL) --durations=25  # the slowest named: where CI's time goes

test-long:  ## the measurements at study scale (reach against ground truth, the compiled fault control: about 20 minutes)
	BASE_PYTHON=$(BASE_PYTHON) VENV=$(VENV) bin/setup-host --test
	$(PY) -m pytest -ra -m long

# What differs from one Python to the next is the numerics (NumPy and SciPy versions) and the
# packages the workflow runs on: the statistics tests, and the default study end to end.
test-python:  ## on another Python (BASE_PYTHON, in its own VENV): the statistics tests, the default study
	BASE_PYTHON=$(BASE_PYTHON) VENV=$(VENV) bin/setup-host --test
	$(MAKE) --no-print-directory python-checks VENV=$(VENV) CORES=$(CORES)

# test-python without the set-up, for a VENV that has it: CI sets up each Python in turn (apt and
# the editable install write shared files), then runs their checks side by side
python-checks:
	$(PY) -m pytest -ra tests/test_stats.py tests/test_stats_r.py tests/test_sequential.py tests/test_sheet.py
	$(PY) bench/default_study.py --cores $(CORES) --check
