"""Benchmark: FACTER with the simulated recommender at the paper's size (issue: FACTER you can watch on a CPU).

    python benchmarks/bench_simulated.py                 # phase times of a paper-size run, both encoders
    python benchmarks/bench_simulated.py --accuracy      # NDCG/Recall@10 against the random floor
    python benchmarks/bench_simulated.py --notebook      # also time notebook 09 end to end (papermill)
    python benchmarks/bench_simulated.py --encoder-ab    # cold-cache MiniLM run: CPU and encoding share,
                                                         # token-budget batches vs sentence-transformers' own
    python benchmarks/bench_simulated.py --twin          # the cost of facterlab's twin monitor (twin Delta +
                                                         # null threshold) against the faithful FACTER
    python benchmarks/bench_simulated.py --cache-ab      # cold vs warm embedding cache, alternating (issue 30)
    python benchmarks/bench_simulated.py --sim-ab REV    # the simulated recommender's own cost: git revision
                                                         # REV against the working tree, alternating (issue 30)
    python benchmarks/bench_simulated.py --batch-ab      # its per-request path against its batched path on the
                                                         # requests of paper-size runs, alternating (issue 45)

A run is n = 2,500 rows (1,750 calibration / 750 test), T = 3 passes, 1 seed, 200 CFR rows, open
generation, on ML-100K when FACTERLAB_DATA holds it (else the synthetic set).  Each run goes in a fresh
subprocess (imports included, as a user pays them) and is repeated ``--repeats`` times, the encoders
alternating (A B A B); we print medians of wall time, CPU time and peak RSS, and each phase's median.
The MiniLM run reads its embeddings from the on-disk cache after the first repeat (printed apart):
the phases are what a GPU user pays on top of the LLM.  Targets (2-core machine): run < 60 s and
< 2 GB peak; notebook 09 < 3 min.  The machine is shared: /proc/loadavg is printed with every run.

``--encoder-ab`` (issue 21, "Speed"): the cold-cache paper-size MiniLM run, each run with a fresh
embedding cache, alternating two batchings of the encoder (A B A B ...): ``tokens`` (the default:
texts sorted by token count, batches of <= 64 texts and <= ``MAX_BATCH_TOKENS`` padded tokens) and
``st64`` (``max_batch_tokens=None``: sentence-transformers' batches of 64 texts, the batching before
the change).  Per run: CPU seconds of the process (user + system, imports included), the CPU seconds
spent inside ``SentenceEncoder.encode`` (the encoding share), the texts the model encoded, wall time;
then medians, the ratio tokens / st64, and the largest absolute difference between the two
variants' embeddings of the same texts (read back from the two runs' caches).  Target: CPU < 60 s.

``--twin`` (issue 21, docs/FACTER.md §7): the same paper-size run (beta = 2, rho = 1, MiniLM with a warm
embedding cache) with the faithful FACTER and with ``facter.delta = "twin"``, ``facter.threshold =
"null"``, alternating (A B A B), each in a fresh process with a fresh results folder; per run the CPU
and wall seconds and the recommender requests (calibration twins and placebos, per-method twins and
calls); then medians and the CPU ratio twin / faithful.

``--sim-ab REV_A[,REV_B]`` (issue 30, notebook 09's ~67 simulated runs): the simulated recommender's own
cost, two versions of the package alternating (A B A B ...): each ``REV`` is a git revision whose ``src``
is extracted (``git archive``) and put first on PYTHONPATH, ``REV_B`` defaulting to the working tree.
The run is one of notebook 09's twin-acceptance cases (``--sim-case``, default ``lines-set``:
``case_config("lines-set", 12, "family")``,
n = ``--sim-rows`` rows, T = 3, 200 CFR rows, ``--sim-encoder``), each in a fresh process; per run the
wall and CPU seconds (imports included), the CPU seconds inside ``SimulatedRecommender.predict``, its
requests, and the load average; then medians, the ratios B / A, and whether the two versions' run
folders are byte-identical (every file but timings.json, run.json's command line, clock and code version aside).

``--batch-ab`` (issue 45, "numpy over requests"): the requests a paper-size run asks the simulated recommender
(n = ``--sim-rows`` rows, T = 3, 200 CFR rows, hash encoder; recorded once per case by running it, batch by
batch as the run asked them), answered again by a fresh recommender (cold memos, as in a run) with the
per-request path (A: ``_predict_one`` for each request, what ``predict`` did before) and with the batched path
(B: ``predict``), alternating A B B A ...; per answer pass the CPU and wall seconds; then medians, the ratio
B / A and whether every answer of B equals A's.  Cases: open generation and re-ranking (beta 2, rho 1) and the
text-reading simulator with surface noise.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _child import run_child  # this folder is on sys.path when a benchmark runs

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter(); c0 = time.process_time()
from facterlab.reporting.experiments import run_config
from facterlab.facter.pipeline import run_experiment
import facterlab.models.encoder as E

enc = {"cpu_s": 0.0, "texts": 0, "batches": 0}
_encode, _init = E.SentenceEncoder.encode, E.SentenceEncoder.__init__
def encode(self, texts):  # CPU time inside the encoder (cache look-ups included), texts the model saw
    c, n, b = time.process_time(), self.n_model_calls, self.n_batches
    try:
        return _encode(self, texts)
    finally:
        enc["cpu_s"] += time.process_time() - c
        enc["texts"] += self.n_model_calls - n
        enc["batches"] += self.n_batches - b
def init(self, *a, **k):
    _init(self, *a, **k)
    if sys.argv[4] == "st64":  # sentence-transformers' own batches of batch_size texts
        self.max_batch_tokens = None
E.SentenceEncoder.encode, E.SentenceEncoder.__init__ = encode, init
cfg = run_config(dataset=sys.argv[1], model="simulated", protocol="open", n_rows=2500, passes=3, cfr_rows=200,
                 encoder=sys.argv[2], sim__beta=2.0, sim__rho=1.0)
r = run_experiment(cfg, out_dir=sys.argv[3], progress=False)
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                  "user_s": ru.ru_utime, "sys_s": ru.ru_stime, "peak_rss_mb": ru.ru_maxrss / 1024,
                  "enc_cpu_s": enc["cpu_s"], "enc_texts": enc["texts"], "enc_batches": enc["batches"],
                  "phases": r.timings, "dataset": r.record.metrics.dataset,
                  "n_calib": r.record.metrics.n_calib, "n_test": r.record.metrics.n_test}))
"""


