"""``facterlab run``: one FACTER experiment (Neutral, Fair, FACTER) and its headline metrics.

``facterlab run --dataset auto --model smollm2-135m --encoder all-MiniLM-L6-v2 --protocol open
--preset repro --n-rows 2500 --passes 3 --ranker generate --seed 0 [--max-new-tokens 250]
[--batch-size 8] [--cfr-rows 200] [--snsr-min-group 30] [--json]``

``--model openai:<model id> --server-url URL`` asks an OpenAI-compatible server (vLLM, ...;
docs/SCALING.md); ``--model rest:<name>[@<version>] --server-url URL --request-template FILE.json
--answer-path PATH`` a REST endpoint of another shape (docs/USAGE.md, "Your own recommender").  ``--model simulated`` runs the simulated recommender with known bias (docs/SIMULATED.md), tuned by
``--sim-beta --sim-sigma --sim-rho --sim-h --sim-phi --sim-demote --sim-seed --sim-compliance
--sim-bias-table``.  ``--delta twin --threshold null --rule-mining contrast`` turn on facterlab's
extensions (docs/FACTER.md §7).  ``--model fake`` runs
the deterministic test recommender with the torch-free hash encoder (as ``MODEL = "fake"`` in the notebooks).
"""

from __future__ import annotations

import json

from facterlab.config import (
    ATTRIBUTIONS,
    BOUNDS,
    DATASETS,
    DELTA_KINDS,
    FAKE_LLM,
    HASH_ENCODER,
    PLACEBO_KINDS,
    PRESETS,
    PROTOCOLS,
    RANKERS,
    RULE_EVIDENCES,
    RULE_MININGS,
    SIM_COMPLIANCE,
    THRESHOLD_KINDS,
    TWIN_DISTANCES,
    TWIN_EDITS,
    bound_hint,
    dataset_arg,
    is_rest_name,
    preset,
    results_dir,
    with_overrides,
)
from facterlab.datatypes import MissingValue
from facterlab.facter.pipeline import run_experiment
from facterlab.facter.record import as_metrics
from facterlab.facter.validation import check_free_space, validate_config
from facterlab.models import served
from facterlab.models.custom import check_rest
from facterlab.models.registry import served_model_id
from facterlab.safeio import read_json

HEADLINE = ("ndcg@10_multi", "recall@10_multi", "valid@10", "cfr_multi")

#: the size flags: (flag, (config section, field), help); their bounds and defaults come from facterlab.config
_SIZE_FLAGS = (
    ("max-new-tokens", ("model", "max_new_tokens"), "LLM tokens per answer"),
    ("batch-size", ("model", "batch_size"), "prompts per LLM batch"),
    ("cfr-rows", ("metrics", "cfr_rows"), "test rows sampled for CFR"),
    ("snsr-min-group", ("metrics", "snsr_min_group"), "smallest group counted by SNSR"),
)


def _span(section: str, name: str) -> str:
    return BOUNDS[section][name].span()


#: ``run``'s decoding flags (every backend): flag, model field, help
_DECODING_FLAGS = (
    ("temperature", "temperature", "sampling temperature (0: greedy, the reproducible choice on a server)"),
    ("repetition-penalty", "repetition_penalty", "repetition penalty (1: none; transformers serve takes no other)"),
)
#: ``run``'s served-model flags: flag, model field, type, help
_SERVED_FLAGS = (
    ("timeout", "timeout", float, "seconds each request may take in all, its retries included"),
    ("retries", "max_retries", int, "extra attempts of a request after a connection error or HTTP 429/5xx"),
    ("concurrency", "concurrency", int, "requests in flight at once"),
)


