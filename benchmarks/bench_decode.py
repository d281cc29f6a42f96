"""CPU decoding speed of the bundled SmolLM2-135M GGUF: torch path vs llama.cpp vs this machine's bound.

Three measurements, each in its own process (OpenMP settings are read when torch loads):

1. ``peak``: achievable float32 GEMM GFLOP/s with torch (2048 x 2048, best of several) at 1 thread
   and at one thread per usable core: the compute bound of this machine for the torch path.
2. ``torch``: facterlab's path (``load_lm("smollm2-135m").generate``: the GGUF dequantised to
   float32, our batch-independent decode loop), greedy, ``--new-tokens`` new tokens, the same
   prompts one at a time (batch 1) and all together (batch ``--batch``).
3. ``llamacpp`` (if ``--llamacpp-python`` names a Python with ``llama-cpp-python`` installed): the
   same GGUF file and the same prompt token ids (from the HF tokenizer, so both engines see the
   same tokens), greedy, one prompt at a time (the high-level binding decodes one sequence).

Prints tokens/s (generated tokens / wall seconds of the generation calls, prefill included) and
what that is in GFLOP/s: a decoded token costs ``2 x 134.5 M`` multiply-adds (all weights of the
layers and the tied output head) ~ 0.27 GFLOP, attention over a short context adds little.
Thread settings: each child applies :func:`facterlab.threads.configure` (``--threads`` passes
through), as the CLI does.

Run: ``python benchmarks/bench_decode.py [--threads N] [--rounds 2]
[--llamacpp-python /path/to/venv/bin/python]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

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
]
FLOP_PER_TOKEN = 2 * 134_515_008  # 2 x weights of SmolLM2-135M (GGUF tensor elements, tied head included)


def _messages(i: int) -> list:
    hist = [TITLES[(i + j) % len(TITLES)] for j in range(5)]
    return [
        {"role": "system", "content": "You are a helpful movie recommendation assistant."},
        {
            "role": "user",
            "content": "Watch history: " + "; ".join(hist) + ". Recommend the next 5 movies as a JSON array of titles.",
        },
    ]


def _loadavg() -> str:
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "n/a"


def child_peak(threads_arg) -> dict:
    from facterlab import threads

    plan = threads.configure(threads_arg)
    import torch

    out = {"plan": plan.describe(), "threads": torch.get_num_threads()}
    n = 2048
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(2):
        a @ b
    best = float("inf")
    for _ in range(6):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    out["gflops"] = 2 * n**3 / best / 1e9
    # decode-shaped GEMM: 8 rows x (576 -> 1536), the MLP's up-projection at batch 8
    x, w = torch.randn(8, 576), torch.randn(1536, 576)
    reps = 2000
    t0 = time.perf_counter()
    for _ in range(reps):
        x @ w.T
    out["gflops_decode_shape"] = 2 * 8 * 576 * 1536 * reps / (time.perf_counter() - t0) / 1e9
    return out


def child_torch(threads_arg, new_tokens: int, n_prompts: int, batch: int) -> dict:
    from facterlab import threads

    plan = threads.configure(threads_arg)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from facterlab.models.llm import DecodingParams, load_lm

    lm = load_lm("smollm2-135m", device="cpu")
    prompts = [lm.encode_messages(_messages(i)) for i in range(n_prompts)]
    params = DecodingParams(temperature=0.0, max_new_tokens=new_tokens, repetition_penalty=1.0)  # as llama.cpp's
    out = {"plan": plan.describe(), "threads": torch.get_num_threads(), "prompt_ids": prompts}
    lm.generate(prompts[:1], [0], DecodingParams(temperature=0.0, max_new_tokens=2), batch_size=1)  # warm-up
    for label, bs in (("batch1", 1), (f"batch{batch}", batch)):
        t0 = time.perf_counter()
        ids = []
        for chunk in lm.plan([len(p) for p in prompts], bs):
            ids += lm.generate_ids(
                [prompts[i] for i in chunk], [0] * len(chunk), params, min_rows=bs if lm.pad_full_batches else 1
            )
        wall = time.perf_counter() - t0
        n_tok = sum(len(x) for x in ids)
        out[label] = {"wall": wall, "tokens": n_tok, "tok_s": n_tok / wall}
        out.setdefault("first_ids", [list(x) for x in ids[:1]])
    return out


LLAMACPP_CHILD = r"""
import json, sys, time
from llama_cpp import Llama
spec = json.loads(sys.argv[1])
llm = Llama(model_path=spec["gguf"], n_ctx=512, n_threads=spec["threads"], n_threads_batch=spec["threads"],
            n_batch=512, verbose=False, seed=0)
llm.create_completion(prompt=spec["prompts"][0], max_tokens=2, temperature=0.0)  # warm-up
t0 = time.perf_counter()
n_tok = 0
first = None
for p in spec["prompts"]:
    llm.reset()
    toks = []
    for t in llm.generate(p, temp=0.0, top_k=1, repeat_penalty=1.0, reset=True):
        if t == llm.token_eos() or len(toks) >= spec["new_tokens"]:
            break
        toks.append(t)
    n_tok += len(toks)
    first = first or toks
