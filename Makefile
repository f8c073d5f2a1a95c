# The two commands of the README. Each installs what it needs first.
PYTHON ?= python3
CORES ?= 2

.PHONY: study test
study:  ## the default study end to end: offline, CPU, a few minutes
	bin/setup-host
	$(PYTHON) -m snakemake --cores $(CORES)

test:   ## every test, the Docker ones included
	bin/setup-host --test
	$(PYTHON) -m pytest -ra
