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
K = 5  # the prompts ask for 5 titles
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


def _variants(spec: str) -> list:
    """``"blas:8,onednn:32"`` -> ``[("blas", 8), ("onednn", 32)]``."""
    out = []
    for part in spec.split(","):
        kernel, _, bs = part.strip().partition(":")
        if kernel not in ("blas", "onednn") or not bs.isdigit() or int(bs) < 1:
            raise SystemExit(f"--variants: {part!r} is not KERNEL:BATCH with KERNEL blas|onednn")
        out.append((kernel, int(bs)))
    return out


def child_torch(threads_arg, new_tokens: int, n_prompts: int, variants: str) -> dict:
    """Each variant decodes the same ``n_prompts`` prompts (greedy, ``new_tokens``), in batches of its size."""
    from facterlab import threads

    plan = threads.configure(threads_arg)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from facterlab.models.llm import DecodingParams, bucket_length, load_lm

    lms = {k: load_lm("smollm2-135m", device="cpu", linear_kernel=k) for k in ("blas", "onednn")}
    lm = lms["blas"]
    prompts = [lm.encode_messages(_messages(i)) for i in range(n_prompts)]
    params = DecodingParams(temperature=0.0, max_new_tokens=new_tokens, repetition_penalty=1.0)  # as llama.cpp's
    out: dict = {"plan": plan.describe(), "threads": torch.get_num_threads(), "prompt_ids": prompts, "runs": []}
    for k in lms.values():  # warm-up (and oneDNN's first call)
        k.generate(prompts[:1], [0], DecodingParams(temperature=0.0, max_new_tokens=2), batch_size=1)
    for kernel, bs in _variants(variants):
        m = lms[kernel]
        t0, c0 = time.perf_counter(), time.process_time()
        ids = []
        for chunk in m.plan([len(p) for p in prompts], bs):
            ids += m.generate_ids(
                [prompts[i] for i in chunk], [0] * len(chunk), params, min_rows=bs if m.pad_full_batches else 1
            )
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        n_tok = sum(len(x) for x in ids)
        prefill = sum(bucket_length(len(p), m.bucket) for p in prompts)  # prompt tokens computed, pads included
        out["runs"].append(
            {
                "kernel": kernel,
                "batch": bs,
                "wall": wall,
                "cpu": cpu,
                "tokens": n_tok,
                "prefill_tokens": prefill,
                "tok_s": n_tok / wall,
                "ids": [list(x) for x in ids],
                "load": _loadavg(),
            }
        )
    return out


def child_answers(threads_arg, max_new: int, n_prompts: int, batch: int, temperature: float) -> dict:
    """Full-length generation (to EOS or ``max_new``) vs ``stop_k`` (a row stops once its answer is final),
    both with the oneDNN kernel at ``batch``; the parsed answers of the two must be equal."""
    from facterlab import threads

    plan = threads.configure(threads_arg)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from facterlab.models.llm import DecodingParams, load_lm
    from facterlab.models.parsing import parse_titles

    lm = load_lm("smollm2-135m", device="cpu", linear_kernel="onednn")
    prompts = [lm.encode_messages(_messages(i)) for i in range(n_prompts)]
    rep = 1.0 if temperature == 0 else 1.2
    params = DecodingParams(temperature=temperature, top_p=0.95, max_new_tokens=max_new, repetition_penalty=rep)
    seeds = list(range(n_prompts))
    lm.generate(prompts[:1], [0], DecodingParams(temperature=0.0, max_new_tokens=2), batch_size=1)
    out: dict = {"plan": plan.describe()}
    for label, stop in (("full", None), ("stop", [K] * n_prompts)):
        t0, c0 = time.perf_counter(), time.process_time()
        texts = lm.generate(prompts, seeds, params, batch_size=batch, stop_k=stop)
        out[label] = {
            "wall": time.perf_counter() - t0,
            "cpu": time.process_time() - c0,
            "chars": [len(t) for t in texts],
            "parsed": [[*parse_titles(t, K)[0], parse_titles(t, K)[1]] for t in texts],
            "load": _loadavg(),
        }
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