def _dataset() -> str:
    from facterlab.data import resolve_dataset

    return resolve_dataset("auto")


def one_run(dataset: str, encoder: str, cache: str, batching: str = "tokens") -> dict:
    out = tempfile.mkdtemp(prefix="bench_sim_")
    env = dict(os.environ, FACTERLAB_CACHE=cache, HF_HUB_OFFLINE="1")
    load = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
    p = subprocess.run(
        [sys.executable, "-c", CHILD, dataset, encoder, out, batching], env=env, capture_output=True, text=True
    )
    if p.returncode != 0:
        raise SystemExit(f"run failed ({encoder}):\n{p.stderr[-3000:]}")
    res = json.loads(p.stdout.strip().splitlines()[-1])
    res["load_before"] = load
    res["out"] = out
    return res


def phases_report(dataset: str, repeats: int) -> None:
    cache = tempfile.mkdtemp(prefix="bench_sim_cache_")
    encoders = ["hash-encoder", "all-MiniLM-L6-v2"]
    runs: dict = {e: [] for e in encoders}
    for i in range(repeats):
        order = encoders if i % 2 == 0 else encoders[::-1]
        for e in order:
            r = one_run(dataset, e, cache)
            runs[e].append(r)
            print(
                f"  repeat {i + 1} {e:18s} wall {r['wall_s']:6.1f} s  cpu {r['cpu_s']:6.1f} s  "
                f"peak {r['peak_rss_mb']:6.0f} MB  load {r['load_before']}",
                flush=True,
            )
    print(
        f"\nPaper-size simulated run on {runs[encoders[0]][0]['dataset']} "
        f"({runs[encoders[0]][0]['n_calib']} calibration / {runs[encoders[0]][0]['n_test']} test rows, T = 3, "
        "1 seed, 200 CFR rows); medians over repeats (MiniLM: warm-cache repeats only, the first one printed apart)"
    )
    phases = [
        "data_s",
        "models_s",
        "calibration_s",
        "test_neighbours_s",
        "neutral_s",
        "fair_s",
        "facter_s",
        "metrics_s",
    ]
    print("| encoder | wall s | CPU s | peak MB | " + " | ".join(p.replace("_s", "") for p in phases) + " |")
    print("|---|---|---|---|" + "---|" * len(phases))
    for e in encoders:
        rs = runs[e][1:] if e != "hash-encoder" and len(runs[e]) > 1 else runs[e]
        med = {k: statistics.median(r[k] for r in rs) for k in ("wall_s", "cpu_s", "peak_rss_mb")}
        ph = [statistics.median(r["phases"].get(p, 0.0) for r in rs) for p in phases]
        print(
            f"| {e} | {med['wall_s']:.1f} | {med['cpu_s']:.1f} | {med['peak_rss_mb']:.0f} | "
            + " | ".join(f"{x:.1f}" for x in ph)
            + " |"
        )
        if e != "hash-encoder":
            c = runs[e][0]
            print(
                f"| {e} (cold cache) | {c['wall_s']:.1f} | {c['cpu_s']:.1f} | {c['peak_rss_mb']:.0f} | "
                + " | ".join(f"{c['phases'].get(p, 0.0):.1f}" for p in phases)
                + " |"
            )
            print(
                f"  cold cache: {c['cpu_s']:.1f} s CPU, of which encoding {c['enc_cpu_s']:.1f} s "
                f"({c['enc_cpu_s'] / c['cpu_s']:.0%}, {c['enc_texts']} texts in {c['enc_batches']} batches); "
                f"target < 60 s CPU -> ratio {c['cpu_s'] / 60:.2f}"
            )
    best = min(statistics.median(r["wall_s"] for r in runs[e]) for e in encoders)
    print(f"\ntarget run < 60 s: best median {best:.1f} s -> ratio to target {best / 60:.2f}")


