"""The notebooks' parameter helper: validate, apply PROFILE and SMOKE sizes, build run configs.

Every notebook calls :func:`parameters` in the cell right after its ``parameters`` cell::

    P = notebook.parameters(globals(), smoke=notebook.FACTER_SMOKE)
    config, sim_config = P.config, P.sim_config

The helper reads the declared defaults from the parameters cell as it was executed (IPython's input
history; a script run reads its own file) and the names papermill passed from papermill's
``injected-parameters`` cell (the one after the parameters cell), so that

- a misspelled ``-p`` name is an error naming the close matches (papermill itself only warns);
- values are coerced strictly by the declared default's type (``-p SMOKE false`` -> ``False``);
- ``PROFILE`` sets the profile's values and, with ``SMOKE``, the notebook's smoke sizes, for every
  parameter that was not passed (papermill ``-p``/``-y``, ``facterlab reproduce --set``, or a value
  edited in the parameters cell in JupyterLab).

The resolved values are written back into the notebook's globals and returned as a
:class:`NotebookParams`.  Rules: :mod:`facterlab.params`; docs/PATHS.md.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from facterlab import params as _params
from facterlab import paths
from facterlab.reporting import experiments as ex

INJECTED_MARK = "# Parameters"  # papermill's injected-parameters cell starts with this line
REQUIRED = ("PROFILE", "SMOKE")  # every notebook's parameters cell declares both


def _first_seed(seeds):
    return list(seeds)[:1]


#: The FACTER notebooks' smoke sizes (00, 02-08, 20): never larger than the declared value.
FACTER_SMOKE: dict = {
    "N_INTERACTIONS": 24,
    "CFR_ROWS": 2,
    "PASSES": 2,
    "MAX_NEW_TOKENS": 32,
    "SNSR_MIN_GROUP": 3,
    "SEEDS": _first_seed,
    "SIM_N_INTERACTIONS": 300,
}


def _assigned(source: str) -> dict:
    try:
        return _params.parse_parameters_cell(source)
    except SyntaxError:
        return {}


def _is_injected(source: str) -> bool:
    return source.lstrip().startswith(INJECTED_MARK)


def find_cells(ns: Mapping) -> tuple:
    """``(parameters cell source, injected cell source or None)`` of the running notebook.

    From IPython's input history (``In``): the latest executed cell before the current one that
    assigns PROFILE and SMOKE and is not papermill's injected cell, and the latest injected cell run
    after it.  Without a history (a script), the parameters cell of ``__file__``."""
    history = ns.get("In") or ns.get("_ih")
    if history:
        injected = None
        for src in reversed(list(history)[:-1]):  # the last entry is the current cell
            if not isinstance(src, str) or not src.strip():
                continue
            if _is_injected(src):
                injected = injected if injected is not None else src
                continue
            if set(REQUIRED) <= set(_assigned(src)):
                return src, injected
        raise _params.ParameterError(
            "no parameters cell found in this kernel's history: run the notebook's parameters cell "
            "(the one tagged 'parameters', declaring PROFILE and SMOKE) first"
        )
    file = ns.get("__file__")
    if file and Path(file).is_file():
        return _params.parameters_cell_of(file), None
    raise _params.ParameterError("cannot find the parameters cell: no IPython history and no __file__")


def fast_decoding_overrides(on: bool) -> dict:
    """The config overrides of a notebook's ``FAST_DECODING`` parameter (docs/CPU_DECODING.md): on CPU in
    float32, every ``nn.Linear`` runs oneDNN's GEMM on packed weights (``model.linear_kernel = "onednn"``;
    greedy token ids were identical to the default's in every benchmark; elsewhere it is the default
    kernel), and a row stops generating once its parsed answer is final (``model.stop_at_answer``: the
    parsed titles are those of full-length generation, the stored raw text ends at the answer).  Both are
    named switches in the run's fingerprint, so such runs never reuse, or are reused as, default runs.
    Off: no override (the config of a notebook without the parameter).

    >>> fast_decoding_overrides(True), fast_decoding_overrides(False)
    ({'model__linear_kernel': 'onednn', 'model__stop_at_answer': True}, {})
    """
    if not isinstance(on, bool):
        raise _params.ParameterError(f"parameter FAST_DECODING: expected True or False, got {on!r}")
    return {"model__linear_kernel": "onednn", "model__stop_at_answer": True} if on else {}


@dataclass
class NotebookParams:
    """A notebook's resolved parameters (``P["SEEDS"]``, ``P.values``) and its run configs."""

    resolved: _params.Resolved
    declared: dict

    @property
    def values(self) -> dict:
        """Every parameter's resolved value, by name."""
        return self.resolved.values

    @property
    def profile(self) -> str:
        """The profile of the run (``PROFILE``, default ``"default"``)."""
        return self.resolved.profile

    @property
    def smoke(self) -> bool:
        """Whether ``SMOKE`` shrinks the sizes."""
        return self.resolved.smoke

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def _need(self, names: tuple, what: str) -> None:
        missing = [n for n in names if n not in self.values]
        if missing:
            raise _params.ParameterError(
                f"{what} needs the parameter(s) {', '.join(missing)}, which this notebook does not declare "
                "(add them to its parameters cell)"
            )

    def config(
        self, seed: int, dataset: str | None = None, model: str | None = None, protocol: str | None = None, **kw
    ):
        """The notebook's LLM run config (same parameters -> same run id -> the saved run is reused).
        A notebook that declares ``FAST_DECODING`` gets its switches (:func:`fast_decoding_overrides`)."""
        v = self.values
        self._need(
            (
                "DATASET",
                "MODEL",
                "PROTOCOL",
                "PRESET",
                "N_INTERACTIONS",
                "PASSES",
                "CFR_ROWS",
                "MAX_NEW_TOKENS",
                "BATCH_SIZE",
                "DEVICE",
                "RANKER",
                "SNSR_MIN_GROUP",
            ),
            "config()",
        )
        return ex.run_config(
            dataset=dataset or v["DATASET"],
            model=model or v["MODEL"],
            protocol=protocol or v["PROTOCOL"],
            preset_name=v["PRESET"],
            seed=seed,
            n_rows=v["N_INTERACTIONS"],
            passes=v["PASSES"],
            cfr_rows=v["CFR_ROWS"],
            max_new_tokens=v["MAX_NEW_TOKENS"],
            batch_size=v["BATCH_SIZE"],
            device=v["DEVICE"],
            ranker=v["RANKER"],
            metrics__snsr_min_group=v["SNSR_MIN_GROUP"],
            **fast_decoding_overrides(v.get("FAST_DECODING", False)),
            **kw,
        )

    def sim_config(self, seed: int, dataset: str | None = None, protocol: str | None = None):
        """The simulated recommender's run beside the LLM's (docs/SIMULATED.md): same dataset, preset and
        passes, SIM_N_INTERACTIONS rows and 200 CFR rows (under SMOKE: the notebook's CFR rows, its SNSR
        minimum group and the torch-free hash encoder)."""
        v = self.values
        self._need(
            ("DATASET", "PROTOCOL", "PRESET", "PASSES", "CFR_ROWS", "SNSR_MIN_GROUP", "SIM_N_INTERACTIONS", "SIM_BETA"),
            "sim_config()",
        )
        return ex.run_config(
            dataset=dataset or v["DATASET"],
            model="simulated",
            protocol=protocol or v["PROTOCOL"],
            preset_name=v["PRESET"],
            seed=seed,
            n_rows=v["SIM_N_INTERACTIONS"],
            passes=v["PASSES"],
            cfr_rows=v["CFR_ROWS"] if self.smoke else 200,
            encoder="hash-encoder" if self.smoke else "all-MiniLM-L6-v2",
            sim__beta=float(v["SIM_BETA"]),
            metrics__snsr_min_group=v["SNSR_MIN_GROUP"] if self.smoke else 30,
        )


