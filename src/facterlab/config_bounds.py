"""The allowed values of every config field: the choice tuples of the string fields (``DATASETS``,
``PROTOCOLS``, ``DELTA_KINDS``...) and the numeric :class:`Bound` of each number (:data:`BOUNDS`).

The config dataclasses (:mod:`facterlab.config`, which re-exports every name here) check their fields
against these when built; :func:`facterlab.config.bound_problems` writes the sentences, and the CLI help,
the notebook parameters and :func:`facterlab.facter.validation.validate_config` read the same tables.
This module knows no dataclass of the config, so anything may import it.

>>> "twin" in DELTA_KINDS, BOUNDS["facter"]["passes"].describe()
(True, 'an integer in [1, 100]')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "DATASETS", "DATASET_NAME_PATTERN", "is_dataset_name", "dataset_arg", "PROTOCOLS", "THRESHOLD_RULES", "CORRECTIONS", "RULE_KEYINGS", "FLIP_STRATEGIES", "MAPPINGS",
    "RANKERS", "LINEAR_KERNELS", "CALIBRATION_PROMPTS", "TIE_ORDERS", "RULE_TIE_ORDERS", "TOP1_RULES",
    "EMPTY_OUTPUT_RULES", "GENDER_WORDINGS", "NDCG_POSITIONS", "SNSR_ITEMS", "SNSR_EMPTY_ROWS", "CFR_PROMPTS",
    "DELTA_KINDS", "THRESHOLD_KINDS", "RULE_MININGS", "PLACEBO_KINDS", "TWIN_EDITS", "ATTRIBUTIONS", "RULE_EVIDENCES", "SIM_READS", "SIM_TRIGGERS",
    "SIM_COMPLIANCE", "SIM_BIAS_TABLES", "Bound", "MAX_SEED", "BOUNDS", "RAPIDFUZZ_THRESHOLD", "THREADS",
]  # fmt: skip

# ---------------------------------------------------------------------------------------------
# Choices of the string fields

DATASETS = ("auto", "ml-1m", "ml-100k", "amazon", "synthetic")
#: the form of an imported dataset's name (facterlab data import SRC --name NAME; docs/OWN_DATA.md)
DATASET_NAME_PATTERN = r"[a-z0-9][a-z0-9_.-]{0,63}"


def is_dataset_name(name: object) -> bool:
    """Whether ``name`` is a built-in dataset or has the form of an imported dataset's name (whether such
    a dataset is imported is checked when it is loaded).

    >>> is_dataset_name("ml-100k"), is_dataset_name("jobs-2024"), is_dataset_name("Jobs 2024")
    (True, True, False)
    """
    import re

    return name in DATASETS or (isinstance(name, str) and re.fullmatch(DATASET_NAME_PATTERN, name) is not None)


def dataset_arg(name: str) -> str:
    """argparse type of ``--dataset``: a built-in name or an imported dataset's name."""
    if not is_dataset_name(name):
        import argparse

        raise argparse.ArgumentTypeError(
            f"{name!r} is neither a built-in dataset ({', '.join(DATASETS)}) nor an imported dataset's name "
            "(lower-case letters, digits, '-', '_', '.')"
        )
    return name


PROTOCOLS = ("open", "rank")
THRESHOLD_RULES = ("one_sided", "eq11_as_printed", "aci")
CORRECTIONS = ("none", "hoeffding", "repro_count")
RULE_KEYINGS = ("per_attr", "tuple")
FLIP_STRATEGIES = ("distinct", "minimal", "repro")
MAPPINGS = ("encoder", "rapidfuzz")
RANKERS = ("generate", "likelihood")
#: how the in-process LLM's linear layers multiply on CPU (facterlab.models.llm; docs/CPU_DECODING.md)
LINEAR_KERNELS = ("blas", "onednn")
CALIBRATION_PROMPTS = ("neutral", "empty")
# protocol switches (docs/PROTOCOL.md): the first value of each is REPRO's choice, the second facterlab's
TIE_ORDERS = ("file_order", "item_id")
RULE_TIE_ORDERS = ("first_seen", "by_name")
TOP1_RULES = ("first_mapped", "position0")
EMPTY_OUTPUT_RULES = ("unknown_generation", "skip")
GENDER_WORDINGS = ("code", "word")
NDCG_POSITIONS = ("compacted", "positional")
SNSR_ITEMS = ("mapped_title", "item_text")
SNSR_EMPTY_ROWS = ("zero", "drop")
CFR_PROMPTS = ("last_pass", "final_rules")
# facterlab extensions (docs/FACTER.md §7): the first value of each is FACTER's / REPRO's method
DELTA_KINDS = ("neighbour", "twin")
THRESHOLD_KINDS = ("conformal", "null")
RULE_MININGS = ("count", "contrast", "confirmed")
#: the null threshold's placebo (docs/FACTER.md §7): one edit, or "family" (the largest of the three per row)
PLACEBO_KINDS = ("family", "reword", "field", "order")
#: the twin's edit: the protected attributes flipped, or (a negative control) the same values reworded
TWIN_EDITS = ("flip", "reword")
#: confirmed mining's attribution (docs/FACTER.md §7.3): a flagged pair counts for every attribute of the row
#: ("joint", the all-attributes twin); with one twin per attribute, each attribute is mined against its own
#: twin: on the flagged rows whose own twin moved the answer past Q_null ("per-attribute"), or on every row
#: ("per-attribute-all": the group-level directional test, more requests, more power)
ATTRIBUTIONS = ("joint", "per-attribute", "per-attribute-all")
#: the twin Delta's statistic (docs/FACTER.md §7.2): the distance of the two top-1 items' embeddings ("top1",
#: FACTER's f(yhat)), or of the two answers' rank-weighted mean embeddings over the whole top-k list ("list")
TWIN_DISTANCES = ("top1", "list")
#: what confirmed mining compares in a (row, twin) pair (docs/FACTER.md §7.3): the top-1 items' features ("top1")
#: or, per feature, how many items of the whole top-k lists carry it ("list": more discordant pairs per row)
RULE_EVIDENCES = ("top1", "list")
#: how the simulated recommender learns the demographics: the request's fields (sim-v2) or the prompt text
SIM_READS = ("fields", "text")
#: the text-reading simulator's parse of the values: any known wording ("semantic") or one spelling ("literal")
SIM_TRIGGERS = ("semantic", "literal")
# the simulated recommender (docs/SIMULATED.md)
SIM_COMPLIANCE = ("relative", "absolute")
SIM_BIAS_TABLES = ("default", "rare", "romance")


