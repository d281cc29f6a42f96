"""Tests for models/cache.py, models/registry.py and models/device.py (no models loaded)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from facterlab.datatypes import PARSE_OK, Prediction, PromptRequest, Recommender
from facterlab.models.cache import CachedRecommender, EmbeddingCache, PredictionCache, request_key, text_key
from facterlab.models.device import resolve_device
from facterlab.models.registry import UNKNOWN_MODEL_MSG, resolve_encoder, resolve_llm

REPO = Path(__file__).resolve().parents[2]


def _req(text, seed=0, cands=None):
    return PromptRequest.from_messages(
        [{"role": "system", "content": "S"}, {"role": "user", "content": text}], seed=seed, candidates=cands
    )


class CountingRec(Recommender):
    """Deterministic toy recommender that counts its calls."""

    fingerprint = "counting-v1"

    def __init__(self):
        self.calls = []

    def predict(self, requests):
        self.calls.append(len(requests))
        return [Prediction(titles=(r.messages[-1][1].upper(), str(r.seed)), parse_status=PARSE_OK) for r in requests]


def test_request_key_depends_on_every_part():
    base = _req("hi", 1, ("a", "b"))
    k = request_key("fp", base)
    assert len(k) == 64 and k == request_key("fp", _req("hi", 1, ("a", "b")))
    others = [
        request_key("fp2", base),
        request_key("fp", _req("hi", 2, ("a", "b"))),
        request_key("fp", _req("ho", 1, ("a", "b"))),
        request_key("fp", _req("hi", 1, ("b", "a"))),
        request_key("fp", _req("hi", 1, None)),
    ]
    assert len({k, *others}) == 6


def test_prediction_cache_roundtrip_json(tmp_path):
    c = PredictionCache(tmp_path / "c.sqlite")
    p = Prediction(titles=("A", "B\u00e9"), parse_status="ok", raw='["A"]', n_model_positions=1, n_truncated_history=2)
    c.put_predictions([("k1", p)])
    assert c.get_predictions(["k1", "k2"]) == {"k1": p}
    raw = c.get_many(["k1"])["k1"]
    raw = raw.decode() if isinstance(raw, bytes) else raw
    assert json.loads(raw)["titles"] == ["A", "B\u00e9"]  # JSON, not pickle
    mode = c._conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_embedding_cache_roundtrip(tmp_path):
    c = EmbeddingCache(tmp_path / "e.sqlite")
    v = np.array([0.6, 0.8], dtype=np.float32)
    c.put_vectors([(text_key("f", "t"), v)])
    got = c.get_vectors([text_key("f", "t"), text_key("g", "t")])
    assert list(got) == [text_key("f", "t")] and np.array_equal(got[text_key("f", "t")], v)


def test_cached_recommender_only_generates_misses(tmp_path):
    inner = CountingRec()
    rec = CachedRecommender(inner, PredictionCache(tmp_path / "c.sqlite"), batch_size=2)
    reqs = [_req(f"q{i}", i) for i in range(5)]
    first = rec.predict(reqs)
    assert inner.calls == [2, 2, 1] and first[3].titles == ("Q3", "3")
    again = rec.predict(reqs[::-1] + [_req("new", 9), _req("new", 9)])
    assert inner.calls == [2, 2, 1, 1]  # only the new one (duplicates generated once)
    assert again[:5] == first[::-1] and again[5] == again[6]
    assert rec.fingerprint == "counting-v1"


_KILL_SCRIPT = textwrap.dedent("""
    import sys, time
    from facterlab.models.cache import CachedRecommender, PredictionCache
    from facterlab.datatypes import Prediction, PromptRequest, Recommender

    class Slow(Recommender):
        fingerprint = "slow-v1"
        def predict(self, requests):
            out = []
            for r in requests:
                time.sleep(float(sys.argv[3]))
                with open(sys.argv[2], "a") as f:
                    f.write(r.messages[-1][1] + "\\n")
                out.append(Prediction(titles=(r.messages[-1][1],)))
            return out

    rec = CachedRecommender(Slow(), PredictionCache(sys.argv[1]), batch_size=1)
    reqs = [PromptRequest.from_messages([{"role": "user", "content": f"q{i}"}], seed=i) for i in range(12)]
    for r in reqs:
        rec.predict([r])
    print("done")
