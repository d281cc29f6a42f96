"""Served vs in-process SmolLM2 on CPU: throughput of the same greedy requests.

    .venv/bin/python benchmarks/bench_served.py [--prompts 8] [--tokens 40] [--rounds 2] [--threads 2]

Needs ``transformers[serving]`` (fastapi, uvicorn, openai).  The bundled SmolLM2 is converted once to
safetensors (tests/transformers_serve.py) and served by ``transformers serve`` on localhost with
``OMP_WAIT_POLICY=PASSIVE`` and ``--threads`` OpenMP threads, the same as the in-process model gets.
Measured, alternating (in-process, served one at a time, served 4 at a time; then the reverse order):
wall time, prompts/s and generated tokens/s (counted with the model's tokenizer), CPU seconds of this
process and of the server process, and whether the answers are identical.  The prompts are
open-generation prompts with distinct watch histories; no cache is used.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MOVIES = [
    "Heat (1995)", "Fargo (1996)", "Toy Story (1995)", "Casino (1995)", "Babe (1995)", "Jumanji (1995)",
    "Sabrina (1995)", "GoldenEye (1995)", "Balto (1995)", "Nixon (1995)", "Se7en (1995)", "Clueless (1995)",
]  # fmt: skip


def _requests(n: int) -> list:
    from facterlab.datatypes import PromptRequest

    out = []
    for i in range(n):
        hist = [MOVIES[(i + j) % len(MOVIES)] for j in range(5)]
        user = "Watch history:\n" + "\n".join(f"{j + 1}. {t}" for j, t in enumerate(hist))
        user += "\nRecommend 10 movies as a JSON list of titles."
        msgs = [{"role": "system", "content": "You are a movie recommender."}, {"role": "user", "content": user}]
        out.append(PromptRequest.from_messages(msgs, seed=i, k=10))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    os.environ.update(OMP_NUM_THREADS=str(args.threads), OMP_WAIT_POLICY="PASSIVE", HF_HUB_OFFLINE="1")
    os.environ.setdefault("FACTERLAB_LOG", "WARNING")
    import psutil

    from facterlab.config import ModelConfig
    from facterlab.models.rankers import make_recommender
    from facterlab.models.served import ServedRecommender
    from tests.transformers_serve import converted_smollm2, serve

    folder = converted_smollm2()
    reqs = _requests(args.prompts)
    common = dict(temperature=0.0, max_new_tokens=args.tokens, repetition_penalty=1.0, batch_size=args.prompts)
    local = make_recommender(ModelConfig(llm="smollm2-135m", device="cpu", **common), "open", cache=False)
    tok = local.lm.tokenizer
    local.predict(reqs[:1])  # warm-up
    log = Path(tempfile.mkdtemp(prefix="bench_served-")) / "serve.log"
    t_start = time.perf_counter()
    with serve(folder, log, threads=args.threads) as url:
        start_s = time.perf_counter() - t_start
        server = next(p for p in psutil.Process().children(recursive=True) if "serve" in " ".join(p.cmdline()))
        cfg = ModelConfig(llm=f"openai:{folder}", server_url=url, **common)
        served = {c: ServedRecommender(cfg, "open", concurrency=c) for c in (1, 4)}
        served[1].predict(reqs[:1])  # warm-up (the server loads the model on first use)
        kinds = ["in-process", "served x1", "served x4"]
        rows: dict = {k: [] for k in kinds}
        answers: dict = {}
        load0 = os.getloadavg()[0]
        for r in range(args.rounds):
            for kind in kinds if r % 2 == 0 else kinds[::-1]:
                rec = local if kind == "in-process" else served[int(kind[-1])]
                me0, sv0 = time.process_time(), sum(server.cpu_times()[:2])
                t0 = time.perf_counter()
                preds = rec.predict(reqs)
                wall = time.perf_counter() - t0
                cpu = time.process_time() - me0 + sum(server.cpu_times()[:2]) - sv0
                n_tok = sum(len(tok(p.raw, add_special_tokens=False)["input_ids"]) for p in preds)
                rows[kind].append((wall, cpu, n_tok))
                answers.setdefault(kind, [p.raw for p in preds])
                print(f"round {r + 1} {kind:11} wall {wall:6.1f} s  cpu {cpu:6.1f} s  {n_tok} tokens", file=sys.stderr)
        load1 = os.getloadavg()[0]
    same = all(answers[k] == answers["in-process"] for k in kinds)
    print(
        f"{args.prompts} prompts x {args.tokens} new tokens (greedy), {args.threads} threads, {args.rounds} rounds; "
        f"server start {start_s:.0f} s; load average {load0:.1f} -> {load1:.1f}; answers identical: {same}"
    )
    print(f"{'backend':12} {'median wall s':>14} {'prompts/s':>10} {'tokens/s':>9} {'cpu s (all)':>12}")
    for kind in kinds:
        wall = statistics.median(w for w, _, _ in rows[kind])
        cpu = statistics.median(c for _, c, _ in rows[kind])
        n_tok = rows[kind][0][2]
        print(f"{kind:12} {wall:14.1f} {args.prompts / wall:10.2f} {n_tok / wall:9.1f} {cpu:12.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
