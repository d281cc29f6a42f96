"""Benchmark the metrics package (FACTER.md §4): run ``python benchmarks/bench_metrics.py [--quick]``.

Prints medians of side-by-side repeats and peak traced memory (tracemalloc) for:
1. ``ranking_metrics`` (vectorised) vs a per-row loop of ``ndcg_at_k``/``recall_at_k``;
2. ``CatalogueMapper`` (encoder mode) over a 100k-item catalogue: blocked products vs one full
   (queries x items) similarity matrix;
3. ``snsr_proxy`` on many rows.
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


def measure(fn, repeats):
    """Median wall time over ``repeats`` untraced runs, then one run under tracemalloc for the peak."""
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return statistics.median(times), peak, result


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
    tv, mv, a = measure(lambda: ranking_metrics(ranked, relevant, 10), reps)
    tl, ml, b = measure(lambda: ([ndcg_at_k(x, y, 10) for x, y in zip(ranked, relevant)],
                                 [recall_at_k(x, y, 10) for x, y in zip(ranked, relevant)]), reps)
    assert np.allclose(a["ndcg"], b[0]) and np.allclose(a["recall"], b[1])
    table += [("ranking_metrics vectorised", n_rows, tv, mv), ("ranking per-row loop", n_rows, tl, ml)]

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

    tb, mb, (pos, _) = measure(blocked, reps)
    tf, mf, ref = measure(full, reps)
    assert np.array_equal(pos[pos >= 0], ref[pos >= 0])
    table += [(f"map blocked ({n_items} items)", n_queries, tb, mb), (f"map one full matrix ({n_items} items)",
                                                                       n_queries, tf, mf)]

    emb = rng.standard_normal((n_rows, 384)).astype(np.float32)
    groups = pd.DataFrame({"gender": rng.choice(["M", "F"], n_rows), "age": rng.choice(list("abcdefg"), n_rows),
                           "occupation": rng.choice([f"o{i}" for i in range(21)], n_rows)})
    ts, ms, _ = measure(lambda: snsr_proxy(emb, groups), reps)
    table.append(("snsr_proxy (joint + 3 attrs)", n_rows, ts, ms))

    print(f"catalogue embedding (once, {n_items} items, fake encoder): {t_cat:.2f} s")
    print(f"{'operation':<42}{'rows':>8}{'median s':>11}{'peak MiB':>10}")
    for name, n, t, m in table:
        print(f"{name:<42}{n:>8}{t:>11.4f}{m / 2**20:>10.1f}")
    print(f"ratio loop / vectorised ranking: {tl / tv:.1f}x;  full / blocked mapping time: {tf / tb:.2f}x, "
          f"peak memory blocked / full: {mb / mf:.2f}")


if __name__ == "__main__":
    main()
