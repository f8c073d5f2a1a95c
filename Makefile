# The two commands of the README. Each makes (once) and uses its own environment, .venv, so the
# machine's Python is never written to (PEP 668 systems refuse that); a torch already installed
# there is seen and reused (--system-site-packages), not downloaded again.
BASE_PYTHON ?= python3
VENV ?= .venv
CORES ?= 2
PY := $(CURDIR)/$(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: study test test-python
study:  ## the default study end to end: offline, CPU, a few minutes
	BASE_PYTHON=$(BASE_PYTHON) VENV=$(VENV) bin/setup-host
	$(PY) -m snakemake --cores $(CORES)

test:   ## lint (ruff, snakefmt), then every test, the Docker ones included
	BASE_PYTHON=$(BASE_PYTHON) VENV=$(VENV) bin/setup-host --test
	$(PY) -m ruff check src tests bench scripts examples
	$(PY) -m snakefmt --check Snakefile rules/
	$(PY) -m pytest -ra --durations=25  # the slowest tests named: where CI's time goes

test-python:  ## on another Python (BASE_PYTHON, in its own VENV): host-side tests, the default study
	BASE_PYTHON=$(BASE_PYTHON) VENV=$(VENV) bin/setup-host --test
	$(PY) -m pytest -ra -m "not docker and not slow"
	$(PY) bench/default_study.py --cores $(CORES) --check
