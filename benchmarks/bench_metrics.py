"""Benchmark the metrics package (docs/FACTER.md §4): run ``python benchmarks/bench_metrics.py [--quick]``.

Prints medians (wall and CPU time) of repeats that ALTERNATE the variants compared (A B A B ...,
so that a change of machine load hits both alike) and peak traced memory (tracemalloc) for:
1. ``ranking_metrics`` (vectorised) vs a per-row loop of ``ndcg_at_k``/``recall_at_k``;
2. ``CatalogueMapper`` (encoder mode) over a 100k-item catalogue: blocked products vs one full
   (queries x items) similarity matrix;
3. ``snsr_proxy`` on many rows;
4. ``counterfactual_disparity`` (Delta of FACTER's score) vs a plain per-row loop, bit-identical output.
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc
import zlib

import numpy as np
import pandas as pd

from facterlab.metrics import CatalogueMapper, ndcg_at_k, ranking_metrics, recall_at_k, snsr_proxy


class RandomEncoder:
    """Deterministic random unit vectors per text (cheap stand-in for a sentence encoder)."""

    fingerprint = "random"

    def __init__(self, dim=384):
        self.dim = dim

    def encode(self, texts):
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i] = np.random.default_rng(zlib.crc32(t.encode())).standard_normal(self.dim)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def measure_alternating(fns: dict, repeats: int) -> dict:
    """Run the variants in turn (A B A B ...) ``repeats`` times each, then each once under tracemalloc.

    Returns ``{name: (median wall s, median CPU s, peak traced bytes, last result)}``.
    """
    wall = {k: [] for k in fns}
    cpu = {k: [] for k in fns}
    result = {}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0, c0 = time.perf_counter(), time.process_time()
            result[name] = fn()
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    out = {}
    for name, fn in fns.items():
        tracemalloc.start()
        fn()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        out[name] = (statistics.median(wall[name]), statistics.median(cpu[name]), peak, result[name])
    return out


def measure(fn, repeats):
    """One variant alone: ``(median wall s, median CPU s, peak bytes, result)``."""
    return measure_alternating({"only": fn}, repeats)["only"]


def disparity_loop(p, index, r):
    """A plain per-row loop of Delta_i = max_j ||p_i - r_j|| (float64), the reference."""
    p64, r64 = np.asarray(p, dtype=np.float64), np.asarray(r, dtype=np.float64)
    out = np.zeros(len(p64))
    for i in range(len(p64)):
        nb = index.neighbours(i)
        if len(nb):
            out[i] = np.linalg.norm(p64[i] - r64[nb], axis=1).max()
    return out


def disparity_case(rng, n_query, n_ref, mean_nb, dim=384):
    """Random float32 unit prediction vectors and a neighbour index with ~``mean_nb`` per row."""
    from facterlab.facter.neighbours import NeighbourIndex

    p = rng.standard_normal((n_query, dim)).astype(np.float32)
    r = rng.standard_normal((n_ref, dim)).astype(np.float32)
    p /= np.linalg.norm(p, axis=1, keepdims=True)
    r /= np.linalg.norm(r, axis=1, keepdims=True)
    counts = rng.poisson(mean_nb, n_query)
    counts[rng.random(n_query) < 0.3] = 0  # many rows have no neighbour at all
    idx = np.concatenate([np.sort(rng.choice(n_ref, size=min(c, n_ref), replace=False)) for c in counts])
    indptr = np.concatenate([[0], np.cumsum(np.minimum(counts, n_ref))]).astype(np.int64)
    return p, r, NeighbourIndex(indptr, idx.astype(np.int64), np.ones(len(idx), np.float32), n_ref)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller sizes")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    n_rows = 5_000 if args.quick else 20_000
    n_items = 20_000 if args.quick else 100_000
    n_queries = 1_000 if args.quick else 5_000
    reps = 3
    table = []

    ranked = [rng.integers(0, 3000, size=10).tolist() for _ in range(n_rows)]
    relevant = [rng.choice(3000, size=10, replace=False).tolist() for _ in range(n_rows)]
    res = measure_alternating(
        {
            "vec": lambda: ranking_metrics(ranked, relevant, 10),
            "loop": lambda: (
                [ndcg_at_k(x, y, 10) for x, y in zip(ranked, relevant)],
                [recall_at_k(x, y, 10) for x, y in zip(ranked, relevant)],
            ),
        },
        reps,
    )
    tv, cv, mv, a = res["vec"]
    tl, cl, ml, b = res["loop"]
    assert np.allclose(a["ndcg"], b[0]) and np.allclose(a["recall"], b[1])
    table += [("ranking_metrics vectorised", n_rows, tv, cv, mv), ("ranking per-row loop", n_rows, tl, cl, ml)]

    enc = RandomEncoder()
    items = pd.DataFrame({"item_id": np.arange(n_items), "title": [f"item {i}" for i in range(n_items)]})
    mapper = CatalogueMapper(items, enc, threshold=0.65)
    t0 = time.perf_counter()
    mapper.map(["warm-up"])  # embeds the catalogue once
    t_cat = time.perf_counter() - t0
    queries = [f"item {i}" if i % 2 else f"query {i}" for i in range(n_queries)]
    q_emb = enc.encode(queries)

    def blocked():
        return mapper._map_encoder(queries)

    def full():
        sims = q_emb @ mapper._title_emb.T
        return sims.argmax(axis=1)

    res = measure_alternating({"blocked": blocked, "full": full}, reps)
    tb, cb, mb, (pos, _) = res["blocked"]
    tf, cf, mf, ref = res["full"]
    assert np.array_equal(pos[pos >= 0], ref[pos >= 0])
    table += [
        (f"map blocked ({n_items} items)", n_queries, tb, cb, mb),
        (f"map one full matrix ({n_items} items)", n_queries, tf, cf, mf),
    ]

    emb = rng.standard_normal((n_rows, 384)).astype(np.float32)
    groups = pd.DataFrame(
        {
            "gender": rng.choice(["M", "F"], n_rows),
            "age": rng.choice(list("abcdefg"), n_rows),
            "occupation": rng.choice([f"o{i}" for i in range(21)], n_rows),
        }
    )
    ts, cs, ms, _ = measure(lambda: snsr_proxy(emb, groups), reps)
    table.append(("snsr_proxy (joint + 3 attrs)", n_rows, ts, cs, ms))

    from facterlab.facter.scores import counterfactual_disparity

    ratios = []
    cases = [(1_750, 1_750, 60)] if args.quick else [(1_750, 1_750, 60), (10_000, 10_000, 30)]
    for n_q, n_r, nb in cases:
        p, r, idx = disparity_case(rng, n_q, n_r, nb)
        res = measure_alternating(
            {
                "vec": lambda p=p, idx=idx, r=r: counterfactual_disparity(p, idx, r),
                "loop": lambda p=p, idx=idx, r=r: disparity_loop(p, idx, r),
            },
            max(reps, 5),
        )
        tdv, cdv, mdv, dv = res["vec"]
        tdl, cdl, mdl, dl = res["loop"]
        assert np.array_equal(dv, dl), "counterfactual_disparity must equal the per-row loop bit for bit"
        pairs = len(idx.indices)
        table += [
            (f"counterfactual_disparity ({pairs} pairs)", n_q, tdv, cdv, mdv),
            (f"disparity per-row loop ({pairs} pairs)", n_q, tdl, cdl, mdl),
        ]
        ratios.append(f"{tdl / tdv:.2f}x wall, {cdl / cdv:.2f}x CPU at {n_q} rows")

    print(f"catalogue embedding (once, {n_items} items, fake encoder): {t_cat:.2f} s")
    print(f"{'operation':<46}{'rows':>8}{'median s':>11}{'CPU s':>9}{'peak MiB':>10}")
    for name, n, t, c, m in table:
        print(f"{name:<46}{n:>8}{t:>11.4f}{c:>9.4f}{m / 2**20:>10.1f}")
    print(
        f"ratio loop / vectorised ranking: {tl / tv:.1f}x;  full / blocked mapping time: {tf / tb:.2f}x, "
        f"peak memory blocked / full: {mb / mf:.2f}"
    )
    print("loop / counterfactual_disparity (bit-identical): " + "; ".join(ratios))


if __name__ == "__main__":
    main()
