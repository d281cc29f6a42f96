"""Frozen configuration dataclasses and named presets.

Every variant that the sources disagree on is a named field here (see ``../shared/spec/FACTER.md``):
tables print which variant produced them via :func:`config_to_dict`.

Presets
-------
``repro``  (default) the reproduction study's settings: alpha = 0.10, ML-1M n = 2,500.
``paper``  the ICML paper's settings where they differ: alpha = 0.20.

A run's identity is the hash of its resolved config (:func:`config_hash`), never a clock or a
hand-typed id.

>>> cfg = preset("repro")
>>> cfg.facter.alpha, cfg.facter.threshold_rule, cfg.metrics.flip_strategy
(0.1, 'one_sided', 'distinct')
>>> preset("paper").facter.alpha
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
from typing import Any, Optional

# ---------------------------------------------------------------------------------------------
# Paths


def data_dir(explicit: Optional[os.PathLike | str] = None) -> Path:
    """The data directory: ``explicit``, else ``$FACTERLAB_DATA``, else ``~/.cache/facterlab/data``."""
    if explicit is not None:
        return Path(explicit).expanduser()
    env = os.environ.get("FACTERLAB_DATA")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "facterlab" / "data"


def cache_dir(explicit: Optional[os.PathLike | str] = None) -> Path:
    """Cache directory for processed datasets, embeddings and LLM outputs.

    ``explicit``, else ``$FACTERLAB_CACHE``, else ``~/.cache/facterlab/cache``.
    """
    if explicit is not None:
        return Path(explicit).expanduser()
    env = os.environ.get("FACTERLAB_CACHE")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "facterlab" / "cache"


def results_dir(explicit: Optional[os.PathLike | str] = None) -> Path:
    """Where runs and notebook metrics go: ``explicit``, else ``$FACTERLAB_RESULTS``, else ``./results``."""
    if explicit is not None:
        return Path(explicit).expanduser()
    return Path(os.environ.get("FACTERLAB_RESULTS", "results")).expanduser()


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


@dataclass(frozen=True)
class DataConfig:
    """Dataset and interaction protocol (FACTER.md §1.2)."""

    dataset: str = "auto"
    n_rows: Optional[int] = None  # None: dataset default (ml-1m 2,500, amazon 3,750, others 2,500)
    calib_frac: float = 0.7
    history_len: int = 10
    future_window: int = 10
    n_candidates: int = 40
    min_rating: int = 4
    seed: int = 0
    demographics_seed: int = 0  # Amazon's drawn demographics
    max_reviews: Optional[int] = None  # Amazon: stop streaming after this many lines (None: all)

    def __post_init__(self) -> None:
        _check_choice("dataset", self.dataset, DATASETS)
        if not 0.0 < self.calib_frac < 1.0:
            raise ValueError(f"calib_frac must be in (0, 1), got {self.calib_frac}")


@dataclass(frozen=True)
class ModelConfig:
    """LLM, encoder and decoding parameters (FACTER.md §5)."""

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
    max_prompt_tokens: Optional[int] = None  # None: the model's context window
    trust_remote_code: bool = False

    def __post_init__(self) -> None:
        _check_choice("ranker", self.ranker, RANKERS)


@dataclass(frozen=True)
class FacterConfig:
    """Calibration and online phase (FACTER.md §2-§3)."""

    alpha: float = 0.10
    lam: float = 0.7
    tau_rho: float = 0.90
    tau_x: Optional[float] = None
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

    def __post_init__(self) -> None:
        _check_choice("threshold_rule", self.threshold_rule, THRESHOLD_RULES)
        _check_choice("correction", self.correction, CORRECTIONS)
        _check_choice("rule_keying", self.rule_keying, RULE_KEYINGS)
        _check_choice("calibration_prompt", self.calibration_prompt, CALIBRATION_PROMPTS)
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")


@dataclass(frozen=True)
class MetricsConfig:
    """Metrics (FACTER.md §4)."""

    k: int = 10
    mapping: str = "encoder"
    map_threshold: float = 0.65
    snsr_min_group: int = 30
    cfr_rows: int = 200
    flip_strategy: str = "distinct"
    fairllm_users: int = 100

    def __post_init__(self) -> None:
        _check_choice("mapping", self.mapping, MAPPINGS)
        _check_choice("flip_strategy", self.flip_strategy, FLIP_STRATEGIES)


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

    def __post_init__(self) -> None:
        _check_choice("protocol", self.protocol, PROTOCOLS)


PRESETS = ("repro", "paper")


def preset(name: str = "repro", **overrides: Any) -> RunConfig:
    """Build a :class:`RunConfig` from a named preset plus dotted overrides.

    Overrides use ``section__field`` keys, e.g. ``preset("repro", facter__alpha=0.2,
    protocol="rank")``.

    >>> preset("repro", facter__passes=1, protocol="rank").facter.passes
    1
    """
    _check_choice("preset", name, PRESETS)
    cfg = RunConfig(preset=name)
    if name == "paper":
        cfg = replace(cfg, facter=replace(cfg.facter, alpha=0.20))
    return with_overrides(cfg, **overrides)


def with_overrides(cfg: RunConfig, **overrides: Any) -> RunConfig:
    """Return ``cfg`` with ``section__field=value`` or top-level ``field=value`` overrides."""
    top: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {}
    for key, value in overrides.items():
        if "__" in key:
            sec, fld = key.split("__", 1)
            if sec not in ("data", "model", "facter", "metrics"):
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
    """Plain-dict view of a (nested) config dataclass, JSON-serialisable."""
    return json.loads(json.dumps(dataclasses.asdict(cfg), sort_keys=True, default=str))


def config_hash(cfg: Any, length: int = 12) -> str:
    """Stable short SHA-256 of a config's canonical JSON: the run id."""
    blob = json.dumps(config_to_dict(cfg), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:length]


def _check_choice(name: str, value: Any, choices: tuple) -> None:
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; choose one of {', '.join(map(repr, choices))}")
