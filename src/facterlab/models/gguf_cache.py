"""A GGUF model converted once: its tokenizer and float weights kept as a transformers folder.

Why: transformers reads a ``.gguf`` file by parsing all of its metadata (for SmolLM2-135M, about 295,000
vocabulary strings) three times, once for the config, once for the tokenizer and once for the weights,
then maps and dequantises every tensor.  Measured on the 2-core machine (2026-12-04, quiet): loading the
bundled SmolLM2-135M took 23-26 s, of which cProfile put 85% in ``load_gguf_checkpoint``.  Every notebook
kernel that needs a new prediction paid it again.

What: the first load of a GGUF model saves what transformers built from it (``save_pretrained``:
``tokenizer.json`` with the chat template, ``config.json`` without its GGUF quantisation entry,
``model.safetensors`` with the dequantised weights in the loaded dtype) under ``<cache>/converted-gguf/<name>-<key>/``; later loads read that
folder.  The key is the GGUF file's content fingerprint, the transformers version that converted it and
the dtype, so another file, another converter or another dtype converts again.  The folder is written to
a temporary name and renamed into place with a ``complete`` marker last (a killed conversion leaves no
folder that looks finished).  A folder that cannot be written (read-only or full disk) is logged and
skipped, as is any other failure to save: the model loaded from the GGUF is used as before.

The weights and the tokenizer are the same: the safetensors hold the very tensors that the GGUF load
produced, and ``tokenizer.json`` is the fast tokenizer transformers converted.  ``tests/models/test_models_llm.py``
checks that the two loads give bit-identical parameters, the same token ids for chat prompts and the same
greedy tokens.  The model's fingerprint stays the GGUF file's, so run ids and LLM-cache keys do not change.

The conversion itself parses the file once (:func:`one_parse`): transformers builds a new ``gguf.GGUFReader``
for the config, the tokenizer and the weights, and each parse of SmolLM2-135M's metadata (its vocabulary
strings, in Python) is about a third of the conversion; within :func:`one_parse` the three loads share one
reader (read-only: a memory map and the parsed fields).

``FACTERLAB_GGUF_CACHE=0`` turns it off (every load reads the GGUF, as before).  The folder of
SmolLM2-135M in float32 holds about 540 MB.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from facterlab import envvars

log = logging.getLogger(__name__)

__all__ = ["ENV_GGUF_CACHE", "converted_dir", "is_complete", "one_parse", "save_converted"]

ENV_GGUF_CACHE = "FACTERLAB_GGUF_CACHE"
MARKER = "complete"


def converted_dir(name: str, fingerprint: str, dtype_name: str, cache: os.PathLike | str | None = None) -> Path | None:
    """The folder of a converted GGUF model, or None when the cache is turned off.

    Parameters
    ----------
    name : str
        The model's registry name (readable part of the folder name).
    fingerprint : str
        The GGUF file's content fingerprint.
    dtype_name : str
        The dtype the weights are loaded in.
    cache : path-like, optional
        The cache folder (default :func:`facterlab.config.cache_dir`).

    Returns
    -------
    Path or None
        ``<cache>/converted-gguf/<name>-<key>``; None when ``FACTERLAB_GGUF_CACHE`` is ``0``.

    Examples
    --------
    >>> converted_dir("m", "abc", "float32", cache="/tmp/c").parent.name
    'converted-gguf'
    """
    if not envvars.get(ENV_GGUF_CACHE):
        return None
    import transformers

    from facterlab.config import cache_dir

    key = hashlib.sha256(f"{fingerprint}|transformers {transformers.__version__}|{dtype_name}".encode()).hexdigest()
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:60]
    return cache_dir(cache) / "converted-gguf" / f"{safe}-{key[:16]}"


@contextlib.contextmanager
def one_parse() -> Iterator[dict]:
    """Within the block, ``gguf.GGUFReader(path)`` parses each file once: later calls with the same
    arguments get the first reader (transformers imports the class from ``gguf`` at each load, and loads
    the config, the tokenizer and the weights of one GGUF file separately).  Yields the readers made
    (``{(path, args, kwargs): reader}``); nothing is patched when ``gguf`` is not installed.

    A reader is read-only (a memory map of the file and the fields parsed from it), so what each load
    builds from the shared reader is what it built from its own.  The block is not for concurrent loads in
    other threads (it replaces the module attribute while it runs)."""
    readers: dict = {}
    try:
        import gguf
    except ImportError:
        yield readers
        return
    original = gguf.GGUFReader

    def reader(path, *args, **kwargs):
        key = (os.fspath(path), args, tuple(sorted(kwargs.items())))
        got = readers.get(key)
        if got is None:
            got = readers[key] = original(path, *args, **kwargs)
        return got

    setattr(gguf, "GGUFReader", reader)  # noqa: B010 - a module attribute replaced for the block
    try:
        yield readers
    finally:
        setattr(gguf, "GGUFReader", original)  # noqa: B010


def is_complete(folder: Path | None) -> bool:
    """Whether ``folder`` holds a finished conversion (its marker is written last).

    Examples
    --------
    >>> is_complete(None)
    False
    """
    return folder is not None and (folder / MARKER).is_file()


def save_converted(folder: Path, tokenizer: Any, model: Any) -> bool:
    """Save ``tokenizer`` and ``model`` into ``folder`` (temporary name, then renamed); True when saved.

    Parameters
    ----------
    folder : Path
        The target folder (:func:`converted_dir`).
    tokenizer, model : transformers objects
        What the GGUF load built, before any change to the weights.

    Returns
    -------
    bool
        False (logged) when the folder could not be written; the caller keeps the loaded model.
    """
    tmp = folder.parent / f".{folder.name}.tmp-{os.getpid()}"
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        tokenizer.save_pretrained(tmp)
        _save_weights(tmp, model)
        (tmp / MARKER).write_text("converted from GGUF by facterlab.models.gguf_cache\n")
        if is_complete(folder):  # another process finished first: keep its folder
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            shutil.rmtree(folder, ignore_errors=True)  # an unfinished leftover
            os.replace(tmp, folder)
        return True
    except Exception as exc:  # noqa: BLE001 - a cache that cannot be written must not lose the loaded model
        shutil.rmtree(tmp, ignore_errors=True)
        log.warning("could not keep the converted GGUF model in %s (%s); later loads read the GGUF again", folder, exc)
        return False


def _save_weights(folder: Path, model: Any) -> None:
    """``config.json`` (without the GGUF quantisation entry: the weights are already dequantised),
    ``generation_config.json`` and ``model.safetensors`` (tied tensors once) of ``model``.

    transformers' own ``save_pretrained`` refuses a model loaded from a GGUF file ("not serializable"),
    although its weights are plain tensors by then; the reload (``from_pretrained`` on the folder) ties the
    output head to the embeddings again from ``tie_word_embeddings``."""
    from safetensors.torch import save_model

    config = copy.deepcopy(model.config)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.save_pretrained(folder)
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.save_pretrained(folder)
    save_model(model, str(folder / "model.safetensors"), metadata={"format": "pt"})