""")


def test_killed_run_resumes_without_redoing_cached_prompts(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(_KILL_SCRIPT)
    db, log = tmp_path / "c.sqlite", tmp_path / "calls.txt"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.Popen([sys.executable, str(script), str(db), str(log), "0.15"], env=env)
    deadline = time.time() + 60
    while time.time() < deadline:
        if log.exists() and len(log.read_text().split()) >= 4:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    first_calls = log.read_text().split()
    assert 4 <= len(first_calls) < 12, "the run should have been killed midway"
    cached = len(PredictionCache(db))
    assert cached >= len(first_calls) - 1  # at most the in-flight one was lost
    out = subprocess.run(
        [sys.executable, str(script), str(db), str(log), "0"], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "done"
    calls = log.read_text().split()
    restart = calls[len(first_calls) :]
    assert len(restart) == 12 - cached  # only the misses were generated again
    assert not set(restart) & set(first_calls[:cached])
    assert len(PredictionCache(db)) == 12


_WRITER = textwrap.dedent("""
    import sys
    from facterlab.models.cache import PredictionCache
    from facterlab.datatypes import Prediction
    c = PredictionCache(sys.argv[1])
    for i in range(150):
        c.put_predictions([(f"{sys.argv[2]}-{i}", Prediction(titles=(str(i),)))])
""")


def test_two_processes_write_at_once(tmp_path):
    script = tmp_path / "w.py"
    script.write_text(_WRITER)
    db = tmp_path / "c.sqlite"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    procs = [
        subprocess.Popen([sys.executable, str(script), str(db), tag], env=env, stderr=subprocess.PIPE)
        for tag in ("a", "b")
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    assert len(PredictionCache(db)) == 300


# ------------------------------------------------------------------ device and registry


def test_resolve_device_rules():
    assert resolve_device("auto", "auto", cuda_available=False) == ("cpu", "float32")
    assert resolve_device("auto", "auto", cuda_available=True) == ("cuda", "bfloat16")
    assert resolve_device("cpu", "auto", cuda_available=True) == ("cpu", "float32")
    assert resolve_device("cuda", "float32", cuda_available=True) == ("cuda", "float32")
    with pytest.raises(ValueError, match="CUDA is not available"):
        resolve_device("cuda", "auto", cuda_available=False)
    with pytest.raises(ValueError, match="not supported on CPU"):
        resolve_device("cpu", "bfloat16")
    with pytest.raises(ValueError, match="unknown device"):
        resolve_device("tpu")
    with pytest.raises(ValueError, match="unknown dtype"):
        resolve_device("cpu", "int8")


def test_resolve_device_on_this_machine():
    import torch

    dev, dt = resolve_device()
    assert dev == ("cuda" if torch.cuda.is_available() else "cpu")
    assert dt == ("bfloat16" if dev == "cuda" else "float32")


def test_registry_bundled_models():
    r = resolve_llm("smollm2-135m")
    assert r.gguf_file == "SmolLM2-135M-Instruct.Q4_1.gguf" and r.is_local
    assert (Path(r.source) / r.gguf_file).is_file()
    assert resolve_llm("SMOLLM2-135M").fingerprint == r.fingerprint  # registry names are case-insensitive
    e = resolve_encoder("all-MiniLM-L6-v2")
    assert (Path(e.source) / "config.json").is_file()
    assert e.fingerprint == resolve_encoder("sentence-transformers/all-MiniLM-L6-v2").fingerprint


def test_unknown_model_fails_fast_offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    for name in ("no-such-org/no-such-model", "llama3-8b"):
        with pytest.raises(ValueError) as ei:
            resolve_llm(name)
        msg = str(ei.value)
        assert name in msg and "'smollm2-135m'" in msg and "local directory" in msg
    with pytest.raises(ValueError, match="not a registry name"):
        resolve_encoder("/no/such/dir/model")


def test_unknown_model_fails_before_heavy_imports(tmp_path):
    code = (
        "import sys\nfrom facterlab.config import ModelConfig\nfrom facterlab.models import make_recommender\n"
        "try:\n    make_recommender(ModelConfig(llm='nobody/nothing'), 'open')\n"
        "except ValueError as e:\n    print('ERR', 'torch' in sys.modules, 'transformers' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ERR False False"


def test_local_hf_cache_is_found(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    snap = tmp_path / "hub" / "models--acme--tiny" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    r = resolve_llm("acme/tiny")
    assert r.source == "acme/tiny" and not r.is_local and "abc123" in r.fingerprint


def test_importing_models_is_light():
    code = "import sys, facterlab.models\nprint('torch' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "False False"
    assert UNKNOWN_MODEL_MSG.count("{") == 3
