"""How much each protocol switch (docs/PROTOCOL.md) moves the headline numbers.

``python benchmarks/bench_protocol_switches.py [--dataset ml-100k] [--recommender simulated fake]
[--n-rows N] [--encoder all-MiniLM-L6-v2|hash] [--protocol open|rank]``

For each recommender it runs the ``repro`` preset (REPRO's choice on every switch), then the same with
ONE switch set to facterlab's choice (one run per switch), then the ``facterlab`` preset (ours on every
switch), all on the same data, seed and models, and prints one Markdown table per recommender: a row
per run, the FACTER (last pass) and Neutral headline numbers, and each number's change against the
``repro`` row.  Needs the dataset in ``$FACTERLAB_DATA`` (ML-100K: ``u.data``, ``u.user``, ``u.item``).

Recommenders: ``simulated`` (docs/SIMULATED.md, known bias; the default settings) and ``fake`` (the
test suite's ``FakeRecommender``: history-following, Romance/Drama/... pushed to half of the women and
Action/War/... to half of the men, obeys repair rules).  Both are deterministic, so a difference
between two rows is the switch's effect, not sampling noise (one seed; the switches that change the
data, the prompts or the rules change every later draw keyed by them).
"""
from __future__ import annotations

import argparse
import tempfile
import time

from facterlab.config import PROTOCOL_SWITCHES, preset

COLUMNS = (  # (label, method, flat metric key, decimals)
    ("Neutral NDCG@10", "neutral", "ndcg@10_multi", 4),
    ("FACTER NDCG@10", "facter", "ndcg@10_multi", 4),
    ("FACTER NDCG@10 (single)", "facter", "ndcg@10_single", 4),
    ("FACTER Recall@10", "facter", "recall@10_multi", 4),
    ("FACTER Valid@10", "facter", "valid@10", 3),
    ("FACTER SNSR", "facter", "snsr_joint", 4),
    ("FACTER CFR", "facter", "cfr_multi", 4),
    ("FACTER V(t)", "facter", "violations_adaptive", 0),
    ("FACTER V(0)", "facter", "violations_fixed_q0", 0),
    ("No CF nb. (calib)", None, "no_neighbour_calib", 3),
)


def _recommender(kind: str, ds, protocol: str):
    if kind == "simulated":
        return None  # run_experiment builds it from the run's own interactions (model.llm = "simulated")
    from facterlab.models.fake import FakeRecommender

    return FakeRecommender(ds.items, protocol=protocol, mode="biased", obey_rules=True, bias_share=0.5)


def _values(metrics: dict) -> dict:
    from facterlab.reporting.tables import flatten_method_metrics, run_level_values

    out = {}
    for label, method, key, _ in COLUMNS:
        flat = run_level_values(metrics) if method is None else flatten_method_metrics(metrics["methods"][method])
        v = flat.get(key)
        out[label] = float(v) if isinstance(v, (int, float)) else None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="ml-100k")
    ap.add_argument("--recommender", nargs="+", default=["simulated", "fake"], choices=["simulated", "fake"])
    ap.add_argument("--n-rows", type=int, default=None, help="default: the dataset's protocol size (2,500)")
    ap.add_argument("--encoder", default="all-MiniLM-L6-v2", help='a registry name, or "hash" (fast, no torch)')
    ap.add_argument("--protocol", default="open", choices=["open", "rank"])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from facterlab.data import load_dataset
    from facterlab.facter.pipeline import run_experiment

    ds = load_dataset(args.dataset)
    if args.encoder == "hash":
        from facterlab.models.fake import HashEncoder

        encoder = HashEncoder()
    else:
        from facterlab.models import load_encoder

        encoder = load_encoder(args.encoder, device="cpu")
    out_dir = tempfile.mkdtemp(prefix="protocol-switches-")
    for kind in args.recommender:
        base = dict(data__dataset=args.dataset, data__n_rows=args.n_rows, protocol=args.protocol, seed=args.seed,
                    model__encoder=args.encoder if args.encoder != "hash" else "hash-encoder")
        if kind == "simulated":
            base["model__llm"] = "simulated"
        runs = [("repro preset (REPRO on every switch)", preset("repro", **base))]
        for key, (_, ours) in PROTOCOL_SWITCHES.items():
            runs.append((f"{key.split('__')[1]} = {ours}", preset("repro", **base, **{key: ours})))
        runs.append(("facterlab preset (ours on every switch)", preset("facterlab", **base)))
        rows, t0 = [], time.perf_counter()
        for label, cfg in runs:
            res = run_experiment(cfg, recommender=_recommender(kind, ds, args.protocol), encoder=encoder, dataset=ds,
                                 out_dir=out_dir, progress=False)
            rows.append((label, _values(res.metrics), res.metrics))
        secs = time.perf_counter() - t0
        m0 = rows[0][2]
        print(f"\n### {args.dataset}, {kind} recommender, {args.protocol} protocol, encoder {args.encoder}, "
              f"seed {args.seed}, {m0['n_calib']}/{m0['n_test']} calibration/test rows ({len(rows)} runs, {secs:.0f} s)\n")
        print("| Run | " + " | ".join(c[0] for c in COLUMNS) + " |")
        print("|---|" + "---|" * len(COLUMNS))
        ref = rows[0][1]
        for i, (label, vals, _) in enumerate(rows):
            cells = []
            for name, _, _, dec in COLUMNS:
                v, r = vals[name], ref[name]
                if v is None:
                    cells.append("n/a")
                elif i == 0 or r is None:
                    cells.append(f"{v:.{dec}f}")
                else:
                    d = v - r
                    cells.append(f"{v:.{dec}f} ({'+' if d >= 0 else '−'}{abs(d):.{dec}f})" if d else f"{v:.{dec}f} (=)")
            print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