def _cached_vectors(cache: str) -> dict:
    """key -> float32 vector of a run's embedding cache (``cache_dir()/embeddings.sqlite``)."""
    import sqlite3

    import numpy as np

    con = sqlite3.connect(str(Path(cache) / "embeddings.sqlite"))
    try:
        return {k: np.frombuffer(v, dtype=np.float32) for k, v in con.execute("SELECT key, value FROM embeddings")}
    finally:
        con.close()


def encoder_ab_report(dataset: str, repeats: int) -> None:
    """Cold-cache MiniLM runs alternating the encoder's batching (module docstring, ``--encoder-ab``)."""
    import numpy as np

    variants = ["tokens", "st64"]
    runs: dict = {v: [] for v in variants}
    caches: dict = {v: [] for v in variants}
    for i in range(repeats):
        for v in variants if i % 2 == 0 else variants[::-1]:
            cache = tempfile.mkdtemp(prefix=f"bench_sim_ab_{v}_")
            r = one_run(dataset, "all-MiniLM-L6-v2", cache, batching=v)
            runs[v].append(r)
            caches[v].append(cache)
            print(
                f"  repeat {i + 1} {v:6s} cpu {r['cpu_s']:6.1f} s (user {r['user_s']:.1f}, sys {r['sys_s']:.1f})  "
                f"encoding {r['enc_cpu_s']:6.1f} s ({r['enc_cpu_s'] / r['cpu_s']:.0%}, {r['enc_texts']} texts, "
                f"{r['enc_batches']} batches)  wall {r['wall_s']:6.1f} s  load {r['load_before']}",
                flush=True,
            )
    d = runs[variants[0]][0]
    print(
        f"\nCold-cache paper-size simulated run, MiniLM, on {d['dataset']} ({d['n_calib']} calibration / "
        f"{d['n_test']} test rows, T = 3, 1 seed, 200 CFR rows); medians over {repeats} runs per variant"
    )
    print("| batching | CPU s | encoding CPU s | encoding share | sys s | wall s |")
    print("|---|---|---|---|---|---|")
    med = {}
    for v in variants:
        rs = runs[v]
        med[v] = {k: statistics.median(r[k] for r in rs) for k in ("cpu_s", "enc_cpu_s", "sys_s", "wall_s")}
        share = statistics.median(r["enc_cpu_s"] / r["cpu_s"] for r in rs)
        m = med[v]
        print(f"| {v} | {m['cpu_s']:.1f} | {m['enc_cpu_s']:.1f} | {share:.0%} | {m['sys_s']:.1f} | {m['wall_s']:.1f} |")
    a, b = med["tokens"], med["st64"]
    print(
        f"\nratio tokens / st64: CPU {a['cpu_s'] / b['cpu_s']:.2f}, encoding CPU {a['enc_cpu_s'] / b['enc_cpu_s']:.2f}; "
        f"target < 60 s CPU -> tokens {a['cpu_s'] / 60:.2f}, st64 {b['cpu_s'] / 60:.2f}"
    )
    va, vb = _cached_vectors(caches["tokens"][0]), _cached_vectors(caches["st64"][0])
    common = sorted(set(va) & set(vb))
    if common:
        diff = max(float(np.max(np.abs(va[k] - vb[k]))) for k in common)
        cos = min(float(va[k] @ vb[k]) for k in common)
        print(
            f"embeddings of the same {len(common)} texts, tokens vs st64: max |diff| {diff:.2e}, min cosine {cos:.7f}"
        )


