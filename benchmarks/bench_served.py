"""Served vs in-process SmolLM2 on CPU: throughput of the same greedy requests.

    .venv/bin/python benchmarks/bench_served.py [--prompts 8] [--tokens 40] [--rounds 2] [--threads 2]
    FACTERLAB_VLLM_PYTHON=/path/to/vllm-venv/bin/python .venv/bin/python benchmarks/bench_served.py --server vllm

The bundled SmolLM2 is converted once to safetensors (tests/helpers/transformers_serve.py) and served on
localhost with ``--threads`` OpenMP threads, the same as the in-process model gets, by

- ``transformers serve`` (default; needs ``transformers[serving]``: fastapi, uvicorn, openai), with
  ``OMP_WAIT_POLICY=PASSIVE``, through its chat endpoint one request at a time and 4 at a time;
- vLLM's CPU build (``--server vllm``; the python of its own venv in ``FACTERLAB_VLLM_PYTHON``), 4
  requests at a time through its chat endpoint (no ``model.tokenizer``) and with the chat template
  rendered here and token ids sent to ``/v1/completions`` (``model.tokenizer=smollm2-135m``).

Measured, alternating (each backend once in order, then in the reverse order, ``--rounds`` times):
wall time, prompts/s and generated tokens/s (counted with the model's tokenizer), CPU seconds of this
process and of the server's processes, and whether the answers are identical to the in-process
ones.  The prompts are open-generation prompts with distinct watch histories; no cache is used.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
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
    ap.add_argument("--server", choices=("transformers", "vllm"), default="transformers")
    args = ap.parse_args(argv)
    os.environ.update(OMP_NUM_THREADS=str(args.threads), OMP_WAIT_POLICY="PASSIVE", HF_HUB_OFFLINE="1")
    os.environ.setdefault("FACTERLAB_LOG", "WARNING")
    import psutil

    from facterlab.config import ModelConfig
    from facterlab.models.rankers import make_recommender
    from facterlab.models.served import ServedRecommender
    from tests.helpers.transformers_serve import converted_smollm2, serve, serve_vllm

    folder = converted_smollm2()
    reqs = _requests(args.prompts)
    common = dict(temperature=0.0, max_new_tokens=args.tokens, repetition_penalty=1.0, batch_size=args.prompts)
    local = make_recommender(ModelConfig(llm="smollm2-135m", device="cpu", **common), "open", cache=False)
    tok = local.lm.tokenizer
    local.predict(reqs[:1])  # warm-up
    log = Path(tempfile.mkdtemp(prefix="bench_served-")) / "serve.log"
    t_start = time.perf_counter()
    if args.server == "vllm":
        server_cm = serve_vllm(folder, log, threads=args.threads)
    else:
        server_cm = serve(folder, log, threads=args.threads)
    with server_cm as url:
        start_s = time.perf_counter() - t_start
        me = psutil.Process()
        server = next(p for p in me.children() if "serve" in " ".join(p.cmdline()) or "vllm" in " ".join(p.cmdline()))

        def server_cpu() -> float:  # the server and its workers (vLLM's engine core is a child process)
            procs = [server, *server.children(recursive=True)]
            total = 0.0
            for proc in procs:
                try:
                    total += sum(proc.cpu_times()[:4])
                except psutil.NoSuchProcess:
                    pass
            return total

        served: dict = {}
        if args.server == "vllm":
            cfg = ModelConfig(llm="openai:smollm2", server_url=url, **common)
            served["vllm chat x4"] = make_recommender(cfg, "open", cache=False)
            cfg_ids = ModelConfig(llm="openai:smollm2", server_url=url, tokenizer="smollm2-135m", **common)
            served["vllm ids x4"] = make_recommender(cfg_ids, "open", cache=False)
        else:
            cfg = ModelConfig(llm=f"openai:{folder}", server_url=url, **common)
            served["served x1"] = ServedRecommender(replace(cfg, concurrency=1), "open")
            served["served x4"] = ServedRecommender(replace(cfg, concurrency=4), "open")
        next(iter(served.values())).predict(reqs[:1])  # warm-up (the server loads the model on first use)
        kinds = ["in-process", *served]
        rows: dict = {k: [] for k in kinds}
        answers: dict = {}
        load0 = os.getloadavg()[0]
        for r in range(args.rounds):
            for kind in kinds if r % 2 == 0 else kinds[::-1]:
                rec = local if kind == "in-process" else served[kind]
                me0, sv0 = time.process_time(), server_cpu()
                t0 = time.perf_counter()
                preds = rec.predict(reqs)
                wall = time.perf_counter() - t0
                cpu = time.process_time() - me0 + server_cpu() - sv0
                n_tok = sum(len(tok(p.raw, add_special_tokens=False)["input_ids"]) for p in preds)
                rows[kind].append((wall, cpu, n_tok))
                answers.setdefault(kind, [p.raw for p in preds])
                print(f"round {r + 1} {kind:12} wall {wall:6.1f} s  cpu {cpu:6.1f} s  {n_tok} tokens", file=sys.stderr)
        load1 = os.getloadavg()[0]
    same = {k: sum(a == b for a, b in zip(answers[k], answers["in-process"])) for k in kinds}
    print(
        f"{args.prompts} prompts x {args.tokens} new tokens (greedy), {args.threads} threads, {args.rounds} rounds; "
        f"{args.server} start {start_s:.0f} s; load average {load0:.1f} -> {load1:.1f}"
    )
    print(
        f"{'backend':13} {'median wall s':>14} {'prompts/s':>10} {'tokens/s':>9} {'cpu s (all)':>12} {'same answers':>13}"
    )
    for kind in kinds:
        wall = statistics.median(w for w, _, _ in rows[kind])
        cpu = statistics.median(c for _, c, _ in rows[kind])
        n_tok = rows[kind][0][2]
        print(
            f"{kind:13} {wall:14.1f} {args.prompts / wall:10.2f} {n_tok / wall:9.1f} {cpu:12.1f} "
            f"{same[kind]:>9}/{args.prompts}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
