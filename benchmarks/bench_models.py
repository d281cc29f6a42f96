"""Benchmark the model backends (docs/FACTER.md §5) with the bundled SmolLM2-135M.

1. Generation throughput: prompts/second for 10-title history prompts, one at a time vs batched 8
   and 16 (same-bucket prompts, our batch-independent decode loop).
2. Likelihood ranking of 40 candidates: shared prompt KV cache vs scoring each candidate sequence in
   full (one forward pass over prompt + candidate per candidate).

Prints medians of side-by-side repeats, ratios and peak RSS.  Run:
``python benchmarks/bench_models.py [--device cpu|cuda] [--repeats 3] [--new-tokens 24] [--threads N]``.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

TITLES = [
    "Toy Story (1995)",
    "Heat (1995)",
    "Fargo (1996)",
    "Casablanca (1942)",
    "Alien (1979)",
    "Vertigo (1958)",
    "Se7en (1995)",
    "Babe (1995)",
    "Clerks (1994)",
    "Ed Wood (1994)",
    "Jumanji (1995)",
    "GoldenEye (1995)",
    "Psycho (1960)",
    "Rocky (1976)",
    "Brazil (1985)",
    "Amadeus (1984)",
    "Fargo (1996)",
    "Taxi Driver (1976)",
    "Chinatown (1974)",
    "Jaws (1975)",
]
MORE = [f"Movie number {i} ({1950 + i})" for i in range(60)]


def _messages(history, candidates=None):
    user = "User demographics: gender M, age 25-34, occupation writer.\nWatch history (most recent last):\n"
    user += "\n".join(f"{i + 1}. {t}" for i, t in enumerate(history))
    if candidates:
        user += "\nCandidates:\n" + "\n".join(f"{i + 1}. {t}" for i, t in enumerate(candidates))
        user += "\nRank the candidates; return ONLY a JSON array of the top 10 titles."
    else:
        user += "\nRecommend the next 10 movies, best first, as ONLY a JSON array of 10 titles."
    return [
        {"role": "system", "content": "You are a helpful movie recommendation assistant."},
        {"role": "user", "content": user},
    ]


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--new-tokens", type=int, default=24)
    ap.add_argument("--n-prompts", type=int, default=16)
    ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch default)")
    args = ap.parse_args()

    import torch

    from facterlab.models.llm import DecodingParams, load_lm

    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    lm = load_lm("smollm2-135m", device=args.device)
    print(
        f"loaded SmolLM2-135M on {lm.device} ({lm.dtype_name}) in {time.perf_counter() - t0:.1f}s, "
        f"threads={torch.get_num_threads()}"
    )

    # same-bucket prompts: 10-title histories (fixed length template, so one bucket)
    rng = random.Random(0)
    prompts = []
    while len(prompts) < args.n_prompts:
        p = lm.encode_messages(_messages(rng.sample(TITLES, 10)))
        prompts.append(p)
    plan = lm.plan([len(p) for p in prompts], args.n_prompts)
    params = DecodingParams(temperature=0.7, top_p=0.95, max_new_tokens=args.new_tokens, repetition_penalty=1.2)
    seeds = list(range(len(prompts)))
    print(
        f"{len(prompts)} prompts, lengths {min(map(len, prompts))}-{max(map(len, prompts))} tokens, "
        f"{len(plan)} bucket group(s); {args.new_tokens} new tokens each"
    )

    def run(bs):
        t = time.perf_counter()
        out = lm.generate(prompts, seeds, params, batch_size=bs)
        return time.perf_counter() - t, out

    times = {1: [], 8: [], 16: []}
    outs = {}
    for _ in range(args.repeats):
        for bs in times:  # side by side within each repeat
            dt, outs[bs] = run(bs)
            times[bs].append(dt)
    same = all(outs[bs] == outs[1] for bs in times)
    med = {bs: statistics.median(v) for bs, v in times.items()}
    print(f"\nGeneration (prompts/second, median of {args.repeats})")
    print(f"{'batch':>6} {'seconds':>9} {'prompts/s':>10} {'speed-up':>9}")
    for bs in times:
        print(f"{bs:>6} {med[bs]:>9.2f} {len(prompts) / med[bs]:>10.2f} {med[1] / med[bs]:>8.2f}x")
    print(f"outputs identical across batch sizes: {same}")

    # likelihood ranking of 40 candidates
    cands = (TITLES + MORE)[:40]
    prompt = lm.encode_messages(_messages(TITLES[:10], cands))
    cand_ids = [lm.candidate_ids(c) for c in cands]
    shared_t, full_t = [], []
    for _ in range(args.repeats):
        t = time.perf_counter()
        shared = lm.score_candidates(prompt, cand_ids)
        shared_t.append(time.perf_counter() - t)
        t = time.perf_counter()
        full = [lm.score_full(prompt, c) for c in cand_ids]
        full_t.append(time.perf_counter() - t)
    err = max(abs(a[0] - b) for a, b in zip(shared, full))
    ms, mf = statistics.median(shared_t), statistics.median(full_t)
    print(f"\nLikelihood ranking, 40 candidates, prompt {len(prompt)} tokens (median of {args.repeats})")
    print(f"{'method':>14} {'seconds':>9}")
    print(f"{'shared cache':>14} {ms:>9.3f}")
    print(f"{'full sequences':>14} {mf:>9.3f}")
    print(f"speed-up {mf / ms:.2f}x; max |score difference| {err:.2e}")
    if torch.cuda.is_available() and lm.device.startswith("cuda"):
        print(f"peak CUDA memory: {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB")
    print(f"peak RSS: {_peak_mb():.0f} MiB")


if __name__ == "__main__":
    main()