def _metrics_bytes(out: str) -> bytes:
    """metrics.json of the one run a child wrote under ``out``."""
    found = sorted(Path(out).glob("runs/*/metrics.json"))
    if len(found) != 1:
        raise SystemExit(f"expected one run's metrics.json under {out}, found {len(found)}")
    return found[0].read_bytes()


def cache_ab_report(dataset: str, repeats: int, batching: str = "tokens") -> None:
    """``--cache-ab`` (issue 30, "Encode each text once"): the faithful paper-size MiniLM run with a cold
    embedding cache (a fresh FACTERLAB_CACHE) and with a warm one (the cache the first cold run filled, a
    fresh results folder), alternating cold, warm, warm, cold, ...; per run CPU and wall seconds (imports
    included), the encoder's CPU seconds and the texts it sent to the model; medians; and whether every
    run's metrics.json is byte-identical to the first cold run's."""
    runs: dict = {"cold": [], "warm": []}
    warm_cache = None
    first = None
    same = []
    for i in range(repeats):
        for kind in ("cold", "warm") if i % 2 == 0 else ("warm", "cold"):
            cache = tempfile.mkdtemp(prefix="bench_sim_cold_") if kind == "cold" else warm_cache
            r = one_run(dataset, "all-MiniLM-L6-v2", str(cache), batching)
            warm_cache = warm_cache or cache  # the first cold run's cache serves every warm run
            runs[kind].append(r)
            m = _metrics_bytes(r["out"])
            first = m if first is None else first
            same.append(m == first)
            print(
                f"  repeat {i + 1} {kind}  CPU {r['cpu_s']:6.1f} s  wall {r['wall_s']:6.1f} s  encoder CPU "
                f"{r['enc_cpu_s']:6.1f} s ({r['enc_texts']} texts to the model)  load {r['load_before']}",
                flush=True,
            )
    d = runs["cold"][0]
    print(
        f"\nPaper-size faithful simulated run, MiniLM ({batching} batching), on {d['dataset']} "
        f"({d['n_calib']} calibration / {d['n_test']} test rows, T = 3, 1 seed, 200 CFR rows); "
        f"medians over {repeats} runs each"
    )
    print("| embedding cache | CPU s | wall s | encoder CPU s | texts encoded |")
    print("|---|---|---|---|---|")
    for kind, rs in runs.items():
        med = {k: statistics.median(r[k] for r in rs) for k in ("cpu_s", "wall_s", "enc_cpu_s", "enc_texts")}
        print(
            f"| {kind} | {med['cpu_s']:.1f} | {med['wall_s']:.1f} | {med['enc_cpu_s']:.1f} | {med['enc_texts']:.0f} |"
        )
    cold = statistics.median(r["cpu_s"] for r in runs["cold"])
    print(f"cold CPU / 60 s target: {cold / 60:.2f}; metrics.json byte-identical in all runs: {all(same)}")