# ---------------------------------------------------------------------------------------------
# Bounds of the numeric fields


@dataclass(frozen=True)
class Bound:
    """The allowed range of one numeric config field: ``lo``..``hi`` (``lo_open``/``hi_open``: the end
    itself is excluded), an integer when ``integer``; ``why`` says where the upper end comes from;
    ``example`` is a value that works when the field's default is None.

    >>> Bound(1, 100, integer=True).describe()
    'an integer in [1, 100]'
    >>> Bound(0, 1, lo_open=True, hi_open=True).contains(1.0)
    False
    """

    lo: float
    hi: float
    integer: bool = False
    lo_open: bool = False
    hi_open: bool = False
    why: str = ""
    example: Any = None

    def contains(self, value: Any) -> bool:
        """``value`` has the right type, is finite and lies in the range (an integer of any size).

        >>> Bound(0, 10, integer=True).contains(10**401), Bound(0, 1).contains(-(10**401))
        (False, False)
        """
        import math
        import numbers

        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False
        if self.integer and not isinstance(value, numbers.Integral):
            return False
        if isinstance(value, numbers.Integral):  # exact: an integer too large for a float is simply out of range
            v: Any = int(value)
        else:
            try:
                v = float(value)
            except (OverflowError, ValueError):  # a Fraction or Decimal beyond a float
                return False
            if not math.isfinite(v):
                return False
        return (v > self.lo if self.lo_open else v >= self.lo) and (v < self.hi if self.hi_open else v <= self.hi)

    def describe(self) -> str:
        """``an integer in [1, 100]``, ``a number in (0, 1)``."""
        lb, rb = "(" if self.lo_open else "[", ")" if self.hi_open else "]"
        return f"{'an integer' if self.integer else 'a number'} in {lb}{self.span(', ')}{rb}"

    def span(self, sep: str = "..") -> str:
        """``1..100`` (integers written out in full)."""
        fmt = (lambda x: str(int(x))) if self.integer else (lambda x: f"{x:g}")
        return f"{fmt(self.lo)}{sep}{fmt(self.hi)}"