def parameters(ns: MutableMapping, smoke: Mapping | None = None, quiet: bool = False) -> NotebookParams:
    """Validate the notebook's parameters, apply PROFILE and the ``smoke`` sizes (name -> cap or
    callable, see :func:`facterlab.params.smoke_size`) to the parameters not passed, write the values
    back into ``ns`` (the notebook's ``globals()``) and return them.  Errors name the parameter."""
    one_line_errors()
    params_src, injected_src = find_cells(ns)
    declared = _params.parse_parameters_cell(params_src)
    passed: dict = {}
    for name in _assigned(injected_src) if injected_src else {}:
        if name in ns:
            passed[name] = ns[name]
    for name, d in declared.items():  # values edited in the parameters cell, or set after it
        if name not in passed and name in ns and not _same(ns[name], d.default):
            passed[name] = ns[name]
    resolved = _params.resolve(declared, passed, smoke, where="this notebook")
    ns.update(resolved.values)
    if not quiet:
        print(f"[parameters] {resolved.describe()}")
        print(f"[parameters] results -> {paths.results_dir()}; figures -> {paths.figures_dir()}")
    return NotebookParams(resolved, declared)


def _one_line(shell, etype, value, tb, tb_offset=None) -> list:
    """IPython custom exception handler: the error as one line, ``ParameterError: <message>``."""
    stb = [f"{etype.__name__}: {value}"]
    shell._showtraceback(etype, value, stb)  # the kernel's error output (papermill and nbclient read it)
    return stb


def one_line_errors(shell: Any = None) -> bool:
    """In an IPython kernel, show a :class:`~facterlab.params.ParameterError` as its one-line message,
    without the ~60 lines of traceback through facterlab's frames (the message names the parameter
    and what it expected; the traceback adds nothing a reader can act on).  The cell still fails: the
    kernel reports the error, papermill stops there and exits non-zero, and its command line prints
    ``ParameterError: <message>`` as the cell's traceback, after papermill's own Python traceback;
    ``papermill --engine facterlab`` prints the line alone (:mod:`facterlab.reporting.papermill_engine`).
    Other exceptions keep their tracebacks.
    Returns whether the handler was installed (False outside IPython)."""
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
    if shell is None or not hasattr(shell, "set_custom_exc"):
        return False
    shell.set_custom_exc((_params.ParameterError,), _one_line)
    return True


def _same(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 - an odd object compares as different: it counts as passed
        return False