def accuracy_report(dataset: str) -> None:
    import numpy as np
    import pandas as pd

    from facterlab.config import preset
    from facterlab.data.protocol import load_or_build_interactions
    from facterlab.facter import prompts
    from facterlab.facter.monitor import prompt_items
    from facterlab.metrics import random_ranking_floor, ranking_metrics
    from facterlab.models.simulated import SimulatedRecommender, training_pairs

    cfg = preset("repro", data__dataset=dataset, data__n_rows=2500)
    inter = load_or_build_interactions(None, cfg.data)
    rows = pd.concat([inter.calib, inter.test], ignore_index=True)
    tp = training_pairs(rows)
    items = inter.items.set_index("item_id") if "item_id" in inter.items.columns else inter.items
    id_of: dict = {}
    for i, t in zip(items.index, items["title"]):
        id_of.setdefault(str(t), int(i))
    test = inter.test.reset_index(drop=True).to_dict("records")
    rel = [list(r["relevant"]) for r in test]
    pit = prompt_items(inter.items)
    print(f"{inter.dataset}: {len(tp)} training pairs of {tp['user_id'].nunique()} users; {len(test)} test rows")
    print("| protocol | model | NDCG@10 | Recall@10 | ratio to floor (NDCG) |")
    print("|---|---|---|---|---|")
    for proto in ("open", "rank"):
        reqs = [
            prompts.build_request(r, pit, prompts.system_prompt("neutral"), proto, 10, inter.domain, 1) for r in test
        ]
        if proto == "rank":
            fl = random_ranking_floor([list(r["candidates"]) for r in test], rel, 10)
            floor = (fl["ndcg_mean"], fl["recall_mean"])
        else:  # uniform random 10 of the catalogue minus the history: expected recall = 10 / pool size
            pool = np.array([len(items) - len(r["history"]) for r in test], dtype=float)
            rec_floor = float(np.mean(10.0 / pool))
            floor = (float("nan"), rec_floor)
        print(
            f"| {proto} | random | {floor[0]:.4f} | {floor[1]:.4f} | 1 |"
            if proto == "rank"
            else f"| {proto} | random (expected recall 10/pool) | n/a | {floor[1]:.4f} | |"
        )
        for f in (8, 16, 32, 64):
            rec = SimulatedRecommender(inter.items, tp, protocol=proto, beta=0.0, sigma=0.5, h=0.0, n_factors=f)
            ranked = [[id_of[t] for t in p.titles][:10] for p in rec.predict(reqs)]
            m = ranking_metrics(ranked, rel, 10)
            ratio = m["ndcg_mean"] / floor[0] if proto == "rank" else m["recall_mean"] / floor[1]
            print(
                f"| {proto} | PureSVD rank {f}, sigma 0.5 | {m['ndcg_mean']:.4f} | {m['recall_mean']:.4f} | "
                f"{ratio:.1f}x{' (recall)' if proto == 'open' else ''} |"
            )


def notebook_report(dataset: str) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench_nb09_"))
    env = dict(
        os.environ,
        FACTERLAB_RESULTS=str(tmp / "results"),
        FACTERLAB_FIGURES=str(tmp / "figures"),
        FACTERLAB_CACHE=str(tmp / "cache"),
        HF_HUB_OFFLINE="1",
        MPLBACKEND="Agg",
    )
    for label in ("cold cache", "warm cache (runs deleted)"):
        if label.startswith("warm"):
            import shutil

            shutil.rmtree(tmp / "results", ignore_errors=True)
        t0 = time.perf_counter()
        r0 = os.times()
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "papermill",
                str(REPO / "notebooks" / "09_facter_ground_truth.ipynb"),
                str(tmp / "09.ipynb"),
                "-p",
                "DATASET",
                dataset,
            ],
            env=env,
            capture_output=True,
            text=True,
        )
        r1 = os.times()
        wall = time.perf_counter() - t0
        cpu = (r1.children_user - r0.children_user) + (r1.children_system - r0.children_system)
        status = "ok" if p.returncode == 0 else "FAILED: " + p.stderr[-500:]
        print(
            f"notebook 09 ({label}): wall {wall:.1f} s, CPU {cpu:.1f} s, {status}; target < 180 s -> ratio {wall / 180:.2f}"
        )


TWIN_CHILD = r"""
import json, sys, tempfile, time
t0 = time.perf_counter(); c0 = time.process_time()
from facterlab.reporting.experiments import run_config
from facterlab.facter.pipeline import run_experiment
kw = {"facter__delta": "twin", "facter__threshold": "null"} if sys.argv[2] == "twin" else {}
cfg = run_config(dataset=sys.argv[1], model="simulated", n_rows=2500, passes=3, cfr_rows=200,
                 encoder="all-MiniLM-L6-v2", sim__beta=2.0, sim__rho=1.0, **kw)
r = run_experiment(cfg, out_dir=tempfile.mkdtemp(), progress=False)
m = r.record.metrics
print(json.dumps({"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                  "calib_twins": m.calibration.n_twin_predictions or 0,
                  "calib_placebos": m.calibration.n_placebo_predictions or 0,
                  "twins": {k: m.methods[k].n_twin_predictions for k in m.methods},
                  "calls": {k: m.methods[k].n_recommender_calls for k in m.methods}}))
"""