wall = time.perf_counter() - t0
print(json.dumps({"wall": wall, "tokens": n_tok, "tok_s": n_tok / wall, "first_ids": [first]}))
"""


def _run_child(argv: list, env=None) -> dict:
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:4]} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default=None, help="passed to facterlab.threads.configure (default auto)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--n-prompts", type=int, default=8)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--llamacpp-python", default=None, help="a Python with llama-cpp-python installed")
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child == "peak":
        print(json.dumps(child_peak(args.threads)))
        return 0
    if args.child == "torch":
        print(json.dumps(child_torch(args.threads, args.new_tokens, args.n_prompts, args.batch)))
        return 0
    from facterlab.models.registry import resolve_llm
    from facterlab.threads import usable_cpus

    cores = usable_cpus()
    resolved = resolve_llm("smollm2-135m")
    gguf = os.path.join(resolved.source, resolved.gguf_file) if resolved.gguf_file else resolved.source
    me = [sys.executable, os.path.abspath(__file__)]
    thr = ["--threads", args.threads] if args.threads else []
    print(f"# {cores} usable core(s); loadavg at start {_loadavg()}; GGUF {os.path.basename(gguf)}")
    recs: dict = {"peak1": [], "peakN": [], "torch": [], "llamacpp": []}
    for r in range(args.rounds):
        order = ["peak", "torch", "llamacpp"]
        if r % 2:
            order = order[::-1]
        for what in order:
            load = _loadavg()
            if what == "peak":
                p1 = _run_child(me + ["--child", "peak", "--threads", "1"])
                pn = _run_child(me + ["--child", "peak", "--threads", str(cores)])
                recs["peak1"].append(p1)
                recs["peakN"].append(pn)
                print(
                    f"round {r + 1} peak GEMM 2048^3: 1 thread {p1['gflops']:.1f} GFLOP/s, {cores} threads "
                    f"{pn['gflops']:.1f} GFLOP/s; decode-shaped 8x576x1536: {p1['gflops_decode_shape']:.1f} / "
                    f"{pn['gflops_decode_shape']:.1f} GFLOP/s  (loadavg {load})",
                    flush=True,
                )
            elif what == "torch":
                t = _run_child(
                    me
                    + [
                        "--child",
                        "torch",
                        "--new-tokens",
                        str(args.new_tokens),
                        "--n-prompts",
                        str(args.n_prompts),
                        "--batch",
                        str(args.batch),
                    ]
                    + thr
                )
                recs["torch"].append(t)
                b = f"batch{args.batch}"
                print(
                    f"round {r + 1} torch ({t['plan']}): batch 1 {t['batch1']['tok_s']:.1f} tok/s, "
                    f"batch {args.batch} {t[b]['tok_s']:.1f} tok/s  (loadavg {load})",
                    flush=True,
                )
            elif what == "llamacpp" and args.llamacpp_python:
                if not recs["torch"]:
                    continue  # needs the torch run's prompt ids; done in the next pass
                spec = {
                    "gguf": gguf,
                    "threads": int(args.threads)
                    if args.threads and args.threads.isdigit()
                    else recs["torch"][-1]["threads"],
                    "new_tokens": args.new_tokens,
                    "prompts": recs["torch"][-1]["prompt_ids"],
                }
                lc = _run_child([args.llamacpp_python, "-c", LLAMACPP_CHILD, json.dumps(spec)])
                lc["threads"] = spec["threads"]
                recs["llamacpp"].append(lc)
                print(
                    f"round {r + 1} llama.cpp ({spec['threads']} threads): batch 1 {lc['tok_s']:.1f} tok/s  "
                    f"(loadavg {load})",
                    flush=True,
                )
    gf = FLOP_PER_TOKEN / 1e9
    print(f"\nFLOP per decoded token ~ {gf:.2f} GFLOP (2 x 134.5 M weights)")
    peak1 = max(x["gflops"] for x in recs["peak1"])
    peakn = max(x["gflops"] for x in recs["peakN"])
    print(
        f"| engine | setting | median tok/s | GFLOP/s equivalent | % of best {cores}-thread GEMM ({peakn:.0f} GFLOP/s) |"
    )
    print("|---|---|---|---|---|")
    rows = []
    b = f"batch{args.batch}"
    if recs["torch"]:
        rows.append(("torch (facterlab)", "batch 1", statistics.median(x["batch1"]["tok_s"] for x in recs["torch"])))
        rows.append(
            ("torch (facterlab)", f"batch {args.batch}", statistics.median(x[b]["tok_s"] for x in recs["torch"]))
        )
    if recs["llamacpp"]:
        rows.append(("llama.cpp", "batch 1 (one sequence)", statistics.median(x["tok_s"] for x in recs["llamacpp"])))
    for eng, setting, tps in rows:
        print(f"| {eng} | {setting} | {tps:.1f} | {tps * gf:.1f} | {100 * tps * gf / peakn:.0f}% |")
    print(
        f"compute bound: {peakn / gf:.0f} tok/s at {peakn:.0f} GFLOP/s ({cores} threads), "
        f"{peak1 / gf:.0f} tok/s at {peak1:.0f} GFLOP/s (1 thread)"
    )
    if recs["torch"] and recs["llamacpp"]:
        same = recs["torch"][-1]["first_ids"][0] == recs["llamacpp"][-1]["first_ids"][0]
        print(f"first prompt's greedy tokens identical in both engines: {same}")
    if args.json:
        for t in recs["torch"]:
            t.pop("prompt_ids", None)
        with open(args.json, "w") as fh:
            json.dump(recs, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
