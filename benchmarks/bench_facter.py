"""Benchmarks of the FACTER core (run: ``python benchmarks/bench_facter.py [--quick] [--skip-llm]``).

1. Calibration at scale: counterfactual neighbours + scores for N = 100,000 calibration rows of
   384-d embeddings (clustered so that rows do have neighbours), blocked; seconds and peak memory,
   beside the memory a full N x N float32 similarity matrix would need.  A brute-force check on a
   subset confirms the blocked result.
2. Online phase on SmolLM2-135M (bundled): 100 test rows of ML-100K, Q0 calibrated with SmolLM2 itself,
   exact optimistic batching (batch 8, one or more lookaheads) vs batch size 1, greedy decoding, no LLM
   cache, run side by side; the records must be identical.
3. A small real run on MovieLens-100K (re-ranking, likelihood ranker, bundled models) with its metrics.

Numbers are printed as small tables; nothing is asserted about time.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
import tracemalloc

import numpy as np

from facterlab.config import data_dir as config_data_dir

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def clustered(n: int, dim: int, cluster: int, rng) -> np.ndarray:
    centres = rng.normal(size=(n // cluster + 1, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    x = np.repeat(centres, cluster, axis=0)[:n] + rng.normal(scale=0.012, size=(n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def bench_calibration(n: int = 100_000, dim: int = 384, cluster: int = 20, block_mb: float = 64.0) -> dict:
    from facterlab.facter.neighbours import counterfactual_neighbours
    from facterlab.facter.scores import nonconformity_scores

    rng = np.random.default_rng(0)
    ctx = clustered(n, dim, cluster, rng)
    groups = rng.integers(0, 200, size=n).tolist()
    pred = rng.normal(size=(n, dim)).astype(np.float32)
    pred /= np.linalg.norm(pred, axis=1, keepdims=True)
    target = rng.normal(size=(n, dim)).astype(np.float32)
    target /= np.linalg.norm(target, axis=1, keepdims=True)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter()
    idx = counterfactual_neighbours(ctx, groups, tau_rho=0.9, max_block_bytes=block_mb * 1e6)
    t_nb = time.perf_counter() - t0
    t0 = time.perf_counter()
    sc = nonconformity_scores(pred, target, idx, pred, lam=0.7)
    t_sc = time.perf_counter() - t0
    peak = (tracemalloc.get_traced_memory()[1] - base) / 1e6
    tracemalloc.stop()
    # brute-force check on the first 300 rows
    sub = slice(0, 300)
    w = ctx[sub] @ ctx.T
    g = np.asarray(groups)
    ok = True
    for i in range(300):
        m = (w[i] > 0.9) & (g != g[i])
        m[i] = False
        ok &= np.array_equal(np.flatnonzero(m), idx.neighbours(i))
    return {
        "n": n,
        "dim": dim,
        "neighbours_s": t_nb,
        "scores_s": t_sc,
        "peak_traced_mb": peak,
        "full_matrix_mb": n * n * 4 / 1e6,
        "mean_neighbours": float(idx.counts.mean()),
        "pairs": int(len(idx.indices)),
        "brute_force_equal_300": bool(ok),
        "mean_S": float(sc["S"].mean()),
        "max_rss_mb": _rss_mb(),
    }


def _llm_setup(n_test: int, max_new_tokens: int, n_calib: int = 100, protocol: str = "open"):
    """Rows, scorer and recommenders for the online benchmark.  Q0 is calibrated with SmolLM2 itself on
    the first ``n_calib`` calibration rows (LLM cache on, so a rerun skips it): with a Q0 from another
    recommender almost every SmolLM2 row would violate, which is not the regime FACTER runs in."""
    from dataclasses import replace

    from facterlab.config import preset
    from facterlab.data import load_dataset
    from facterlab.data.protocol import build_interactions
    from facterlab.facter import prompts
    from facterlab.facter.monitor import OnlineScorer
    from facterlab.facter.pipeline import _groups, calibrate, context_embeddings, make_postprocess
    from facterlab.facter.scores import ItemRepresenter
    from facterlab.metrics import CatalogueMapper
    from facterlab.models import load_encoder, make_recommender

    data_dir = config_data_dir()
    ds = load_dataset("ml-100k", data_dir)
    n_rows = max(int(round(n_test / 0.3)) + 1, int(round(n_calib / 0.7)) + 1)
    cfg = preset(
        "repro",
        data__dataset="ml-100k",
        data__n_rows=n_rows,
        protocol=protocol,
        model__temperature=0.0,
        model__max_new_tokens=max_new_tokens,
        model__batch_size=8,
    )
    inter = build_interactions(ds, cfg.data)
    enc = load_encoder(cfg.model.encoder)
    items = inter.items
    mapper = CatalogueMapper(items.reset_index(), enc)
    rep = ItemRepresenter(enc, items)
    post = make_postprocess(protocol, mapper, items, 10)
    t0 = time.perf_counter()
    cal_rec = make_recommender(cfg.model, protocol, cache=True)
    state, _ = calibrate(
        inter.calib.reset_index(drop=True).iloc[:n_calib], items, cal_rec, enc, rep, post, cfg, ds.domain, prompts
    )
    t_cal = time.perf_counter() - t0
    test = inter.test.reset_index(drop=True).iloc[:n_test]
    scorer = OnlineScorer(
        state,
        context_embeddings(test, items, enc, prompts),
        _groups(test),
        rep.items(test["target"].tolist()),
        cfg.facter.lam,
        cfg.facter.tau_rho,
    )
    kw = dict(
        rows=test,
        items=items,
        scorer=scorer,
        postprocess=post,
        represent=rep.predictions,
        cfg=cfg.facter,
        n_calib=state.n,
        protocol=protocol,
        k=10,
        domain=ds.domain,
        seed=0,
        prompts=prompts,
    )
    recs = {bs: make_recommender(replace(cfg.model, batch_size=bs), protocol, cache=False) for bs in (1, 8)}
    return kw, recs, {"q0": state.q0, "n_calib": state.n, "calibration_s": t_cal}


def bench_online(
    n_test: int = 100, max_new_tokens: int = 112, lookaheads=(16,), n_calib: int = 100, passes: int = 1
) -> dict:
    """Batch size 1 (the model called with one row: no padding rows, the fastest single-row path)
    against exact optimistic batching (batch 8, padded full batches) for each lookahead; greedy, no
    cache.  The records must be identical."""
    import pandas as pd

    from facterlab.facter.monitor import FacterMonitor

    kw, recs, cal = _llm_setup(n_test, max_new_tokens, n_calib)
    runs = {}
    order = [("batch 1", 1, 1)] + [(f"batch 8, lookahead {la}", 8, la) for la in lookaheads]
    # side by side: the first optimistic run, then batch 1, then the other lookaheads
    order = order[1:2] + order[:1] + order[2:]
    for name, bs, la in order:
        mon = FacterMonitor.from_keywords(system_kind="facter", recommender=recs[bs], batch_size=bs, lookahead=la, **kw)
        t0 = time.perf_counter()
        res = mon.run(passes)
        runs[name] = {"seconds": time.perf_counter() - t0, "result": res}
        print(f"  {name}: {runs[name]['seconds']:.1f} s, {res.n_calls} calls, {res.n_predicted} requests", flush=True)
    base = runs["batch 1"]
    out = {"rows": n_test, "passes": passes, "max_new_tokens": max_new_tokens, **cal, "runs": []}
    for name, r in runs.items():
        res = r["result"]
        same = True
        if r is not base:
            try:
                pd.testing.assert_frame_equal(base["result"].records, res.records)
            except AssertionError as exc:
                same = False
                print(f"{name}: records differ from batch 1:", str(exc)[:500])
        out["runs"].append(
            {
                "name": name,
                "seconds": r["seconds"],
                "speedup": base["seconds"] / r["seconds"],
                "identical": same,
                "calls": res.n_calls,
                "requests": res.n_predicted,
                "repredicted": res.n_repredicted,
            }
        )
    rec = base["result"].records
    out["violations"] = int(rec["viol_adaptive"].sum())
    out["prompt_changes"] = int((rec["rules"].map(tuple) != rec["rules"].map(tuple).shift()).sum())
    out["distinct_rule_sets"] = int(rec["rules"].map(tuple).nunique())
    out["max_rss_mb"] = _rss_mb()
    return out


def bench_real_run(n_rows: int = 100, passes: int = 3, cfr_rows: int = 20) -> dict:
    from facterlab.config import preset
    from facterlab.facter.pipeline import run_experiment

    cfg = preset(
        "repro",
        data__dataset="ml-100k",
        data__n_rows=n_rows,
        protocol="rank",
        model__ranker="likelihood",
        facter__passes=passes,
        metrics__cfr_rows=cfr_rows,
        metrics__snsr_min_group=10,
    )
    t0 = time.perf_counter()
    res = run_experiment(
        cfg,
        data_dir=config_data_dir(),
        out_dir=tempfile.mkdtemp(prefix="bench_facter_"),
        progress=False,
    )
    return {"seconds": time.perf_counter() - t0, "metrics": res.metrics, "record": res.record, "timings": res.timings}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="N = 20,000 calibration rows, 20 online rows")
    ap.add_argument("--skip-llm", action="store_true", help="only the calibration benchmark")
    ap.add_argument("--online-rows", type=int, default=None)
    ap.add_argument(
        "--tokens", type=int, default=112, help="max_new_tokens of the online benchmark (112: the default profile's)"
    )
    ap.add_argument("--lookahead", default="8,16,32", help="comma-separated lookaheads of the optimistic runs")
    ap.add_argument("--calib-rows", type=int, default=100, help="calibration rows predicted by SmolLM2 for Q0")
    ap.add_argument("--passes", type=int, default=1, help="passes of the online benchmark")
    ap.add_argument("--real-rows", type=int, default=100, help="rows of the ml-100k run (70%% calibration)")
    ap.add_argument("--real-cfr-rows", type=int, default=20, help="CFR rows of the ml-100k run")
    ap.add_argument("--skip-online", action="store_true", help="skip the online batching benchmark")
    ap.add_argument("--skip-real", action="store_true", help="skip the ml-100k run")
    ap.add_argument("--skip-calibration", action="store_true", help="skip the calibration benchmark")
    args = ap.parse_args(argv)
    n = 20_000 if args.quick else 100_000
    if not args.skip_calibration:
        c = bench_calibration(n)
        print("\n== calibration (blocked neighbours + scores) ==")
        print(
            f"{'N':>8} {'dim':>4} {'neigh s':>8} {'score s':>8} {'peak MB':>8} {'NxN MB':>9} {'ratio':>6} "
            f"{'nb/row':>7} {'brute=':>6}"
        )
        print(
            f"{c['n']:>8} {c['dim']:>4} {c['neighbours_s']:>8.1f} {c['scores_s']:>8.2f} {c['peak_traced_mb']:>8.0f} "
            f"{c['full_matrix_mb']:>9.0f} {c['full_matrix_mb'] / max(c['peak_traced_mb'], 1e-9):>6.0f} "
            f"{c['mean_neighbours']:>7.1f} {str(c['brute_force_equal_300']):>6}"
        )
        print(f"max RSS {c['max_rss_mb']:.0f} MB (includes the {c['n']}x{c['dim']} inputs)")
    if args.skip_llm:
        return 0
    try:
        from facterlab.models import make_recommender  # noqa: F401
    except ImportError:
        print("\nfacterlab.models.make_recommender is not available: LLM benchmarks skipped")
        return 0
    if not args.skip_online:
        _print_online(args)
    if args.skip_real:
        return 0
    r = bench_real_run(args.real_rows, cfr_rows=args.real_cfr_rows)
    m = r["metrics"]
    print(
        f"\n== small real run: ml-100k, rank, likelihood ranker, {m['n_calib']}+{m['n_test']} rows, "
        f"{r['seconds']:.0f} s =="
    )
    from facterlab.facter.commands import headline_table

    print(headline_table(r["record"]))
    print("timings:", {k: round(v, 1) for k, v in r["timings"].items()})
    return 0


def _print_online(args) -> None:
    o = bench_online(
        args.online_rows or (20 if args.quick else 100),
        args.tokens,
        tuple(int(x) for x in args.lookahead.split(",")),
        args.calib_rows,
        args.passes,
    )
    print(
        f"\n== online phase on SmolLM2-135M (greedy, no cache, {o['passes']} pass(es), {o['rows']} rows, "
        f"{o['max_new_tokens']} new tokens) =="
    )
    print(
        f"Q0 = {o['q0']:.4f} from {o['n_calib']} calibration rows with SmolLM2 ({o['calibration_s']:.0f} s); "
        f"violations (adaptive) {o['violations']}; distinct rule sets in prompts {o['distinct_rule_sets']}"
    )
    print(f"{'run':<24} {'seconds':>8} {'speedup':>8} {'identical':>9} {'calls':>6} {'requests':>8} {'re-pred':>7}")
    for r in o["runs"]:
        print(
            f"{r['name']:<24} {r['seconds']:>8.1f} {r['speedup']:>8.2f} {str(r['identical']):>9} {r['calls']:>6} "
            f"{r['requests']:>8} {r['repredicted']:>7}"
        )
    print(f"max RSS {o['max_rss_mb']:.0f} MB")


if __name__ == "__main__":
    sys.exit(main())