def _med(xs) -> float:
    return statistics.median(xs) if xs else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default=None, help="passed to facterlab.threads.configure (default auto)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--n-prompts", type=int, default=64)
    ap.add_argument(
        "--variants",
        default="blas:8,onednn:8,onednn:16,onednn:32,onednn:64",
        help="KERNEL:BATCH,... (the first is the baseline; order reversed every other round)",
    )
    ap.add_argument(
        "--answers", type=int, default=0, help="also time full-length vs stop-at-answer with this max_new_tokens"
    )
    ap.add_argument("--answers-batch", type=int, default=32)
    ap.add_argument("--answers-prompts", type=int, default=32)
    ap.add_argument("--answers-temperature", type=float, default=0.0)
    ap.add_argument("--skip-peak", action="store_true")
    ap.add_argument("--skip-torch", action="store_true", help="only the peak / answers / llama.cpp parts")
    ap.add_argument("--llamacpp-python", default=None, help="a Python with llama-cpp-python installed")
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    variants = _variants(args.variants)
    if args.child == "peak":
        print(json.dumps(child_peak(args.threads)))
        return 0
    if args.child == "torch":
        print(json.dumps(child_torch(args.threads, args.new_tokens, args.n_prompts, args.variants)))
        return 0
    if args.child == "answers":
        print(
            json.dumps(
                child_answers(args.threads, args.answers, args.n_prompts, args.answers_batch, args.answers_temperature)
            )
        )
        return 0
    if args.n_prompts < max(bs for _, bs in variants):
        raise SystemExit(f"--n-prompts {args.n_prompts} is less than the largest batch: a batch would not fill")
    from facterlab.models.registry import resolve_llm
    from facterlab.threads import usable_cpus

    cores = usable_cpus()
    resolved = resolve_llm("smollm2-135m")
    gguf = os.path.join(resolved.source, resolved.gguf_file) if resolved.gguf_file else resolved.source
    me = [sys.executable, os.path.abspath(__file__)]
    thr = ["--threads", args.threads] if args.threads else []
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {cores} usable core(s); loadavg at start {_loadavg()}"
    )
    print(f"# {args.n_prompts} prompts, {args.new_tokens} new tokens, greedy; variants {args.variants}")
    recs: dict = {"peak1": [], "peakN": [], "torch": [], "llamacpp": [], "answers": []}
    for r in range(args.rounds):
        order = ["peak", "torch", "answers", "llamacpp"]
        if r % 2:
            order = order[::-1]
        for what in order:
            load = _loadavg()
            if what == "peak" and not args.skip_peak:
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
            elif what == "torch" and not args.skip_torch:
                spec = ",".join(f"{k}:{b}" for k, b in (variants if r % 2 == 0 else variants[::-1]))
                t = _run_child(
                    me
                    + ["--child", "torch", "--new-tokens", str(args.new_tokens), "--n-prompts", str(args.n_prompts)]
                    + ["--variants", spec]
                    + thr
                )
                recs["torch"].append(t)
                for x in t["runs"]:
                    print(
                        f"round {r + 1} torch {x['kernel']} batch {x['batch']}: {x['tok_s']:.1f} tok/s, "
                        f"wall {x['wall']:.1f} s, CPU {x['cpu']:.1f} s  (loadavg {x['load']})",
                        flush=True,
                    )
            elif what == "answers" and args.answers:
                a = _run_child(
                    me
                    + ["--child", "answers", "--answers", str(args.answers), "--n-prompts", str(args.answers_prompts)]
                    + [
                        "--answers-batch",
                        str(args.answers_batch),
                        "--answers-temperature",
                        str(args.answers_temperature),
                    ]
                    + ["--variants", args.variants]
                    + thr
                )
                recs["answers"].append(a)
                same = a["full"]["parsed"] == a["stop"]["parsed"]
                n_short = sum(s < f for s, f in zip(a["stop"]["chars"], a["full"]["chars"]))
                print(
                    f"round {r + 1} answers (onednn, batch {args.answers_batch}, max_new_tokens {args.answers}, "
                    f"T={args.answers_temperature}): full {a['full']['wall']:.1f} s wall / {a['full']['cpu']:.1f} s CPU, "
                    f"stop-at-answer {a['stop']['wall']:.1f} s / {a['stop']['cpu']:.1f} s; {n_short}/{args.answers_prompts} "
                    f"rows stopped early; parsed answers identical: {same}  (loadavg {a['full']['load']} / "
                    f"{a['stop']['load']})",
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
                    "prompts": recs["torch"][-1]["prompt_ids"][:8],
                }
                lc = _run_child([args.llamacpp_python, "-c", LLAMACPP_CHILD, json.dumps(spec)])
                lc["threads"] = spec["threads"]
                recs["llamacpp"].append(lc)
                print(
                    f"round {r + 1} llama.cpp ({spec['threads']} threads, first 8 prompts): batch 1 "
                    f"{lc['tok_s']:.1f} tok/s  (loadavg {load})",
                    flush=True,
                )
    gf = FLOP_PER_TOKEN / 1e9
    print(f"\nFLOP per processed token ~ {gf:.2f} GFLOP (2 x 134.5 M weights)")
    peakn = max((x["gflops"] for x in recs["peakN"]), default=float("nan"))
    peak1 = max((x["gflops"] for x in recs["peak1"]), default=float("nan"))
    runs = [x for t in recs["torch"] for x in t["runs"]]
    base_k, base_b = variants[0]
    base = [x for x in runs if (x["kernel"], x["batch"]) == (base_k, base_b)]
    base_tps = _med([x["tok_s"] for x in base])
    base_cpt = _med([x["cpu"] / x["tokens"] for x in base])
    ref_ids = base[0]["ids"] if base else None
    header = (
        f"| kernel | batch | median tok/s | x baseline (wall) | median CPU ms/token | x baseline (CPU) | "
        f"GFLOP/s incl. prefill | % of {cores}-thread GEMM peak ({peakn:.0f}) | token ids = baseline |"
    )
    if runs:
        print(header + "\n" + "|---" * 9 + "|")
    for kernel, bs in variants if runs else []:
        xs = [x for x in runs if (x["kernel"], x["batch"]) == (kernel, bs)]
        tps = _med([x["tok_s"] for x in xs])
        cpt = _med([x["cpu"] / x["tokens"] for x in xs])
        gfs = _med([(x["tokens"] + x["prefill_tokens"]) * gf / x["wall"] for x in xs])
        same = all(x["ids"] == ref_ids for x in xs)
        print(
            f"| {kernel} | {bs} | {tps:.1f} | {tps / base_tps:.2f} | {1e3 * cpt:.1f} | {base_cpt / cpt:.2f} | "
            f"{gfs:.1f} | {100 * gfs / peakn:.0f}% | {same} |"
        )
    if runs:
        x = runs[0]
        share = x["prefill_tokens"] / (x["prefill_tokens"] + x["tokens"])
        print(
            f"compute bound: {peakn / gf:.0f} processed tok/s at {peakn:.0f} GFLOP/s ({cores} threads), "
            f"{peak1 / gf:.0f} at {peak1:.0f} GFLOP/s (1 thread); prefill is {100 * share:.0f}% of the processed "
            f"tokens here, so the bound on generated tok/s of this workload is {(1 - share) * peakn / gf:.0f}"
        )
    if recs["torch"] and recs["llamacpp"]:
        same = recs["torch"][-1]["runs"][0]["ids"][0] == recs["llamacpp"][-1]["first_ids"][0]
        print(f"first prompt's greedy tokens identical in both engines: {same}")
    if args.json:
        for t in recs["torch"]:
            t.pop("prompt_ids", None)
        with open(args.json, "w") as fh:
            json.dump(recs, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
