"""Contention benchmark: CPU thread modes for SmolLM2-135M decoding, quiet and next to busy processes.

Workload (issue 16's probe): the bundled SmolLM2-135M through ``load_lm(...).generate``, 8 prompts,
32 new tokens, greedy, batch 8.  Each measurement runs in its own Python process (the OpenMP
settings are read once, when torch loads), and times ``generate`` only (model loading excluded):
wall seconds and the process's CPU seconds (all threads).

Modes, side by side:

- ``torch-default``: no thread variables (torch's default: one thread per core, spinning OpenMP
  pool); ``FACTERLAB_THREADS=off`` so that facterlab leaves everything alone;
- ``1-thread``: ``OMP_NUM_THREADS=1``;
- ``all-passive``: one thread per usable core, ``OMP_WAIT_POLICY=PASSIVE``;
- ``facterlab-auto``: what facterlab now does by default: :func:`facterlab.threads.configure` is
  called before torch is imported, as the CLI and the notebook runner do (the chosen plan is
  printed with each run).

Conditions: ``quiet`` (no competing process of ours), ``busy1`` and ``busy2`` (one and two
``while True: pass`` processes started by this benchmark, started ``--settle`` seconds before the
first run of the condition so that the load is established).  Rounds alternate the order of the
modes (A B C D, D C B A, ...).  Other users of the machine are not controlled: the 1-minute load
average is printed with every run.  The table gives medians and each mode's ratio to the best mode
of the same condition; the target is ``facterlab-auto <= 1.5 x best`` under one competing process.

Run: ``python benchmarks/bench_threads.py [--rounds 3] [--conditions quiet,busy1,busy2]
[--new-tokens 32] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

MODES = ("torch-default", "1-thread", "all-passive", "facterlab-auto")
CONDITIONS = {"quiet": 0, "busy1": 1, "busy2": 2}
THREAD_ENV = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OMP_WAIT_POLICY",
    "FACTERLAB_THREADS",
    "FACTERLAB_THREADS_CHOSEN",
    "OPENBLAS_NUM_THREADS",
    "GOMP_SPINCOUNT",
)
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


def _loadavg() -> str:
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "n/a"


def child(mode: str, new_tokens: int, n_prompts: int, batch: int) -> None:
    """One measurement (runs in a fresh process); prints one JSON line."""
    plan = None
    if mode == "facterlab-auto":
        from facterlab import threads

        plan = threads.configure().describe()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from facterlab.models.llm import DecodingParams, load_lm

    lm = load_lm("smollm2-135m", device="cpu")
    prompts = []
    for i in range(n_prompts):
        hist = [TITLES[(i + j) % len(TITLES)] for j in range(5)]
        msgs = [
            {"role": "system", "content": "You are a helpful movie recommendation assistant."},
            {
                "role": "user",
                "content": "Watch history: "
                + "; ".join(hist)
                + ". Recommend the next 5 movies as a JSON array of titles.",
            },
        ]
        prompts.append(lm.encode_messages(msgs))
    params = DecodingParams(temperature=0.0, max_new_tokens=new_tokens)
    w0, c0 = time.perf_counter(), time.process_time()
    texts = lm.generate(prompts, list(range(n_prompts)), params, batch_size=batch)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    n_tok = sum(len(lm.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts)
    import hashlib

    print(
        json.dumps(
            {
                "mode": mode,
                "wall": wall,
                "cpu": cpu,
                "threads": torch.get_num_threads(),
                "wait_policy": os.environ.get("OMP_WAIT_POLICY"),
                "plan": plan,
                "new_tokens": n_tok,
                "text_sha": hashlib.sha256(json.dumps(texts).encode()).hexdigest()[:12],
            }
        )
    )


def _mode_env(mode: str, cores: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in THREAD_ENV}
    env["HF_HUB_OFFLINE"] = "1"
    if mode == "torch-default":
        env["FACTERLAB_THREADS"] = "off"
    elif mode == "1-thread":
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    elif mode == "all-passive":
        env.update(OMP_NUM_THREADS=str(cores), MKL_NUM_THREADS=str(cores), OMP_WAIT_POLICY="PASSIVE")
    return env


def run_one(mode: str, args, cores: int) -> dict:
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        mode,
        "--new-tokens",
        str(args.new_tokens),
        "--n-prompts",
        str(args.n_prompts),
        "--batch",
        str(args.batch),
    ]
    load = _loadavg()
    proc = subprocess.run(cmd, env=_mode_env(mode, cores), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"mode {mode} failed:\n{proc.stderr[-3000:]}")
    rec = json.loads(proc.stdout.strip().splitlines()[-1])
    rec["loadavg"] = load
    return rec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--conditions", default="quiet,busy1,busy2")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--n-prompts", type=int, default=8)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--settle", type=float, default=20.0, help="seconds the competing processes run first")
    ap.add_argument("--json", default=None, help="write every run and the medians here")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.new_tokens, args.n_prompts, args.batch)
        return 0
    import signal

    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))  # so that `finally` stops the busy processes
    from facterlab.threads import usable_cpus

    cores = usable_cpus()
    modes = [m for m in args.modes.split(",") if m]
    conditions = [c for c in args.conditions.split(",") if c]
    for m in modes:
        if m not in MODES:
            ap.error(f"unknown mode {m!r}; choose from {', '.join(MODES)}")
    for c in conditions:
        if c not in CONDITIONS:
            ap.error(f"unknown condition {c!r}; choose from {', '.join(CONDITIONS)}")
    print(
        f"# {cores} usable core(s); {args.n_prompts} prompts, {args.new_tokens} new tokens, greedy, "
        f"batch {args.batch}; {args.rounds} rounds, alternating order; loadavg at start {_loadavg()}"
    )
    results: dict = {}
    for cond in conditions:
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(CONDITIONS[cond])]
        try:
            if hogs:
                time.sleep(args.settle)
            for r in range(args.rounds):
                order = modes if r % 2 == 0 else modes[::-1]
                for m in order:
                    rec = run_one(m, args, cores)
                    results.setdefault(cond, {}).setdefault(m, []).append(rec)
                    extra = f"  plan: {rec['plan']}" if rec.get("plan") else ""
                    print(
                        f"{cond:6s} round {r + 1} {m:15s} wall {rec['wall']:7.1f} s  cpu {rec['cpu']:7.1f} s  "
                        f"threads {rec['threads']}  wait {rec['wait_policy'] or '-':8s} loadavg {rec['loadavg']}"
                        f"{extra}",
                        flush=True,
                    )
        finally:
            for h in hogs:
                h.kill()
                h.wait()
    summary = {}
    print("\n| condition | mode | median wall s | median CPU s | tokens/s | x best | runs (wall s) |")
    print("|---|---|---|---|---|---|---|")
    ok = None
    for cond, by_mode in results.items():
        med = {m: statistics.median(x["wall"] for x in recs) for m, recs in by_mode.items()}
        best = min(med.values())
        for m, recs in by_mode.items():
            cpu = statistics.median(x["cpu"] for x in recs)
            tps = statistics.median(x["new_tokens"] / x["wall"] for x in recs)
            summary.setdefault(cond, {})[m] = {"wall": med[m], "cpu": cpu, "ratio": med[m] / best}
            print(
                f"| {cond} | {m} | {med[m]:.1f} | {cpu:.1f} | {tps:.1f} | {med[m] / best:.2f} | "
                f"{', '.join('{:.1f}'.format(x['wall']) for x in recs)} |"
            )
        if cond == "busy1" and "facterlab-auto" in med:
            ok = med["facterlab-auto"] <= 1.5 * best
    shas = {x.get("text_sha") for by_mode in results.values() for recs in by_mode.values() for x in recs}
    print(
        f"\ngenerated texts identical across all modes, conditions and rounds: {len(shas) == 1}"
        + ("" if len(shas) == 1 else f" ({len(shas)} distinct outputs)")
    )
    if ok is not None:
        r = summary["busy1"]["facterlab-auto"]["ratio"]
        print(f"\ntarget (busy1: facterlab-auto <= 1.5 x best mode): {'met' if ok else 'NOT met'} ({r:.2f} x)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"runs": results, "summary": summary, "cores": cores}, fh, indent=2)
    return 0 if ok in (None, True) else 1


if __name__ == "__main__":
    sys.exit(main())