def short_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)`` for a message, short: an integer too long to read is named by its size, and a long
    text is cut.

    >>> short_repr(10**401), short_repr(7), short_repr("x" * 100, 10)
    ('<an integer of 402 digits>', '7', "'xxxxxxxx...")
    """
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        digits = len(str(abs(value))) if value.bit_length() < 14_000 else int(value.bit_length() * 0.30103) + 1
        return f"<an integer of {'about ' if value.bit_length() >= 14_000 else ''}{digits} digits>"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "..."


#: Largest seed numpy's generators take.
MAX_SEED = 2**32 - 1
_SEED = Bound(0, MAX_SEED, integer=True, why="numpy seeds are 32-bit")

#: The bounds of every numeric field, by section (``""``: the top-level :class:`facterlab.config.RunConfig`).  The one
#: owner of every bound: :func:`facterlab.facter.validation.validate_config`, the ``facterlab run`` help,
#: the notebook parameters (:data:`facterlab.params.PARAMETER_FIELDS`) and the sections' own checks read
#: them here.  Upper ends are sizes nobody needs (each ``why`` says so), chosen so that a typo cannot
#: start a run that never ends or overflows.
BOUNDS: dict = {
    "": {"seed": _SEED},
    "data": {
        "n_rows": Bound(2, 1_000_000, integer=True, why="ML-1M has 1,000,209 ratings", example=2500),
        "calib_frac": Bound(0, 1, lo_open=True, hi_open=True),
        "history_len": Bound(1, 100, integer=True, why="REPRO uses 10"),
        "future_window": Bound(1, 100, integer=True, why="REPRO uses 10"),
        "n_candidates": Bound(0, 1000, integer=True, why="a ranked prompt of more items exceeds any context"),
        "min_rating": Bound(1, 5, integer=True, why="ratings are 1..5"),
        "seed": _SEED,
        "demographics_seed": _SEED,
        "max_reviews": Bound(1, 1_000_000_000, integer=True, why="more lines than any Amazon file", example=100_000),
    },
    "model": {
        "batch_size": Bound(1, 1024, integer=True, why="larger batches do not fit a GPU"),
        "timeout": Bound(1, 86_400, why="a day; one request that takes longer is a hung server"),
        "max_retries": Bound(0, 10, integer=True, why="each retry waits twice as long"),
        "concurrency": Bound(1, 256, integer=True, why="more requests in flight only queue on the server"),
        "temperature": Bound(0, 10),
        "top_p": Bound(0, 1, lo_open=True),
        "max_new_tokens": Bound(1, 8192, integer=True, why="a list of 10 titles needs about 250"),
        "repetition_penalty": Bound(0, 10, lo_open=True),
        "max_prompt_tokens": Bound(1, 1_048_576, integer=True, why="no model has a longer context", example=2048),
    },
    "facter": {
        "alpha": Bound(0, 1, lo_open=True, hi_open=True),
        "lam": Bound(0, 100),
        "tau_rho": Bound(-1, 1, lo_open=True),
        "tau_x": Bound(0, 100, example=0.5),
        "hoeffding_delta": Bound(0, 1, lo_open=True, hi_open=True),
        "passes": Bound(1, 100, integer=True, why="the paper uses 3; each pass re-asks every test row"),
        "gamma": Bound(0, 1, lo_open=True),
        "eta": Bound(0, 10),
        "buffer_size": Bound(1, 1_000_000, integer=True),
        "rule_min_count": Bound(1, 1_000_000, integer=True),
        "max_rules_per_attr": Bound(1, 100, integer=True, why="the prompt holds every rule"),
        "null_tol": Bound(0, 0.1),
        "draws": Bound(1, 64, integer=True, why="each draw is one more request per row, twin and placebo"),
        "rule_level": Bound(1e-6, 0.5),
        "rule_min_effect": Bound(0, 1),
        "max_rules": Bound(1, 100, integer=True, why="the prompt holds every rule"),
    },
    "metrics": {
        "k": Bound(1, 100, integer=True, why="the prompt asks for k titles"),
        "map_threshold": Bound(0, 1, why="cosine similarity (rapidfuzz: 0..100)"),
        "snsr_min_group": Bound(1, 1_000_000, integer=True),
        "cfr_rows": Bound(1, 1_000_000, integer=True),
        "fairllm_users": Bound(1, 1_000_000, integer=True),
    },
    "sim": {
        "beta": Bound(0, 10, why="score standard deviations: 10 already pushes every item"),
        "sigma": Bound(0, 10, why="score standard deviations"),
        "rho": Bound(0, 1),
        "h": Bound(0, 1),
        "phi": Bound(0, 1),
        "demote": Bound(0, 1000, why="score standard deviations; >= 1000 puts a rule's items below every other item"),
        "n_factors": Bound(1, 1000, integer=True),
        "seed": _SEED,
        "order_sd": Bound(0, 10, why="score standard deviations"),
        "wording_sd": Bound(0, 10, why="score standard deviations"),
        "field_sd": Bound(0, 10, why="score standard deviations"),
        "prompt_sd": Bound(0, 10, why="score standard deviations"),
        "temperature": Bound(0, 10, why="score standard deviations of a fresh draw per request"),
        "meaning_sd": Bound(0, 10, why="score standard deviations"),
    },
    # not a config section: the limits of every JSON and TOML file facterlab reads (facterlab.safeio),
    # checked before the file is parsed
    "files": {
        "max_bytes": Bound(0, 64 * 2**20, integer=True, why="a run's metrics.json and a notebook are well under 1 MiB"),
        "bias_table_bytes": Bound(
            0, 2**20, integer=True, why="a bias table names a few values per attribute; the built-in ones are < 1 KiB"
        ),
        "depth": Bound(0, 64, integer=True, why="facterlab's own files nest at most 7 levels"),
    },
}

#: map_threshold's bound with ``mapping = "rapidfuzz"`` (a 0..100 score)
RAPIDFUZZ_THRESHOLD = Bound(0, 100, example=85)
#: ``--threads N`` / ``FACTERLAB_THREADS`` (facterlab.threads)
THREADS = Bound(1, 1024, integer=True, why="more threads than cores only slow torch down")


def _check_choice(name: str, value: Any, choices: tuple) -> None:
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; choose one of {', '.join(map(repr, choices))}")