def twin_report(dataset: str, repeats: int) -> None:
    """Faithful FACTER against the twin monitor, alternating, medians and the CPU ratio (module docstring)."""
    got: dict = {"faithful": [], "twin": []}
    for _ in range(repeats):
        for kind in ("faithful", "twin"):
            out = subprocess.run(
                [sys.executable, "-c", TWIN_CHILD, dataset, kind], capture_output=True, text=True, check=True
            )
            rec = json.loads(out.stdout.strip().splitlines()[-1])
            got[kind].append(rec)
            load = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
            print(f"{kind:8} wall {rec['wall_s']:.1f} s  CPU {rec['cpu_s']:.1f} s  load {load}  {json.dumps(rec)}")
    med = {k: statistics.median(r["cpu_s"] for r in v) for k, v in got.items()}
    wall = {k: statistics.median(r["wall_s"] for r in v) for k, v in got.items()}
    for k in got:
        print(f"median {k:8}: CPU {med[k]:.1f} s, wall {wall[k]:.1f} s")
    print(f"CPU ratio twin / faithful: {med['twin'] / med['faithful']:.2f}")


SIM_AB_CHILD = r"""
import json, sys, time
t0 = time.perf_counter(); c0 = time.process_time()
import facterlab.models.simulated as S
from facterlab.reporting import experiments as ex
from facterlab.reporting.twin_acceptance import case_config
got = {"predict_cpu_s": 0.0, "requests": 0}
_predict = S.SimulatedRecommender.predict
def predict(self, requests):
    c = time.process_time()
    try:
        return _predict(self, requests)
    finally:
        got["predict_cpu_s"] += time.process_time() - c
        got["requests"] += len(requests)
S.SimulatedRecommender.predict = predict
case, _, variant = sys.argv[6].partition(":")
cfg = case_config(case, 12, variant or "family", dataset=sys.argv[1], n_rows=int(sys.argv[2]), passes=3, cfr_rows=200,
                  encoder=sys.argv[3])
ex.run(cfg, data_dir=sys.argv[5] or None, out_dir=sys.argv[4], progress=False)
print(json.dumps({"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, "module": S.__file__, **got}))
"""


def _src_of(rev: str) -> str:
    """A temporary folder holding ``src`` of git revision ``rev`` (``git archive``)."""
    import tarfile

    out = tempfile.mkdtemp(prefix=f"bench_sim_src_{rev[:12]}_")
    tar = Path(out) / "src.tar"
    with open(tar, "wb") as fh:
        subprocess.run(["git", "-C", str(REPO), "archive", rev, "src"], stdout=fh, check=True)
    with tarfile.open(tar) as t:
        t.extractall(out, filter="data")
    return str(Path(out) / "src")


def _run_files(out: str) -> dict:
    """relative path -> bytes of every file of the one run under ``out`` (timings.json left out; run.json
    without its command line, clock and code version: A and B are two revisions)."""
    runs = sorted(Path(out).glob("runs/*"))
    if len(runs) != 1:
        raise SystemExit(f"expected one run under {out}, found {len(runs)}")
    files = {}
    for p in sorted(runs[0].rglob("*")):
        if not p.is_file() or p.name == "timings.json":
            continue
        data = p.read_bytes()
        if p.name == "run.json":
            meta = json.loads(data)
            for k in ("command", "started_at", "finished_at", "code_version"):  # the revision differs by design
                meta.pop(k, None)
            data = json.dumps(meta, sort_keys=True).encode()
        files[str(p.relative_to(runs[0]))] = data
    return files


