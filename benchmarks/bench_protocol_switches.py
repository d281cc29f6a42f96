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
    if kind in ("simulated", "smollm2"):
        return None  # run_experiment builds it (simulated: from the run's own interactions; smollm2: cached LLM)
    from facterlab.models.fake import FakeRecommender

    return FakeRecommender(ds.items, protocol=protocol, mode="biased", obey_rules=True, bias_share=0.5)


def data_facts(ds, cfg) -> list:
    """Lines on what the tie order and the duplicate-title fix touch in this dataset."""
    import numpy as np

    from facterlab.data.protocol import build_interactions, eligible_positions, positives

    r = ds.ratings[ds.ratings["rating"] >= cfg.min_rating]
    tied = r.duplicated(["user_id", "timestamp"], keep=False).mean()
    a, b = positives(ds, cfg.min_rating, "item_id"), positives(ds, cfg.min_rating, "file_order")
    elig = eligible_positions(a, cfg.history_len)
    h, w = cfg.history_len, cfg.future_window
    differ = sum(
        1
        for p in elig
        if not (
            np.array_equal(a.items[p - h : p], b.items[p - h : p])
            and a.items[p] == b.items[p]
            and np.array_equal(a.items[p : min(p + w, a.end[p])], b.items[p : min(p + w, b.end[p])])
        )
    )
    rows = build_interactions(ds, cfg).rows
    titles = ds.items.set_index("item_id")["title"].astype(str).to_dict()
    dup_lists = unreachable = 0
    for cands, rel in zip(rows["candidates"], rows["relevant"]):
        first: dict = {}
        for c in cands:
            first.setdefault(titles[c], c)
        dup_lists += len(first) < len(cands)
        unreachable += any(x in set(cands) and x not in set(first.values()) for x in rel)
    return [
        f"positive ratings tied in time with another of the same user: {tied:.1%}",
        f"eligible rows whose history, target or relevance set depends on the tie order: {differ:,} of "
        f"{len(elig):,} ({differ / len(elig):.1%})",
        f"catalogue titles that repeat an earlier one: {int(ds.items['title'].duplicated().sum())}",
        f"candidate lists ({cfg.tie_order} rows) holding a duplicated title: {dup_lists} of {len(rows)}; rows with "
        f"a relevant candidate that the old exact-title mapping could never hit: {unreachable}",
    ]


def _values(metrics) -> dict:
    from facterlab.facter.record import as_metrics

    m = as_metrics(metrics)
    out = {}
    for label, method, key, _ in COLUMNS:
        flat = m.run_level() if method is None else m.methods[method].flat()
        v = flat.get(key)
        out[label] = float(v) if isinstance(v, (int, float)) else None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="ml-100k")
    ap.add_argument(
        "--recommender",
        nargs="+",
        default=["simulated", "fake"],
        choices=["simulated", "fake", "smollm2"],
        help="smollm2: the bundled SmolLM2-135M on CPU (slow: use small --n-rows)",
    )
    ap.add_argument("--max-new-tokens", type=int, default=None, help="LLM tokens per answer (smollm2; default 250)")
    ap.add_argument("--cfr-rows", type=int, default=None, help="test rows sampled for CFR (default 200)")
    ap.add_argument("--n-rows", type=int, default=None, help="default: the dataset's protocol size (2,500)")
    ap.add_argument("--encoder", default="all-MiniLM-L6-v2", help='a registry name, or "hash" (fast, no torch)')
    ap.add_argument("--protocol", default="open", choices=["open", "rank"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--facts-only", action="store_true", help="print the data facts and stop")
    args = ap.parse_args()

    from facterlab.data import load_dataset
    from facterlab.facter.pipeline import run_experiment

    ds = load_dataset(args.dataset)
    out_dir = tempfile.mkdtemp(prefix="protocol-switches-")
    data_cfg = preset("repro", data__dataset=args.dataset, data__n_rows=args.n_rows).data
    print(f"### {args.dataset}: what the data-level switches touch\n")
    for line in data_facts(ds, data_cfg):
        print(f"- {line}")
    if args.facts_only:
        return
    if args.encoder == "hash":
        from facterlab.models.fake import HashEncoder

        encoder = HashEncoder()
    else:
        from facterlab.models import load_encoder

        encoder = load_encoder(args.encoder, device="cpu")
    for kind in args.recommender:
        base = dict(
            data__dataset=args.dataset,
            data__n_rows=args.n_rows,
            protocol=args.protocol,
            seed=args.seed,
            model__encoder=args.encoder if args.encoder != "hash" else "hash-encoder",
        )
        if kind == "simulated":
            base["model__llm"] = "simulated"
        if kind == "smollm2":
            base.update({"model__llm": "smollm2-135m", "model__device": "cpu"})
            if args.max_new_tokens:
                base["model__max_new_tokens"] = args.max_new_tokens
        if args.cfr_rows:
            base["metrics__cfr_rows"] = args.cfr_rows
        runs = [("repro preset (REPRO on every switch)", preset("repro", **base))]
        for key, (_, ours) in PROTOCOL_SWITCHES.items():
            runs.append((f"{key.split('__')[1]} = {ours}", preset("repro", **base, **{key: ours})))
        runs.append(("facterlab preset (ours on every switch)", preset("facterlab", **base)))
        rows, t0 = [], time.perf_counter()
        for label, cfg in runs:
            res = run_experiment(
                cfg,
                recommender=_recommender(kind, ds, args.protocol),
                encoder=encoder,
                dataset=ds,
                out_dir=out_dir,
                progress=False,
            )
            rows.append((label, _values(res.record), res.metrics))
        secs = time.perf_counter() - t0
        m0 = rows[0][2]
        print(
            f"\n### {args.dataset}, {kind} recommender, {args.protocol} protocol, encoder {args.encoder}, "
            f"seed {args.seed}, {m0['n_calib']}/{m0['n_test']} calibration/test rows ({len(rows)} runs, {secs:.0f} s)\n"
        )
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
