"""``facterlab run``: one FACTER experiment (Neutral, Fair, FACTER) and its headline metrics.

``facterlab run --dataset auto --model smollm2-135m --encoder all-MiniLM-L6-v2 --protocol open
--preset repro --n-rows 2500 --passes 3 --ranker generate --seed 0 [--max-new-tokens 250]
[--batch-size 8] [--cfr-rows 200] [--snsr-min-group 30] [--json]``

``--model simulated`` runs the simulated recommender with known bias (docs/SIMULATED.md), tuned by
``--sim-beta --sim-sigma --sim-rho --sim-h --sim-phi --sim-demote --sim-seed``.
"""

from __future__ import annotations

import json

from facterlab.config import DATASETS, PRESETS, PROTOCOLS, RANKERS, preset

HEADLINE = ("ndcg@10_multi", "recall@10_multi", "valid@10", "cfr_multi")


def register(subparsers) -> None:
    """Add the ``run`` command to the ``facterlab`` parser."""
    p = subparsers.add_parser("run", help="run Neutral, Fair and FACTER and print the headline metrics")
    p.add_argument("--dataset", default="auto", choices=DATASETS)
    p.add_argument("--model", default=None, help="LLM name (default: the preset's, smollm2-135m)")
    p.add_argument("--encoder", default=None, help="encoder name (default: all-MiniLM-L6-v2)")
    p.add_argument("--protocol", default="open", choices=PROTOCOLS)
    p.add_argument("--preset", default="repro", choices=PRESETS)
    p.add_argument("--n-rows", type=int, default=None, help="interaction rows (default: the dataset's n)")
    p.add_argument("--passes", type=int, default=None, help="FACTER passes T (default 3)")
    p.add_argument("--ranker", default=None, choices=RANKERS, help="re-ranking: generate | likelihood")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-new-tokens", type=int, default=None, help="LLM tokens per answer (default 250)")
    p.add_argument("--batch-size", type=int, default=None, help="prompts per LLM batch (default 8)")
    p.add_argument("--cfr-rows", type=int, default=None, help="test rows sampled for CFR (default 200)")
    p.add_argument("--snsr-min-group", type=int, default=None, help="smallest group counted by SNSR (default 30)")
    sim = p.add_argument_group("simulated recommender (--model simulated; docs/SIMULATED.md)")
    for name, help_ in (
        ("beta", "bias strength in score SDs (default 1.0)"),
        ("sigma", "score noise (default 0.5)"),
        ("rho", "probability an applicable AVOID rule is honoured (default 1.0)"),
        ("h", "title-corruption rate, open generation (default 0.05)"),
        ("phi", "share of the bias the Fair prompt removes (default 0.3)"),
        ("demote", "score penalty of an honoured rule's items (default 1.0)"),
    ):
        sim.add_argument(f"--sim-{name}", type=float, default=None, help=help_)
    sim.add_argument("--sim-seed", type=int, default=None, help="simulator seed (default 0)")
    p.add_argument("--data-dir", default=None, help="data directory (default: $FACTERLAB_DATA)")
    p.add_argument("--out-dir", default=None, help="results root (default: $FACTERLAB_RESULTS or ./results)")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.add_argument("--fairllm", action="store_true", help="also compute snsr_fairllm (many extra predictions)")
    p.add_argument("--json", action="store_true", help="print metrics.json instead of the table")
    p.set_defaults(func=cmd_run)


def config_from_args(args):
    """The RunConfig the command line asks for."""
    over = {"protocol": args.protocol, "seed": args.seed, "data__dataset": args.dataset, "data__seed": args.seed}
    if args.model:
        over["model__llm"] = args.model
    if args.encoder:
        over["model__encoder"] = args.encoder
    if args.ranker:
        over["model__ranker"] = args.ranker
    if args.n_rows is not None:
        over["data__n_rows"] = args.n_rows
    if args.passes is not None:
        over["facter__passes"] = args.passes
    for flag, key in (
        ("max_new_tokens", "model__max_new_tokens"),
        ("batch_size", "model__batch_size"),
        ("cfr_rows", "metrics__cfr_rows"),
        ("snsr_min_group", "metrics__snsr_min_group"),
    ):
        if getattr(args, flag, None) is not None:
            over[key] = getattr(args, flag)
    for name in ("beta", "sigma", "rho", "h", "phi", "demote", "seed"):
        if getattr(args, f"sim_{name}", None) is not None:
            over[f"sim__{name}"] = getattr(args, f"sim_{name}")
    return preset(args.preset, **over)


def headline_table(metrics: dict) -> str:
    """A small text table: one line per method with the headline metrics and violations."""

    def fmt(v):
        if isinstance(v, dict):
            return "n/a"
        if isinstance(v, list):
            return "[" + ", ".join(fmt(x) for x in v) + "]"
        return f"{v:.4f}" if isinstance(v, float) else str(v)

    cols = HEADLINE + ("snsr_joint", "viol_fixed", "viol_adaptive", "degenerate")
    lines = [
        f"run {metrics['run_id']}  dataset={metrics['dataset']}"
        f"{' (SYNTHETIC)' if metrics['is_synthetic'] else ''}  protocol={metrics['protocol']}  "
        f"n_calib={metrics['n_calib']} n_test={metrics['n_test']}  Q0={metrics['calibration']['q0']:.4f}",
        "method   " + "  ".join(f"{c:>15}" for c in cols),
    ]
    for m, v in metrics["methods"].items():
        snsr = v["snsr_proxy"]["joint"]
        vals = [v[c] for c in HEADLINE] + [
            snsr.get("snsr", snsr),
            v["violations"]["fixed_q0"],
            v["violations"]["adaptive"],
            v.get("n_degenerate", "n/a"),
        ]
        lines.append(f"{m:8} " + "  ".join(f"{fmt(x):>15}" for x in vals))
    cal_deg = (metrics.get("calibration") or {}).get("degenerate") or {}
    if cal_deg.get("all_degenerate"):
        lines.append(
            f"WARNING: degenerate calibration ({cal_deg.get('reason')}): Q0 measures nothing, "
            "violation counts are missing"
        )
    if "random_floor" in metrics:
        lines.append(f"random floor: ndcg@10_multi={metrics['random_floor']['ndcg@10_multi']:.4f}")
    return "\n".join(lines)


def cmd_run(args) -> int:
    from facterlab.config import results_dir
    from facterlab.facter.pipeline import run_experiment
    from facterlab.validation import validate_config

    cfg = config_from_args(args)
    validate_config(cfg, out_dir=results_dir(args.out_dir))  # every bound, before data or models are touched
    res = run_experiment(
        cfg, data_dir=args.data_dir, out_dir=args.out_dir, progress=not args.no_progress, fairllm=args.fairllm
    )
    if args.json:
        print(json.dumps(res.metrics, indent=2, sort_keys=True))
    else:
        print(headline_table(res.metrics))
        print(f"saved to {res.out_dir}")
    return 0