def sim_ab_report(revs: str, dataset: str, repeats: int, n_rows: int, encoder: str, case: str = "lines-set") -> None:
    """``--sim-ab`` (module docstring): two versions of the simulated recommender, alternating."""
    rev_a, _, rev_b = revs.partition(",")
    variants = {"A": (rev_a, _src_of(rev_a)), "B": (rev_b or "worktree", _src_of(rev_b) if rev_b else "")}
    data_dir = os.environ.get("FACTERLAB_DATA", "")
    runs: dict = {v: [] for v in variants}
    files: dict = {}
    for i in range(repeats):
        for v in ("A", "B") if i % 2 == 0 else ("B", "A"):
            out = tempfile.mkdtemp(prefix=f"bench_sim_ab_{v}_")
            env = dict(os.environ, HF_HUB_OFFLINE="1", FACTERLAB_CACHE=tempfile.mkdtemp(prefix="bench_sim_cache_"))
            if variants[v][1]:
                env["PYTHONPATH"] = variants[v][1]
            load = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
            r = run_child(
                SIM_AB_CHILD, [dataset, n_rows, encoder, out, data_dir, case], env, f"run ({v} = {variants[v][0]})"
            )
            r["load"] = load
            runs[v].append(r)
            files.setdefault(v, _run_files(out))
            print(
                f"  repeat {i + 1} {v} ({variants[v][0]}): wall {r['wall_s']:6.1f} s  CPU {r['cpu_s']:6.1f} s  "
                f"predict CPU {r['predict_cpu_s']:6.2f} s ({r['requests']} requests)  load {load}",
                flush=True,
            )
    print(
        f"\nnotebook 09's {case} case on {dataset}, n = {n_rows}, T = 3, 200 CFR rows, {encoder}; "
        f"medians over {repeats} runs per version (A = {variants['A'][0]}, B = {variants['B'][0]})"
    )
    print("| version | wall s | CPU s | predict CPU s | requests | load |")
    print("|---|---|---|---|---|---|")
    med: dict = {}
    for v, rs in runs.items():
        med[v] = {k: statistics.median(r[k] for r in rs) for k in ("wall_s", "cpu_s", "predict_cpu_s")}
        loads = sorted(float(r["load"]) for r in rs if r["load"] != "?")
        span = f"{loads[0]:.1f}-{loads[-1]:.1f}" if loads else "?"
        m = med[v]
        print(
            f"| {v} {variants[v][0]} | {m['wall_s']:.1f} | {m['cpu_s']:.1f} | {m['predict_cpu_s']:.2f} | "
            f"{rs[0]['requests']} | {span} |"
        )
    a, b = med["A"], med["B"]
    print(
        f"ratio B / A: wall {b['wall_s'] / a['wall_s']:.2f}, CPU {b['cpu_s'] / a['cpu_s']:.2f}, "
        f"predict CPU {b['predict_cpu_s'] / a['predict_cpu_s']:.2f} (speedup {a['predict_cpu_s'] / b['predict_cpu_s']:.1f}x)"
    )
    print(f"run folders byte-identical, A vs B: {files['A'] == files['B']} ({len(files['A'])} files)")


#: ``--batch-ab``'s cases: the sim section and protocol of each paper-size run
BATCH_AB_CASES = {
    "open": dict(protocol="open", sim__beta=2.0, sim__rho=1.0),
    "rank": dict(protocol="rank", sim__beta=2.0, sim__rho=1.0),
    "open-text": dict(
        protocol="open", sim__reads="text", sim__beta=1.5, sim__rho=0.6, sim__wording_sd=0.5, sim__temperature=0.5
    ),
}


def _recorded_batches(cfg) -> list:
    """The batches of requests a run of ``cfg`` asks its simulated recommender (the run made once, here)."""
    import facterlab.models.simulated as S
    from facterlab.facter.pipeline import run_experiment

    batches: list = []
    real = S.SimulatedRecommender.predict

    def predict(self, requests):
        batches.append(list(requests))
        return real(self, requests)

    S.SimulatedRecommender.predict = predict  # type: ignore[method-assign]
    try:
        run_experiment(cfg, out_dir=tempfile.mkdtemp(prefix="bench_batch_ab_"), progress=False)
    finally:
        S.SimulatedRecommender.predict = real  # type: ignore[method-assign]
    return batches


