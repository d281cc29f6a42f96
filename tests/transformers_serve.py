"""``transformers serve`` with the bundled SmolLM2, for the opt-in real-server test and the benchmark.

``transformers serve`` cannot load the bundled GGUF file directly (transformers 5.24: its config has
no ``architectures``), and a GGUF-loaded model refuses ``save_pretrained``; :func:`converted_smollm2`
therefore copies the dequantised float32 weights into a fresh model once and saves it as safetensors
under ``build/served-models/smollm2-135m`` (about 50 s here; reused afterwards).

:func:`serve` starts the server on a free localhost port with ``OMP_WAIT_POLICY=PASSIVE``: on this
loaded 2-core machine a greedy 40-token request took 57-67 s with OpenMP's default spinning threads
and 5.5-7.1 s with passive ones (measured with curl, 2026-12-02).  It needs ``transformers[serving]``
(fastapi, uvicorn, openai).
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

ROOT = Path(__file__).resolve().parents[1]
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
    exe = ROOT / ".venv" / "bin" / "transformers"
    args = [str(exe), "serve", str(model_dir), "--host", "127.0.0.1", "--port", str(port)]
    args += ["--dtype", "float32", "--device", "cpu"]
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
                raise RuntimeError(f"transformers serve did not start; see {log}")
            time.sleep(1.0)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