def register(subparsers) -> None:
    """Add the ``run`` command to the ``facterlab`` parser.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        What ``ArgumentParser.add_subparsers()`` returned; the ``run`` parser gets
        ``func=cmd_run``.
    """
    p = subparsers.add_parser("run", help="run Neutral, Fair and FACTER and print the headline metrics")
    p.add_argument(
        "--dataset",
        default="auto",
        type=dataset_arg,
        metavar="NAME",
        help=f"{', '.join(DATASETS)}, or a dataset imported with `facterlab data import` (default: auto)",
    )
    p.add_argument(
        "--model", default=None, help="LLM name (default: the preset's, smollm2-135m), 'simulated' or 'fake'"
    )
    p.add_argument("--encoder", default=None, help="encoder name (default: all-MiniLM-L6-v2)")
    p.add_argument(
        "--server-url",
        default=None,
        metavar="URL",
        help="the OpenAI-compatible server of --model openai:<model id> (docs/SCALING.md), or the endpoint of "
        "--model rest:<name>",
    )
    p.add_argument(
        "--tokenizer",
        default=None,
        metavar="NAME",
        help="the served model's tokenizer (registry name, local path or hub id): the chat template is rendered "
        "here and token ids are sent, prompts truncated to the server's context (docs/SCALING.md)",
    )
    for flag, name, text in _DECODING_FLAGS:
        p.add_argument(f"--{flag}", type=float, default=None, help=f"{text}, {bound_hint('model', name)}")
    served = p.add_argument_group("served model (--model openai:<model id>; docs/SCALING.md)")
    for flag, name, kind, text in _SERVED_FLAGS:
        served.add_argument(f"--{flag}", type=kind, default=None, help=f"{text}, {bound_hint('model', name)}")
    served.add_argument(
        "--api-key-env",
        default=None,
        metavar="NAME",
        help="the environment variable that holds the server's API key (sent as a Bearer token; never stored)",
    )
    rest = p.add_argument_group("REST endpoint (--model rest:<name>[@<version>]; docs/USAGE.md)")
    rest.add_argument(
        "--request-template",
        default=None,
        metavar="FILE.json",
        help='the JSON body sent per request, its "$name" placeholders filled ($history_ids, $attributes, '
        "$candidate_ids, $k, $prompt, ...)",
    )
    rest.add_argument(
        "--answer-path",
        default=None,
        metavar="PATH",
        help="where the ranked item ids or titles are in the JSON answer, e.g. data.recommendations or "
        "result.items[*].id",
    )
    p.add_argument("--protocol", default="open", choices=PROTOCOLS)
    p.add_argument("--preset", default="repro", choices=PRESETS)
    p.add_argument(
        "--n-rows",
        type=int,
        default=None,
        help=f"interaction rows, {_span('data', 'n_rows')} (default: the dataset's n)",
    )
    p.add_argument("--passes", type=int, default=None, help=f"FACTER passes T, {bound_hint('facter', 'passes')}")
    p.add_argument("--ranker", default=None, choices=RANKERS, help="re-ranking: generate | likelihood")
    p.add_argument("--seed", type=int, default=0, help=f"seed, {bound_hint('', 'seed')}")
    for flag, (section, name), text in _SIZE_FLAGS:
        p.add_argument(f"--{flag}", type=int, default=None, help=f"{text}, {bound_hint(section, name)}")
    sim = p.add_argument_group("simulated recommender (--model simulated; docs/SIMULATED.md)")
    for name, help_ in (
        ("beta", "bias strength in score SDs"),
        ("sigma", "score noise"),
        ("rho", "probability an applicable AVOID rule is honoured"),
        ("h", "title-corruption rate, open generation"),
        ("phi", "share of the bias the Fair prompt removes"),
        ("demote", "score penalty of an honoured rule's items"),
    ):
        sim.add_argument(f"--sim-{name}", type=float, default=None, help=f"{help_}, {bound_hint('sim', name)}")
    sim.add_argument("--sim-seed", type=int, default=None, help=f"simulator seed, {bound_hint('sim', 'seed')}")
    sim.add_argument(
        "--sim-compliance",
        default=None,
        choices=SIM_COMPLIANCE,
        help="relative (an honoured rule cancels the push, then demotes; default) | absolute (demote only)",
    )
    sim.add_argument(
        "--sim-bias-table",
        default=None,
        metavar="NAME_OR_FILE",
        help="bias table: default | rare (rarely watched genres: a positive control) | a JSON file "
        "{attribute: {value: [feature, ...] or {feature: weight}}}",
    )
    ext = p.add_argument_group("facterlab extensions (docs/FACTER.md §7; off in every preset)")
    ext.add_argument(
        "--delta", default=None, choices=DELTA_KINDS, help="fairness penalty: neighbour (FACTER) | twin (ours)"
    )
    ext.add_argument(
        "--threshold",
        default=None,
        choices=THRESHOLD_KINDS,
        help="flag: conformal (S > Q_t, FACTER) | null (twin Delta above the placebo quantile; needs --delta twin)",
    )
    ext.add_argument(
        "--rule-mining",
        default=None,
        choices=RULE_MININGS,
        help="count (FACTER) | contrast (enrichment; ours) | confirmed (twin-confirmed McNemar rules; ours)",
    )
    ext.add_argument(
        "--placebo",
        default=None,
        choices=PLACEBO_KINDS,
        help="the null threshold's placebo: family (largest of reword, field, order; default) | one of them",
    )
    ext.add_argument(
        "--twin",
        default=None,
        choices=TWIN_EDITS,
        help="the twin: flip (the protected attributes; default) | reword (the same values: a negative control)",
    )
    ext.add_argument(
        "--attribution",
        default=None,
        choices=ATTRIBUTIONS,
        help="confirmed rules: joint (every attribute of a flagged row; default) | per-attribute (one twin per "
        "attribute for flagged rows; rules for the attributes whose own twin moved the answer)",
    )
    ext.add_argument(
        "--twin-distance",
        default=None,
        choices=TWIN_DISTANCES,
        help="the twin Delta's statistic: top1 (the two top-1 items' embeddings; default) | list (the two top-k "
        "lists' rank-weighted mean embeddings; the placebos are measured the same way)",
    )
    ext.add_argument(
        "--rule-evidence",
        default=None,
        choices=RULE_EVIDENCES,
        help="confirmed rules: top1 (the top-1 items' features of row and twin; default) | list (how many items of "
        "their whole top-k lists carry each feature)",
    )
    ext.add_argument(
        "--draws", type=int, default=None, help=f"draws per request for the twin Delta, {bound_hint('facter', 'draws')}"
    )
    p.add_argument("--data-dir", default=None, help="data directory (default: $FACTERLAB_DATA)")
    p.add_argument("--out-dir", default=None, help="results root (default: $FACTERLAB_RESULTS or ./results)")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.add_argument("--fairllm", action="store_true", help="also compute snsr_fairllm (many extra predictions)")
    p.add_argument("--json", action="store_true", help="print metrics.json instead of the table")
    p.set_defaults(func=cmd_run)