def batch_ab_report(dataset: str, repeats: int, n_rows: int) -> None:
    """``--batch-ab`` (module docstring): the per-request path (A) against the batched path (B), alternating."""
    import facterlab.models.simulated as S
    from facterlab.data.protocol import load_or_build_interactions
    from facterlab.reporting.experiments import run_config

    print(f"--batch-ab on {dataset}, n = {n_rows}, T = 3, 200 CFR rows; load {os.getloadavg()[0]:.1f}", flush=True)
    rows_out = []
    for case, kw in BATCH_AB_CASES.items():
        cfg = run_config(
            dataset=dataset, model="simulated", n_rows=n_rows, passes=3, cfr_rows=200, encoder="hash-encoder", **kw
        )
        batches = _recorded_batches(cfg)
        inter = load_or_build_interactions(None, cfg.data)
        n_req = sum(len(b) for b in batches)
        got: dict = {"A": [], "B": []}
        answers: dict = {}
        for i in range(repeats):
            for v in ("A", "B") if i % 2 == 0 else ("B", "A"):
                rec = S.simulated_from_config(cfg, inter)
                one = rec._predict_one
                c0, t0, load = time.process_time(), time.perf_counter(), os.getloadavg()[0]
                out = [[one(r) for r in b] if v == "A" else rec.predict(b) for b in batches]
                got[v].append({"cpu_s": time.process_time() - c0, "wall_s": time.perf_counter() - t0, "load": load})
                answers.setdefault(v, out)
                r = got[v][-1]
                print(
                    f"  {case:9s} repeat {i + 1} {v} ({'per request' if v == 'A' else 'batched'}): "
                    f"CPU {r['cpu_s']:6.2f} s  wall {r['wall_s']:6.2f} s  load {load:.1f}",
                    flush=True,
                )
        med = {v: {k: statistics.median(r[k] for r in rs) for k in ("cpu_s", "wall_s")} for v, rs in got.items()}
        same = answers["A"] == answers["B"]
        rows_out.append((case, n_req, len(batches), med, same))
    print(f"\nmedians over {repeats} answer passes per path (A: per request, B: batched)")
    print("| case | requests (batches) | A CPU s | B CPU s | A wall s | B wall s | CPU B / A | answers identical |")
    print("|---|---|---|---|---|---|---|---|")
    for case, n_req, n_b, med, same in rows_out:
        a, b = med["A"], med["B"]
        print(
            f"| {case} | {n_req} ({n_b}) | {a['cpu_s']:.2f} | {b['cpu_s']:.2f} | {a['wall_s']:.2f} | {b['wall_s']:.2f} "
            f"| {b['cpu_s'] / a['cpu_s']:.2f} | {same} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--accuracy", action="store_true", help="only the accuracy table")
    ap.add_argument("--notebook", action="store_true", help="also time notebook 09 with papermill")
    ap.add_argument(
        "--encoder-ab",
        action="store_true",
        help="only the cold-cache MiniLM run: CPU and encoding share, token-budget batches vs "
        "sentence-transformers' batches of 64, alternating (--repeats runs each)",
    )
    ap.add_argument("--twin", action="store_true", help="only the twin monitor's cost against the faithful FACTER")
    ap.add_argument(
        "--cache-ab",
        action="store_true",
        help="only: cold vs warm embedding cache, alternating (--repeats runs each; metrics compared)",
    )
    ap.add_argument(
        "--sim-ab",
        metavar="REV_A[,REV_B]",
        help="only: the simulated recommender's cost, two git revisions alternating (REV_B: the working tree)",
    )
    ap.add_argument(
        "--batch-ab",
        action="store_true",
        help="only: the simulated recommender's per-request path against its batched path, alternating "
        "(--repeats passes each; --sim-rows rows, default 1500; 2500 is the paper's size)",
    )
    ap.add_argument("--sim-rows", type=int, default=1500, help="--sim-ab, --batch-ab: data.n_rows (default 1500)")
    ap.add_argument("--sim-encoder", default="hash-encoder", help="--sim-ab: the encoder (default hash-encoder)")
    ap.add_argument(
        "--sim-case",
        default="lines-set",
        help="--sim-ab: the twin-acceptance case run (default lines-set; e.g. semantic)",
    )
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--dataset", default=None, help="default: auto (ML-1M, else ML-100K, else synthetic)")
    a = ap.parse_args()
    dataset = a.dataset or _dataset()
    if a.accuracy:
        accuracy_report(dataset)
        return
    if a.encoder_ab:
        encoder_ab_report(dataset, a.repeats)
        return
    if a.twin:
        twin_report(dataset, a.repeats)
        return
    if a.cache_ab:
        cache_ab_report(dataset, a.repeats)
        return
    if a.sim_ab:
        sim_ab_report(a.sim_ab, dataset, a.repeats, a.sim_rows, a.sim_encoder, a.sim_case)
        return
    if a.batch_ab:
        batch_ab_report(dataset, a.repeats, a.sim_rows)
        return
    phases_report(dataset, a.repeats)
    if a.notebook:
        notebook_report(dataset)


if __name__ == "__main__":
    main()
