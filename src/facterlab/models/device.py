"""Device and dtype resolution for the model backends (docs/FACTER.md §5: bf16 on GPUs).

``device="auto"`` picks CUDA when available (bf16 there), else CPU with float32.  The function takes
an explicit ``cuda_available`` so that it is testable on machines without a GPU; when it is ``None``
torch is asked (imported lazily).
"""

from __future__ import annotations

__all__ = ["resolve_device", "torch_dtype", "DTYPES"]

DTYPES = ("auto", "float32", "bfloat16", "float16")


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is an optional extra
        return False
    return bool(torch.cuda.is_available())


def resolve_device(device: str = "auto", dtype: str = "auto", cuda_available: bool | None = None) -> tuple:
    """Resolve ``(device, dtype)`` names to concrete ones: ``("cpu"|"cuda"|"cuda:N", dtype_name)``.

    Rule: ``auto`` device -> ``cuda`` if available else ``cpu``; ``auto`` dtype -> ``bfloat16`` on
    CUDA, ``float32`` on CPU.  Asking for CUDA where there is none is an error, as is a half dtype
    on CPU (its matmuls are slow and inexact there); unknown names are errors.

    >>> resolve_device("auto", "auto", cuda_available=False)
    ('cpu', 'float32')
    >>> resolve_device("auto", "auto", cuda_available=True)
    ('cuda', 'bfloat16')
    >>> resolve_device("cuda:1", "float16", cuda_available=True)
    ('cuda:1', 'float16')
    """
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(map(repr, DTYPES))}")
    dev = str(device).strip().lower()
    if not (dev in ("auto", "cpu", "cuda") or (dev.startswith("cuda:") and dev[5:].isdigit())):
        raise ValueError(f"unknown device {device!r}; choose 'auto', 'cpu', 'cuda' or 'cuda:N'")
    if dev == "auto" or dev.startswith("cuda"):
        has_cuda = _cuda_available() if cuda_available is None else bool(cuda_available)
        if dev == "auto":
            dev = "cuda" if has_cuda else "cpu"
        elif not has_cuda:
            raise ValueError(f"device {device!r} requested but CUDA is not available; use device='cpu' or 'auto'")
    if dtype == "auto":
        dtype = "bfloat16" if dev.startswith("cuda") else "float32"
    elif dev == "cpu" and dtype != "float32":
        raise ValueError(f"dtype {dtype!r} is not supported on CPU; use 'float32' (or 'auto')")
    return dev, dtype


def torch_dtype(name: str):
    """The ``torch.dtype`` for a resolved dtype name (imports torch)."""
    import torch

    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]
