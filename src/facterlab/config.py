"""Frozen configuration dataclasses and named presets.

Every variant that the sources disagree on is a named field here (see docs/PROTOCOL.md):
tables print which variant produced them via :func:`config_to_dict`.

Presets
-------
A *preset* is a named set of the method's settings (alpha, threshold rule, protocol switches); it is
not a *profile* (the sizes and backbones of a ``facterlab reproduce`` run, :data:`facterlab.params.PROFILES`;
the ``paper`` profile runs preset ``repro``).  docs/ARCHITECTURE.md defines the words.

- ``repro`` (default): the reproduction study's settings: alpha = 0.10, ML-1M n = 2,500.
- ``icml``: the ICML 2025 paper's settings where they differ: alpha = 0.20 (called ``paper`` before).
- ``facterlab``: the repro settings with facterlab's own choice on every protocol switch
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

# re-exported: the allowed values and the served-model names lived here before config was split along its
# seams (issue 32); ``from facterlab.config import BOUNDS`` and the rest still work
from facterlab.config_bounds import (  # noqa: F401
    ATTRIBUTIONS,
    BOUNDS,
    CALIBRATION_PROMPTS,
    CFR_PROMPTS,
    CORRECTIONS,
    DATASETS,
    DELTA_KINDS,
    EMPTY_OUTPUT_RULES,
    FLIP_STRATEGIES,
    GENDER_WORDINGS,
    LINEAR_KERNELS,
    MAPPINGS,
    MAX_SEED,
    NDCG_POSITIONS,
    PLACEBO_KINDS,
    PROTOCOLS,
    RANKERS,
    RAPIDFUZZ_THRESHOLD,
    RULE_EVIDENCES,
    RULE_KEYINGS,
    RULE_MININGS,
    RULE_TIE_ORDERS,
    SIM_BIAS_TABLES,
    SIM_COMPLIANCE,
    SIM_READS,
    SIM_TRIGGERS,
    SNSR_EMPTY_ROWS,
    SNSR_ITEMS,
    THREADS,
    THRESHOLD_KINDS,
    THRESHOLD_RULES,
    TIE_ORDERS,
    TOP1_RULES,
    TWIN_DISTANCES,
    TWIN_EDITS,
    Bound,
    _check_choice,
    dataset_arg,
    is_dataset_name,
    short_repr,
)
from facterlab.config_served import ENV_NAME as _ENV_NAME
from facterlab.config_served import (  # noqa: F401
    PLACEHOLDERS,
    REST_PREFIX,
    SERVED_PREFIX,
    TRANSPORT_FIELDS,
    is_rest_name,
    is_served_name,
    parse_answer_path,
    redact_url,
    rest_name_parts,
    rest_problems,
    server_url_problem,
    template_placeholders,
)

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
# Config sections (their fields' choices and bounds: facterlab.config_bounds)


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
        if not is_dataset_name(self.dataset):  # a built-in name, or an imported dataset's (loaded later)
            _check_choice("dataset", self.dataset, DATASETS)
        _check_choice("tie_order", self.tie_order, TIE_ORDERS)
        _raise_bound_problems("data", self, only=("calib_frac",))


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
    # llm="openai:<model id>" only: the OpenAI-compatible server's base URL (facterlab.models.served);
    # left out of the config hash while None, so that no other run id changes
    server_url: str | None = None
    # llm="openai:<model id>" only: the served model's tokenizer (a registry name such as "smollm2-135m",
    # a local path or a hub id): its chat template is rendered here and token ids are sent to
    # /v1/completions (docs/SCALING.md); None: the chat endpoint.  Out of the config hash while None
    tokenizer: str | None = None
    # llm="openai:<model id>" only: how requests travel (facterlab.models.served; docs/SCALING.md).  They
    # never change an answer, so :func:`config_hash` leaves them out of every run id (:data:`TRANSPORT_FIELDS`)
    timeout: float = 300.0  # seconds: each request's total deadline, its retries and every read included
    max_retries: int = 2  # extra attempts of a request after a connection error, HTTP 408/425/429/5xx
    concurrency: int = 4  # requests in flight at once
    # the NAME of the environment variable that holds the API key (sent as "Authorization: Bearer ...");
    # the key itself is read when a request is sent and is never in a config, a run id or a record
    api_key_env: str | None = None
    # in-process LLM (docs/CPU_DECODING.md); each is in the recommender's fingerprint when not its default,
    # and out of the config hash at its default (ADDED_FIELDS)
    linear_kernel: str = "blas"  # "blas" (torch's default GEMM) | "onednn" (oneDNN, packed weights; CPU float32)
    stop_at_answer: bool = False  # True: a row stops once its parsed answer is final (raw text ends there)
    # llm="rest:<name>[@<version>]" only (facterlab.models.custom.RestRecommender; docs/USAGE.md): the JSON
    # request template (its "$name" placeholders filled per request; kept as canonical JSON text) and the
    # dotted path of the ranked answer in the endpoint's JSON (``data.items``, ``result.items[*].id``).
    # Out of the config hash while None (ADDED_FIELDS)
    request_template: str | None = None
    answer_path: str | None = None

    def __post_init__(self) -> None:
        _check_choice("ranker", self.ranker, RANKERS)
        _check_choice("linear_kernel", self.linear_kernel, LINEAR_KERNELS)
        if not isinstance(self.stop_at_answer, bool):
            raise ValueError(f"stop_at_answer must be True or False, got {self.stop_at_answer!r}")
        _raise_bound_problems("model", self, only=TRANSPORT_FIELDS[:3])
        if self.api_key_env is not None and not (
            isinstance(self.api_key_env, str) and _ENV_NAME.fullmatch(self.api_key_env)
        ):  # never echoed: it may be the key itself, pasted by mistake
            raise ValueError(
                "api_key_env must be the NAME of an environment variable (letters, digits and _, at most 128), "
                "e.g. 'OPENAI_API_KEY', never the key itself"
            )
        if self.tokenizer is not None:
            tok = self.tokenizer
            if not isinstance(tok, str) or not tok.strip() or len(tok) > 1024 or "\n" in tok:
                raise ValueError(
                    f"tokenizer {tok!r}: must be a registry name, local path or hub id of at most 1024 characters"
                )
            if is_served_name(tok):
                raise ValueError(f"tokenizer {tok!r}: name the tokenizer's files (registry name, path, hub id)")
            if not is_served_name(self.llm):
                raise ValueError(
                    f"tokenizer {tok!r} is given but the LLM {self.llm!r} is not served (the in-process model "
                    "uses its own); name it 'openai:<model id>' or leave model.tokenizer unset"
                )
        self._check_rest()
        if self.server_url is not None:
            url = self.server_url
            problem = server_url_problem(url, any_path=is_rest_name(self.llm))
            if problem:
                raise ValueError(f"server_url {redact_url(url)[:200]!r}: {problem}")
            if not is_served_name(self.llm) and not is_rest_name(self.llm):
                raise ValueError(
                    f"server_url {redact_url(url)!r} is given but the LLM {self.llm!r} is not served: name it 'openai:<model id>'"
                )

    def _check_rest(self) -> None:
        """A ``rest:<name>`` endpoint's fields (its URL is checked with the other servers'), before any work;
        the template is kept as canonical JSON text, so that its spelling does not change the run id."""
        if not is_rest_name(self.llm):
            for name in ("request_template", "answer_path"):
                if getattr(self, name) is not None:
                    raise ValueError(
                        f"{name} is given but the LLM {self.llm!r} is not a REST endpoint: name it "
                        f"'{REST_PREFIX}<name>' (facterlab.models.custom.RestRecommender)"
                    )
            return
        rest_name_parts(self.llm)
        missing = [n for n in ("server_url", "request_template", "answer_path") if getattr(self, n) is None]
        if missing:
            raise ValueError(
                f"model {self.llm!r} needs {', '.join(missing)} (facterlab run: --server-url URL "
                "--request-template FILE.json --answer-path PATH; docs/USAGE.md, 'Your own recommender')"
            )
        template = self.request_template
        if isinstance(template, (dict, list)):
            template = json.dumps(template)
        if not isinstance(template, str):
            raise ValueError(f"request_template must be JSON text, a dict or a list, not {type(template).__name__}")
        problems = rest_problems(template, self.answer_path)
        if problems:
            raise ValueError(f"model {self.llm!r}: " + "; ".join(problems))
        canonical = json.dumps(json.loads(template), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        object.__setattr__(self, "request_template", canonical)

    def ranker_for(self, protocol: str) -> str:
        """The ranker a protocol uses: :attr:`ranker` for "rank", always "generate" for "open".

        >>> ModelConfig(ranker="likelihood").ranker_for("open"), ModelConfig(ranker="likelihood").ranker_for("rank")
        ('generate', 'likelihood')
        """
        return self.ranker if protocol == "rank" else "generate"


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
    # facterlab extensions (docs/FACTER.md §7), off in every preset:
    delta: str = "neighbour"  # fairness penalty: "neighbour" (FACTER/REPRO) | "twin" (same row, attributes flipped)
    threshold: str = "conformal"  # flag: "conformal" (S > Q_t, FACTER) | "null" (twin Delta > placebo quantile)
    rule_mining: str = "count"  # "count" (FACTER/REPRO) | "contrast" (enrichment over the group's other outputs)
    null_tol: float = 1e-6  # threshold "null": Delta must exceed the placebo quantile by more than this
    # threshold "null": the placebo ("family": per row the largest of reword, field and order; docs/FACTER.md §7)
    placebo: str = "family"
    twin: str = "flip"  # twin Delta: "flip" the protected attributes | "reword" them (a negative control)
    draws: int = 1  # twin Delta: each request (row, twin, placebo) asked this many times (seeds), answers averaged
    rule_level: float = 0.05  # rule_mining "confirmed": family-wise level of the exact McNemar tests (Bonferroni)
    rule_min_effect: float = 0.2  # rule_mining "confirmed": least (b - c) / (b + c) of a rule's discordant pairs
    max_rules: int = 10  # rule_mining "confirmed": the most rules in force at once (all groups)
    # rule_mining "confirmed": "joint" (a flagged pair counts for every attribute of the row) | "per-attribute"
    # (flagged rows also asked with one attribute flipped at a time; credited to the attributes whose own twin
    # moved the answer past Q_null, each mined against its own twin) | "per-attribute-all" (every row asked so,
    # every row's pair counts; docs/FACTER.md §7.3)
    attribution: str = "joint"
    # twin Delta: "top1" (the two top-1 items' embeddings, FACTER's f(yhat)) | "list" (the rank-weighted mean
    # embeddings of the two top-k lists; docs/FACTER.md §7.2).  The placebos are measured the same way.
    twin_distance: str = "top1"
    # rule_mining "confirmed": a pair's evidence, "top1" (the top-1 items' features) | "list" (per feature, how many
    # items of the row's and the twin's top-k lists carry it; docs/FACTER.md §7.3)
    rule_evidence: str = "top1"

    def __post_init__(self) -> None:
        _check_choice("delta", self.delta, DELTA_KINDS)
        _check_choice("threshold", self.threshold, THRESHOLD_KINDS)
        _check_choice("rule_mining", self.rule_mining, RULE_MININGS)
        _check_choice("placebo", self.placebo, PLACEBO_KINDS)
        _check_choice("twin", self.twin, TWIN_EDITS)
        _check_choice("attribution", self.attribution, ATTRIBUTIONS)
        _check_choice("twin_distance", self.twin_distance, TWIN_DISTANCES)
        if self.twin_distance != "top1" and self.delta != "twin":
            raise ValueError(
                f"facter.twin_distance {self.twin_distance!r} is how the twin Delta compares two answers: "
                "it needs facter.delta 'twin'"
            )
        _check_choice("rule_evidence", self.rule_evidence, RULE_EVIDENCES)
        if self.rule_evidence != "top1" and self.rule_mining != "confirmed":
            raise ValueError(
                f"facter.rule_evidence {self.rule_evidence!r} is the evidence of confirmed rules: it needs "
                "facter.rule_mining 'confirmed'"
            )
        if self.attribution != "joint" and (self.rule_mining != "confirmed" or self.threshold != "null"):
            raise ValueError(
                f"facter.attribution {self.attribution!r} credits confirmed rules by each attribute's own twin against "
                "Q_null: it needs facter.rule_mining 'confirmed' and facter.threshold 'null'"
            )
        if self.rule_mining == "confirmed" and self.delta != "twin":
            raise ValueError(
                "facter.rule_mining 'confirmed' mines twin-confirmed differences: it needs facter.delta 'twin'"
            )
        if self.draws != 1 and self.delta != "twin":
            raise ValueError("facter.draws > 1 averages the twin Delta over draws: it needs facter.delta 'twin'")
        if self.threshold == "null" and self.delta != "twin":
            raise ValueError("facter.threshold 'null' tests the twin distance: it needs facter.delta 'twin'")
        _check_choice("threshold_rule", self.threshold_rule, THRESHOLD_RULES)
        _check_choice("correction", self.correction, CORRECTIONS)
        _check_choice("rule_keying", self.rule_keying, RULE_KEYINGS)
        _check_choice("calibration_prompt", self.calibration_prompt, CALIBRATION_PROMPTS)
        _check_choice("rule_tie_order", self.rule_tie_order, RULE_TIE_ORDERS)
        _check_choice("top1", self.top1, TOP1_RULES)
        _check_choice("empty_output_rule", self.empty_output_rule, EMPTY_OUTPUT_RULES)
        _check_choice("gender_in_prompt", self.gender_in_prompt, GENDER_WORDINGS)
        _raise_bound_problems(
            "facter", self, only=("alpha", "null_tol", "draws", "rule_level", "rule_min_effect", "max_rules")
        )


@dataclass(frozen=True)
class MetricsConfig:
    """How the run is scored: the cut-off k, title mapping, SNSR, CFR and NDCG settings (docs/FACTER.md §4)."""

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
    snsr_empty_rows: str = "zero"  # SNSR row with no mapped item: "zero" (REPRO: zero vector, kept) | "drop"

    def __post_init__(self) -> None:
        _check_choice("mapping", self.mapping, MAPPINGS)
        _check_choice("flip_strategy", self.flip_strategy, FLIP_STRATEGIES)
        _check_choice("ndcg_positions", self.ndcg_positions, NDCG_POSITIONS)
        _check_choice("snsr_items", self.snsr_items, SNSR_ITEMS)
        _check_choice("cfr_prompt", self.cfr_prompt, CFR_PROMPTS)
        _check_choice("snsr_empty_rows", self.snsr_empty_rows, SNSR_EMPTY_ROWS)


@dataclass(frozen=True)
class SimulatorConfig:
    """The simulated recommender's knobs (``model.llm == "simulated"``; docs/SIMULATED.md).

    ``beta``: bias strength (score standard deviations added to pushed features); ``sigma``: score noise;
    ``rho``: probability that an applicable AVOID rule is honoured; ``h``: title-corruption rate (open
    generation); ``phi``: share of the bias the Fair prompt's rules remove; ``demote``: score penalty (in
    standard deviations) of an honoured rule's items; ``compliance``: ``"relative"`` (an honoured rule
    first cancels the push on the items it names, then lowers them by ``demote``) or ``"absolute"``
    (only ``demote``: sim-v1's reading); ``bias_table``: ``"default"``, ``"rare"`` (pushes rarely
    watched genres: a positive control) or the path of a JSON table; ``n_factors``: PureSVD rank;
    ``seed``: mixed into every draw.  Ignored (and left out of the run id) for other models.
    """

    beta: float = 1.0
    sigma: float = 0.5
    rho: float = 1.0
    h: float = 0.05
    phi: float = 0.3
    demote: float = 1.0
    compliance: str = "relative"
    bias_table: str = "default"
    n_factors: int = 16
    seed: int = 0
    # the text-reading variant (sim.reads = "text"; docs/SIMULATED.md, "A simulator that reads text")
    reads: str = "fields"
    trigger: str = "semantic"
    order_sd: float = 0.0
    wording_sd: float = 0.0
    field_sd: float = 0.0
    prompt_sd: float = 0.0
    temperature: float = 0.0
    # a random function of the values' meaning, with no direction (the `semantic` case of TEXT_CASES)
    meaning_sd: float = 0.0

    def __post_init__(self) -> None:
        _check_choice("sim.compliance", self.compliance, SIM_COMPLIANCE)
        _check_choice("sim.reads", self.reads, SIM_READS)
        _check_choice("sim.trigger", self.trigger, SIM_TRIGGERS)
        surface = (self.order_sd, self.wording_sd, self.field_sd, self.prompt_sd, self.temperature, self.meaning_sd)
        if self.reads == "fields" and (self.trigger != "semantic" or any(x != 0 for x in surface)):
            raise ValueError(
                "sim.trigger and the surface sensitivities (order_sd, wording_sd, field_sd, prompt_sd, temperature, "
                "meaning_sd) "
                "need the text-reading simulator: set sim.reads 'text'"
            )
        if not isinstance(self.bias_table, str) or not self.bias_table:
            raise ValueError(
                f"sim.bias_table must be {' or '.join(map(repr, SIM_BIAS_TABLES))} or the path of a JSON file, "
                f"got {self.bias_table!r}"
            )

        _raise_bound_problems("sim", self)


SIMULATED_LLM = "simulated"
#: the deterministic test recommender (:class:`facterlab.models.fake.FakeRecommender`), used with the
#: torch-free ``"hash-encoder"``; accepted by the notebooks (``MODEL = "fake"``) and ``facterlab run --model fake``
FAKE_LLM = "fake"
#: the torch-free encoder that goes with the fake recommender (:class:`facterlab.models.fake.HashEncoder`)
HASH_ENCODER = "hash-encoder"


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


def field_default(section: str, name: str) -> Any:
    """The default of config field ``name`` of ``section`` (``""``: :class:`RunConfig`); the one place
    a default is written is its dataclass.

    >>> field_default("facter", "passes"), field_default("sim", "h")
    (3, 0.05)
    """
    cls = SECTIONS[section]
    for f in dataclasses.fields(cls):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            raise ValueError(f"{section}.{name} has no plain default")
    raise ValueError(f"unknown config field {section + '.' if section else ''}{name}")


def bound_hint(section: str, name: str) -> str:
    """``1..100, default 3``: the range and default of a field, for help texts.

    >>> bound_hint("facter", "passes")
    '1..100, default 3'
    """
    b = BOUNDS[section][name]
    d = field_default(section, name)
    return f"{b.span()}, default {d if d is not None else 'None'}"


def bound_problems(section: str, obj: Any, only: tuple | None = None) -> list:
    """One sentence per field of ``obj`` (a config section) outside its :data:`BOUNDS`, each naming the
    field, the value, the range and a value that works (the default).  None is allowed where the
    default is None."""
    out = []
    for name, b in BOUNDS[section].items():
        if only is not None and name not in only:
            continue
        if not hasattr(obj, name):
            continue
        value = getattr(obj, name)
        default = field_default(section, name)
        if value is None and default is None:
            continue
        if section == "metrics" and name == "map_threshold" and getattr(obj, "mapping", "") == "rapidfuzz":
            b = RAPIDFUZZ_THRESHOLD
            default = b.example
        if not b.contains(value):
            label = f"{section}.{name}" if section else name
            example = b.example if default is None else default
            tail = " (or None for the default)" if default is None else ""
            why = f"; {b.why}" if b.why else ""
            out.append(f"{label} = {short_repr(value)}: must be {b.describe()}{tail} (e.g. {example}{why})")
    return out


def _raise_bound_problems(section: str, obj: Any, only: tuple | None = None) -> None:
    problems = bound_problems(section, obj, only)
    if problems:
        raise ValueError("; ".join(problems))


PRESETS = ("repro", "icml", "facterlab")

#: section name -> dataclass (``""``: the top level)
SECTIONS: dict = {
    "": RunConfig,
    "data": DataConfig,
    "model": ModelConfig,
    "facter": FacterConfig,
    "metrics": MetricsConfig,
    "sim": SimulatorConfig,
}

#: The protocol switches (docs/PROTOCOL.md) as ``section__field`` -> (REPRO's choice, facterlab's choice).
#: ``repro`` and ``icml`` take REPRO's (the dataclass defaults); ``facterlab`` takes ours.
PROTOCOL_SWITCHES = {
    "data__tie_order": ("file_order", "item_id"),
    "metrics__ndcg_positions": ("compacted", "positional"),
    "metrics__snsr_items": ("mapped_title", "item_text"),
    "metrics__snsr_empty_rows": ("zero", "drop"),
    "facter__rule_tie_order": ("first_seen", "by_name"),
    "facter__top1": ("first_mapped", "position0"),
    "facter__empty_output_rule": ("unknown_generation", "skip"),
    "metrics__cfr_prompt": ("last_pass", "final_rules"),
    "facter__gender_in_prompt": ("code", "word"),
}


def preset(name: str = "repro", **overrides: Any) -> RunConfig:
    """Build a :class:`RunConfig` from a named preset plus dotted overrides.

    Parameters
    ----------
    name : str
        ``"repro"`` (default: the reproduction study's settings), ``"icml"`` (alpha 0.20) or
        ``"facterlab"`` (facterlab's choice on every protocol switch); see the module docstring.
    **overrides
        ``section__field=value`` (e.g. ``facter__alpha=0.2``, ``data__n_rows=100``) or a top-level
        field (``protocol="rank"``); each value is checked against its bounds.

    Returns
    -------
    RunConfig
        The frozen configuration; its hash is the run id (:func:`config_hash`).

    See Also
    --------
    RunConfig : the sections and fields (``data``, ``model``, ``facter``, ``metrics``, ``sim``).
    with_overrides : the same overrides on a config you have.
    facterlab.facter.run_experiment : runs a config.
    facterlab.facter.validation.validate_config : every bound checked before a run starts.

    Examples
    --------
    >>> from facterlab import preset
    >>> cfg = preset("repro", data__n_rows=100, facter__alpha=0.2, protocol="rank")
    >>> cfg.preset, cfg.protocol, cfg.data.n_rows, cfg.facter.alpha, cfg.facter.passes
    ('repro', 'rank', 100, 0.2, 3)

    ``icml`` is REPRO's settings at the ICML paper's alpha; ``facterlab`` takes facterlab's choice on
    every protocol switch (docs/PROTOCOL.md):

    >>> preset("icml").facter.alpha, preset("repro").metrics.ndcg_positions, preset("facterlab").metrics.ndcg_positions
    (0.2, 'compacted', 'positional')

    The same config, built twice, has the same hash (the first half of its run id); a misspelt field is
    an error that lists the known ones:

    >>> config_hash(cfg) == config_hash(preset("repro", protocol="rank", facter__alpha=0.2, data__n_rows=100))
    True
    >>> preset("repro", facter__pases=1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: unknown facter config field(s): ['pases']; known: ['alpha', ...]
    """
    if name == "paper":
        raise ValueError(
            "preset 'paper' is now called 'icml' (the ICML paper's alpha = 0.20); 'paper' names the "
            "facterlab reproduce profile (sizes and backbones), which runs preset 'repro'"
        )
    _check_choice("preset", name, PRESETS)
    cfg = RunConfig(preset=name)
    if name == "facterlab":
        switches: dict[str, Any] = {k: v[1] for k, v in PROTOCOL_SWITCHES.items()}
        cfg = with_overrides(cfg, **switches)
    if name == "icml":
        cfg = replace(cfg, facter=replace(cfg.facter, alpha=0.20))
    return with_overrides(cfg, **overrides)


def with_overrides(cfg: RunConfig, *, check_bounds: bool = True, **overrides: Any) -> RunConfig:
    """Return ``cfg`` with ``section__field=value`` or top-level ``field=value`` overrides, each value
    checked against its bound (a ``ValueError`` naming the field, its range and a value that works) unless
    ``check_bounds`` is False (the command line, whose :func:`~facterlab.facter.validation.validate_config`
    lists every problem at once)."""
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
        if check_bounds:  # each overridden value against its bound now, not at the run's start
            _raise_bound_problems(sec, top[sec], only=tuple(vals))
    out = replace(cfg, **top)
    if check_bounds:  # the top-level fields with a bound (the seed)
        _raise_bound_problems("", out, only=tuple(k for k in top if k in BOUNDS[""]))
    return out


#: Fields added after runs were saved, as ``(section, field)`` -> the value every earlier run had
#: implicitly.  :func:`config_to_dict` leaves such a field out at that value, so that the saved runs keep
#: their run ids and a run made today at that value shares them; any other value is part of the id.  A
#: saved config without the field therefore means this value (:func:`saved_setting`).
ADDED_FIELDS: dict = {
    ("model", "server_url"): None,
    ("model", "tokenizer"): None,
    ("model", "timeout"): 300.0,
    ("model", "max_retries"): 2,
    ("model", "concurrency"): 4,
    ("model", "api_key_env"): None,
    ("model", "linear_kernel"): "blas",
    ("model", "stop_at_answer"): False,
    ("model", "request_template"): None,
    ("model", "answer_path"): None,
    ("metrics", "snsr_empty_rows"): "drop",
    ("facter", "draws"): 1,
    ("facter", "twin"): "flip",
    ("facter", "rule_level"): 0.05,
    ("facter", "rule_min_effect"): 0.2,
    ("facter", "max_rules"): 10,
    ("facter", "attribution"): "joint",
    ("facter", "twin_distance"): "top1",
    ("facter", "rule_evidence"): "top1",
    ("sim", "reads"): "fields",
    ("sim", "trigger"): "semantic",
    ("sim", "order_sd"): 0.0,
    ("sim", "wording_sd"): 0.0,
    ("sim", "field_sd"): 0.0,
    ("sim", "prompt_sd"): 0.0,
    ("sim", "meaning_sd"): 0.0,
    ("sim", "temperature"): 0.0,  # runs before the switch dropped SNSR rows with no mapped item
}


#: Fields that change an answer only in one setting, as ``(section, field)`` -> ``(switch field, its value,
#: the value runs saved before the field had)``: :func:`config_to_dict` leaves the field out of every config
#: whose switch has another value (so that no other run id changes) and where it has the old value (so that
#: a run saved before the field keeps its id); a saved config of that setting without the field had the old
#: value (:func:`saved_setting`).
CONDITIONAL_FIELDS: dict = {
    ("facter", "placebo"): ("threshold", "null", "order"),
}


def saved_setting(config: dict, section: str, name: str) -> Any:
    """A field of a saved config (``config.json``'s ``config``), with :data:`ADDED_FIELDS`' value where
    the field was left out; None when the config has no such section or field.

    >>> saved_setting({"metrics": {"k": 10}}, "metrics", "snsr_empty_rows")
    'drop'
    """
    node = config.get(section) if section else config
    if not isinstance(node, dict):
        return None
    if name not in node and (section, name) in ADDED_FIELDS:
        return ADDED_FIELDS[(section, name)]
    if name not in node and (section, name) in CONDITIONAL_FIELDS:
        switch, on, before = CONDITIONAL_FIELDS[(section, name)]
        return before if node.get(switch) == on else None
    return node.get(name)


def config_to_dict(cfg: Any) -> dict:
    """Plain-dict view of a (nested) config dataclass, JSON-serialisable.

    A :class:`RunConfig` whose model is not the simulated recommender leaves out its ``sim`` section, so
    that the simulator's knobs never change the run id of an LLM run.
    """
    out = json.loads(json.dumps(dataclasses.asdict(cfg), sort_keys=True, default=str))
    if isinstance(cfg, RunConfig) and cfg.model.llm != SIMULATED_LLM:
        out.pop("sim", None)
    for (section, name), before in ADDED_FIELDS.items():
        cls = SECTIONS[section]
        node = out.get(section) if isinstance(cfg, RunConfig) else out if isinstance(cfg, cls) else None
        if isinstance(node, dict) and name in node and node[name] == before:
            node.pop(name)
    for (section, name), (switch, on, before) in CONDITIONAL_FIELDS.items():
        cls = SECTIONS[section]
        node = out.get(section) if isinstance(cfg, RunConfig) else out if isinstance(cfg, cls) else None
        if isinstance(node, dict) and (node.get(switch) != on or node.get(name) == before):
            node.pop(name, None)
    return out


def config_hash(cfg: Any, length: int = 12) -> str:
    """Stable short SHA-256 of a config's canonical JSON: the run id.  The served backend's
    :data:`TRANSPORT_FIELDS` are left out (they never change an answer)."""
    out = config_to_dict(cfg)
    node = out.get("model") if isinstance(cfg, RunConfig) else out if isinstance(cfg, ModelConfig) else None
    if isinstance(node, dict):
        for name in TRANSPORT_FIELDS:
            node.pop(name, None)
    blob = json.dumps(out, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:length]