def config_from_args(args):
    """The RunConfig the command line asks for.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed ``run`` arguments; a flag left at None keeps the preset's value (``--seed``
        sets both the run seed and the data seed).

    Returns
    -------
    RunConfig
        ``preset(args.preset, **overrides)``; not validated here (see :func:`cmd_run`).
    """
    over = {"protocol": args.protocol, "seed": args.seed, "data__dataset": args.dataset, "data__seed": args.seed}
    if args.model:
        over["model__llm"] = args.model
        if args.model == FAKE_LLM and not args.encoder:
            over["model__encoder"] = (
                HASH_ENCODER  # the fake model goes with the torch-free encoder (as in the notebooks)
            )
    if args.encoder:
        over["model__encoder"] = args.encoder
    if getattr(args, "server_url", None):
        over["model__server_url"] = args.server_url
    if getattr(args, "tokenizer", None):
        over["model__tokenizer"] = args.tokenizer
    if getattr(args, "request_template", None):  # the file's JSON, kept in the config (and its run id)
        try:
            over["model__request_template"] = json.dumps(read_json(args.request_template, "request template"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"--request-template {args.request_template}: not JSON ({exc})") from None
    if getattr(args, "answer_path", None):
        over["model__answer_path"] = args.answer_path
    if args.ranker:
        over["model__ranker"] = args.ranker
    for flag, name, *_ in (*_DECODING_FLAGS, *_SERVED_FLAGS, ("api-key-env", "api_key_env")):
        if getattr(args, flag.replace("-", "_"), None) is not None:
            over[f"model__{name}"] = getattr(args, flag.replace("-", "_"))
    if args.n_rows is not None:
        over["data__n_rows"] = args.n_rows
    if args.passes is not None:
        over["facter__passes"] = args.passes
    for flag, (section, name), _ in _SIZE_FLAGS:
        if getattr(args, flag.replace("-", "_"), None) is not None:
            over[f"{section}__{name}"] = getattr(args, flag.replace("-", "_"))
    for name in ("beta", "sigma", "rho", "h", "phi", "demote", "seed", "compliance", "bias_table"):
        if getattr(args, f"sim_{name}", None) is not None:
            over[f"sim__{name}"] = getattr(args, f"sim_{name}")
    for name in (
        "delta",
        "threshold",
        "rule_mining",
        "placebo",
        "twin",
        "draws",
        "attribution",
        "twin_distance",
        "rule_evidence",
    ):
        if getattr(args, name, None) is not None:
            over[f"facter__{name}"] = getattr(args, name)
    # bounds unchecked here: cmd_run's validate_config lists every problem at once
    return with_overrides(preset(args.preset), check_bounds=False, **over)


def headline_table(metrics) -> str:
    """A small text table: one line per method with the headline metrics and violations (``metrics``: the
    run's record, result or metrics record; :func:`facterlab.facter.record.as_metrics`).

    Parameters
    ----------
    metrics : RunRecord, RunResult or RunMetrics
        Anything :func:`facterlab.facter.record.as_metrics` accepts.

    Returns
    -------
    str
        The table, lines joined by newlines: a run header, one line per method ("n/a" for a missing
        value), and a warning line for a fully degenerate calibration and the random floor when
        present.
    """
    m = as_metrics(metrics)

    def fmt(v):
        if v is None or isinstance(v, (MissingValue, dict)):
            return "n/a"
        if isinstance(v, list):
            return "[" + ", ".join(fmt(x) for x in v) + "]"
        return f"{v:.4f}" if isinstance(v, float) else str(v)

    cols = HEADLINE + ("snsr_joint", "viol_fixed", "viol_adaptive", "degenerate")
    lines = [
        f"run {m.run_id}  dataset={m.dataset}{' (SYNTHETIC)' if m.is_synthetic else ''}  protocol={m.protocol}  "
        f"n_calib={m.n_calib} n_test={m.n_test}  Q0={fmt(m.calibration.q0)}",
        "method   " + "  ".join(f"{c:>15}" for c in cols),
    ]
    for name, block in m.methods.items():
        flat = block.flat()
        vals = [flat.get(c) for c in (*HEADLINE, "snsr_joint")] + [
            block.violations.get("fixed_q0"),
            block.violations.get("adaptive"),
            block.n_degenerate,
        ]
        lines.append(f"{name:8} " + "  ".join(f"{fmt(x):>15}" for x in vals))
    cal_deg = m.calibration.degenerate
    if cal_deg is not None and cal_deg.all_degenerate:
        lines.append(
            f"WARNING: degenerate calibration ({cal_deg.reason}): Q0 measures nothing, violation counts are missing"
        )
    if m.random_floor is not None:
        lines.append(f"random floor: ndcg@10_multi={fmt(m.random_floor.ndcg_multi)}")
    return "\n".join(lines)


def cmd_run(args) -> int:
    """Run ``facterlab run``: validate, run Neutral, Fair and FACTER, print the table or the JSON.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed ``run`` arguments.

    Returns
    -------
    int
        0 on success (errors are raised, for the CLI to report).
    """
    with served.command("run"):  # hints name run's flags, until the command ends
        return _run(args)


def _run(args) -> int:
    cfg = config_from_args(args)
    # every bound, the model names and the results folder, before data or models are touched
    validate_config(cfg, out_dir=results_dir(args.out_dir), llm=True, encoder=True)
    if served_model_id(cfg.model.llm) is not None:  # the server can answer this config, before any work
        served.check_served(cfg.model, cfg.protocol)
    if is_rest_name(cfg.model.llm):  # what can be checked without asking the endpoint (its key), before any work
        check_rest(cfg.model)
    check_free_space(cfg, results_dir(args.out_dir))
    res = run_experiment(  # a rest:<name> endpoint is built with the run's catalogue (pipeline._models)
        cfg,
        data_dir=args.data_dir,
        out_dir=args.out_dir,
        progress=not args.no_progress,
        fairllm=args.fairllm,
    )
    if args.json:
        print(json.dumps(res.metrics, indent=2, sort_keys=True))
    else:
        print(headline_table(res.record))
        print(f"saved to {res.out_dir}")
    return 0
