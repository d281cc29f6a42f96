"""Frozen configuration dataclasses and named presets.

Every variant that the sources disagree on is a named field here (see docs/PROTOCOL.md):
tables print which variant produced them via :func:`config_to_dict`.

Presets
-------
A *preset* is a named set of the method's settings (alpha, threshold rule, protocol switches); it is
not a *profile* (the sizes and backbones of a ``facterlab reproduce`` run, :data:`facterlab.params.PROFILES`;
the ``paper`` profile runs preset ``repro``).  docs/ARCHITECTURE.md defines the words.

``repro``  (default) the reproduction study's settings: alpha = 0.10, ML-1M n = 2,500.
``icml``  the ICML 2025 paper's settings where they differ: alpha = 0.20 (called ``paper`` before).
``facterlab``  the repro settings with facterlab's own choice on every protocol switch
           (:data:`PROTOCOL_SWITCHES`; docs/PROTOCOL.md): item-id tie order, positional NDCG, ...
``repro`` and ``icml`` take REPRO's choice on every protocol switch.

A run's identity is the hash of its resolved config (:func:`config_hash`), never a clock or a
hand-typed id.

>>> cfg = preset("repro")
>>> cfg.facter.alpha, cfg.facter.threshold_rule, cfg.metrics.flip_strategy
(0.1, 'one_sided', 'distinct')
>>> preset("icml").facter.alpha
0.2
>>> len(config_hash(cfg)) == 12 and config_hash(cfg) == config_hash(preset("repro"))
True
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from facterlab import paths

# ---------------------------------------------------------------------------------------------
# Paths


def data_dir(explicit: os.PathLike | str | None = None) -> Path:
    """The data directory: ``explicit``, else ``$FACTERLAB_DATA``, else ``~/.cache/facterlab/data``."""
    if explicit is not None:
        return Path(explicit).expanduser()
    env = os.environ.get("FACTERLAB_DATA")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "facterlab" / "data"


def cache_dir(explicit: os.PathLike | str | None = None) -> Path:
    """Cache directory for processed datasets, embeddings and LLM outputs.

    ``explicit``, else ``$FACTERLAB_CACHE``, else ``<project root>/build/cache`` in a clone, else
    ``~/.cache/facterlab/cache`` (:func:`facterlab.paths.cache_dir`).
    """
    return paths.cache_dir(explicit)


def results_dir(explicit: os.PathLike | str | None = None) -> Path:
    """Where runs and notebook metrics go: ``explicit``, else ``$FACTERLAB_RESULTS``, else
    ``<project root>/results`` whatever the working directory (:func:`facterlab.paths.results_dir`)."""
    return paths.results_dir(explicit)


# ---------------------------------------------------------------------------------------------
# Config sections

DATASETS = ("auto", "ml-1m", "ml-100k", "amazon", "synthetic")
PROTOCOLS = ("open", "rank")
THRESHOLD_RULES = ("one_sided", "eq11_as_printed", "aci")
CORRECTIONS = ("none", "hoeffding", "repro_count")
RULE_KEYINGS = ("per_attr", "tuple")
FLIP_STRATEGIES = ("distinct", "minimal", "repro")
MAPPINGS = ("encoder", "rapidfuzz")
RANKERS = ("generate", "likelihood")
CALIBRATION_PROMPTS = ("neutral", "empty")
# protocol switches (docs/PROTOCOL.md): the first value of each is REPRO's choice, the second facterlab's
TIE_ORDERS = ("file_order", "item_id")
RULE_TIE_ORDERS = ("first_seen", "by_name")
TOP1_RULES = ("first_mapped", "position0")
EMPTY_OUTPUT_RULES = ("unknown_generation", "skip")
GENDER_WORDINGS = ("code", "word")
NDCG_POSITIONS = ("compacted", "positional")
SNSR_ITEMS = ("mapped_title", "item_text")
CFR_PROMPTS = ("last_pass", "final_rules")


@dataclass(frozen=True)
class DataConfig:
    """Dataset and interaction protocol (docs/FACTER.md §1.2)."""

    dataset: str = "auto"
    n_rows: int | None = None  # None: dataset default (ml-1m 2,500, amazon 3,750, others 2,500)
    calib_frac: float = 0.7
    history_len: int = 10
    future_window: int = 10
    n_candidates: int = 40
    min_rating: int = 4
    seed: int = 0
    demographics_seed: int = 0  # Amazon's drawn demographics
    max_reviews: int | None = None  # Amazon: stop streaming after this many lines (None: all)
    tie_order: str = "file_order"  # same-timestamp positives: "file_order" (REPRO) | "item_id"

    def __post_init__(self) -> None:
        _check_choice("dataset", self.dataset, DATASETS)
        _check_choice("tie_order", self.tie_order, TIE_ORDERS)
        if not 0.0 < self.calib_frac < 1.0:
            raise ValueError(f"calib_frac must be in (0, 1), got {self.calib_frac}")


@dataclass(frozen=True)
class ModelConfig:
    """LLM, encoder and decoding parameters (docs/FACTER.md §5)."""

    llm: str = "smollm2-135m"
    encoder: str = "all-MiniLM-L6-v2"
    ranker: str = "generate"  # rank protocol only: "generate" | "likelihood"
    device: str = "auto"  # "auto" | "cpu" | "cuda" | "cuda:N"
    dtype: str = "auto"  # "auto" (bf16 on CUDA, float32 on CPU) | "float32" | "bfloat16" | "float16"
    batch_size: int = 8
    temperature: float = 0.7
    top_p: float = 0.95
    max_new_tokens: int = 250
    repetition_penalty: float = 1.2
    max_prompt_tokens: int | None = None  # None: the model's context window
    trust_remote_code: bool = False

    def __post_init__(self) -> None:
        _check_choice("ranker", self.ranker, RANKERS)


@dataclass(frozen=True)
class FacterConfig:
    """Calibration and online phase (docs/FACTER.md §2-§3)."""

    alpha: float = 0.10
    lam: float = 0.7
    tau_rho: float = 0.90
    tau_x: float | None = None
    correction: str = "none"
    hoeffding_delta: float = 0.05
    passes: int = 3
    gamma: float = 0.95
    threshold_rule: str = "one_sided"
    eta: float = 0.05
    buffer_size: int = 50
    rule_min_count: int = 3
    max_rules_per_attr: int = 5
    rule_keying: str = "per_attr"
    announce_threshold: bool = False
    calibration_prompt: str = "neutral"
    rule_tie_order: str = "first_seen"  # equal counts at the top-5 cut: "first_seen" (REPRO) | "by_name"
    top1: str = "first_mapped"  # open generation: "first_mapped" (REPRO) | "position0"
    empty_output_rule: str = "unknown_generation"  # "unknown_generation" (REPRO) | "skip"
    gender_in_prompt: str = "code"  # user prompt: "code" (M/F, as the rules; REPRO) | "word" (male/female)

    def __post_init__(self) -> None:
        _check_choice("threshold_rule", self.threshold_rule, THRESHOLD_RULES)
        _check_choice("correction", self.correction, CORRECTIONS)
        _check_choice("rule_keying", self.rule_keying, RULE_KEYINGS)
        _check_choice("calibration_prompt", self.calibration_prompt, CALIBRATION_PROMPTS)
        _check_choice("rule_tie_order", self.rule_tie_order, RULE_TIE_ORDERS)
        _check_choice("top1", self.top1, TOP1_RULES)
        _check_choice("empty_output_rule", self.empty_output_rule, EMPTY_OUTPUT_RULES)
        _check_choice("gender_in_prompt", self.gender_in_prompt, GENDER_WORDINGS)
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")


@dataclass(frozen=True)
class MetricsConfig:
    """Metrics (docs/FACTER.md §4)."""

    k: int = 10
    mapping: str = "encoder"
    map_threshold: float = 0.65
    snsr_min_group: int = 30
    cfr_rows: int = 200
    flip_strategy: str = "distinct"
    fairllm_users: int = 100
    ndcg_positions: str = "compacted"  # "compacted" (REPRO: unmapped/repeated dropped) | "positional"
    snsr_items: str = "mapped_title"  # "mapped_title" (REPRO) | "item_text" (text, raw unmapped titles)
    cfr_prompt: str = "last_pass"  # CFR system prompt: "last_pass" (REPRO: each row's) | "final_rules"

    def __post_init__(self) -> None:
        _check_choice("mapping", self.mapping, MAPPINGS)
        _check_choice("flip_strategy", self.flip_strategy, FLIP_STRATEGIES)
        _check_choice("ndcg_positions", self.ndcg_positions, NDCG_POSITIONS)
        _check_choice("snsr_items", self.snsr_items, SNSR_ITEMS)
        _check_choice("cfr_prompt", self.cfr_prompt, CFR_PROMPTS)


@dataclass(frozen=True)
class SimulatorConfig:
    """The simulated recommender's knobs (``model.llm == "simulated"``; docs/SIMULATED.md).

    ``beta``: bias strength (score standard deviations added to pushed features); ``sigma``: score noise;
    ``rho``: probability that an applicable AVOID rule is honoured; ``h``: title-corruption rate (open
    generation); ``phi``: share of the bias the Fair prompt's rules remove; ``demote``: score penalty (in
    standard deviations) of an honoured rule's items; ``n_factors``: PureSVD rank;
    ``seed``: mixed into every draw.  Ignored (and left out of the run id) for other models.
    """

    beta: float = 1.0
    sigma: float = 0.5
    rho: float = 1.0
    h: float = 0.05
    phi: float = 0.3
    demote: float = 1.0
    n_factors: int = 16
    seed: int = 0

    def __post_init__(self) -> None:
        import math

        for name, lo, hi in (
            ("beta", 0.0, None),
            ("sigma", 0.0, None),
            ("rho", 0.0, 1.0),
            ("h", 0.0, 1.0),
            ("phi", 0.0, 1.0),
            ("demote", 0.0, None),
        ):
            v = getattr(self, name)
            if (
                isinstance(v, bool)
                or not isinstance(v, (int, float))
                or not math.isfinite(v)
                or v < lo
                or (hi is not None and v > hi)
            ):
                want = f"in [{lo:g}, {hi:g}]" if hi is not None else f">= {lo:g}"
                raise ValueError(f"sim.{name} must be a number {want}, got {v!r}")
        if isinstance(self.n_factors, bool) or not isinstance(self.n_factors, int) or self.n_factors < 1:
            raise ValueError(f"sim.n_factors must be an integer >= 1, got {self.n_factors!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"sim.seed must be an integer >= 0, got {self.seed!r}")


SIMULATED_LLM = "simulated"
#: the deterministic test recommender (:class:`facterlab.models.fake.FakeRecommender`), used with the
#: torch-free ``"hash-encoder"``; accepted by the notebooks (``MODEL = "fake"``) and ``facterlab run --model fake``
FAKE_LLM = "fake"


@dataclass(frozen=True)
class RunConfig:
    """Everything that determines a run's outputs; its hash is the run id."""

    protocol: str = "open"
    preset: str = "repro"
    seed: int = 0
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    facter: FacterConfig = field(default_factory=FacterConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    sim: SimulatorConfig = field(default_factory=SimulatorConfig)

    def __post_init__(self) -> None:
        _check_choice("protocol", self.protocol, PROTOCOLS)


PRESETS = ("repro", "icml", "facterlab")

#: The protocol switches (docs/PROTOCOL.md) as ``section__field`` -> (REPRO's choice, facterlab's choice).
#: ``repro`` and ``icml`` take REPRO's (the dataclass defaults); ``facterlab`` takes ours.
PROTOCOL_SWITCHES = {
    "data__tie_order": ("file_order", "item_id"),
    "metrics__ndcg_positions": ("compacted", "positional"),
    "metrics__snsr_items": ("mapped_title", "item_text"),
    "facter__rule_tie_order": ("first_seen", "by_name"),
    "facter__top1": ("first_mapped", "position0"),
    "facter__empty_output_rule": ("unknown_generation", "skip"),
    "metrics__cfr_prompt": ("last_pass", "final_rules"),
    "facter__gender_in_prompt": ("code", "word"),
}


def preset(name: str = "repro", **overrides: Any) -> RunConfig:
    """Build a :class:`RunConfig` from a named preset plus dotted overrides.

    Overrides use ``section__field`` keys, e.g. ``preset("repro", facter__alpha=0.2,
    protocol="rank")``.

    >>> preset("repro", facter__passes=1, protocol="rank").facter.passes
    1
    """
    if name == "paper":
        raise ValueError(
            "preset 'paper' is now called 'icml' (the ICML paper's alpha = 0.20); 'paper' names the "
            "facterlab reproduce profile (sizes and backbones), which runs preset 'repro'"
        )
    _check_choice("preset", name, PRESETS)
    cfg = RunConfig(preset=name)
    if name == "facterlab":
        cfg = with_overrides(cfg, **{k: v[1] for k, v in PROTOCOL_SWITCHES.items()})
    if name == "icml":
        cfg = replace(cfg, facter=replace(cfg.facter, alpha=0.20))
    return with_overrides(cfg, **overrides)


def with_overrides(cfg: RunConfig, **overrides: Any) -> RunConfig:
    """Return ``cfg`` with ``section__field=value`` or top-level ``field=value`` overrides."""
    top: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {}
    for key, value in overrides.items():
        if "__" in key:
            sec, fld = key.split("__", 1)
            if sec not in ("data", "model", "facter", "metrics", "sim"):
                raise ValueError(f"unknown config section {sec!r} in override {key!r}")
            sections.setdefault(sec, {})[fld] = value
        else:
            top[key] = value
    for sec, vals in sections.items():
        current = getattr(cfg, sec)
        names = {f.name for f in dataclasses.fields(current)}
        unknown = set(vals) - names
        if unknown:
            raise ValueError(f"unknown {sec} config field(s): {sorted(unknown)}; known: {sorted(names)}")
        top[sec] = replace(current, **vals)
    return replace(cfg, **top)


def config_to_dict(cfg: Any) -> dict:
    """Plain-dict view of a (nested) config dataclass, JSON-serialisable.

    A :class:`RunConfig` whose model is not the simulated recommender leaves out its ``sim`` section, so
    that the simulator's knobs never change the run id of an LLM run.
    """
    out = json.loads(json.dumps(dataclasses.asdict(cfg), sort_keys=True, default=str))
    if isinstance(cfg, RunConfig) and cfg.model.llm != SIMULATED_LLM:
        out.pop("sim", None)
    return out


def config_hash(cfg: Any, length: int = 12) -> str:
    """Stable short SHA-256 of a config's canonical JSON: the run id."""
    blob = json.dumps(config_to_dict(cfg), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:length]


def _check_choice(name: str, value: Any, choices: tuple) -> None:
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; choose one of {', '.join(map(repr, choices))}")
