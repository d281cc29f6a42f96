"""numpy's BLAS threads inside a run: one by default, a named switch with its own fingerprint.

Why: a run makes tens of thousands of small matrix products (the catalogue mapper's title x item
cosines, the simulated recommender's fold-ins, the metrics' embeddings).  OpenBLAS splits each over
one thread per core and makes the threads meet at the end of every product.  On a shared machine,
where another process holds a core, each meeting waits for a thread the scheduler is not running:
measured on the 2-core development machine at load 4.5, a (30 x 256) x (256 x 1,682) float32 product
took 15.4 ms on OpenBLAS's two threads and 0.43 ms on one, and a paper-size simulated twin run took
41-43 s wall on two threads and 16-18 s on one (docs/BENCHMARKS.md, "numpy's BLAS threads").

Why it is fingerprinted: OpenBLAS's float32 products round differently on one thread and on two
(measured: 14% of the elements of the mapper's products differ in their last bit), so the catalogue
mapper can pick the other of two items whose cosines tie to the last bit (one mapped item of 22,500 in
that run).  The previous default (OpenBLAS's own: one thread per core) therefore gave results that
depended on the machine's core count.  One thread gives the same rounding on every machine with the
same BLAS kernels; the run records the setting (``blas_threads`` in its fingerprints, so a run made
with another setting is never reused in its place).

``FACTERLAB_BLAS_THREADS``: unset or ``1`` (default) one thread; ``N`` (an integer >= 1) N threads;
``auto`` OpenBLAS's default, which the run does not fingerprint: the behaviour, run ids and records
before this switch.  torch's own thread pool (:mod:`facterlab.threads`) is not touched.

The Simpson simulations (:mod:`facterlab.simpson`) use :func:`one_thread` around their small linear
algebra (a logistic regression on 8 features, N x 8 times 8 x M products), in worker processes, one per
core: with the kernel's thread plan each worker's OpenBLAS would start one thread per core, which on a
busy machine wait for one another (the model IPS's logistic regression took 68 ms per fit on 2 threads
and 7 ms on 1: 5,000 x 8, 2 cores, load ~3, 2026-12-04).  Their results do not change, checked bit for
bit (``tests/simpson/test_simpson_blas.py``), so that limit is not a switch.  Both limits go through
one cached ``threadpoolctl`` controller (:func:`controller`).

>>> blas_threads_setting({})
1
>>> blas_threads_setting({"FACTERLAB_BLAS_THREADS": "auto"}) is None
True
>>> fingerprint_extra({"FACTERLAB_BLAS_THREADS": "2"})
{'blas_threads': 2}
>>> fingerprint_extra({"FACTERLAB_BLAS_THREADS": "auto"})
{}
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = [
    "ENV_BLAS_THREADS",
    "DEFAULT_BLAS_THREADS",
    "blas_threads_setting",
    "controller",
    "fingerprint_extra",
    "limit_blas",
    "one_thread",
]

ENV_BLAS_THREADS = "FACTERLAB_BLAS_THREADS"
#: the default: one BLAS thread in a run (module docstring)
DEFAULT_BLAS_THREADS = 1

_CONTROLLERS: dict = {}


def blas_threads_setting(environ: Mapping[str, str] | None = None) -> int | None:
    """The run's BLAS threads from ``FACTERLAB_BLAS_THREADS`` (module docstring): an int, or None for
    ``auto`` (OpenBLAS's default).

    Parameters
    ----------
    environ : mapping, optional
        The environment to read (default ``os.environ``).

    Returns
    -------
    int or None
        Threads per BLAS call, or None to leave OpenBLAS's default.

    Raises
    ------
    ValueError
        A value that is neither ``auto`` nor an integer >= 1, naming the variable.

    Examples
    --------
    >>> blas_threads_setting({"FACTERLAB_BLAS_THREADS": " 4 "})
    4
    """
    from facterlab import envvars

    value = envvars.get(ENV_BLAS_THREADS, environ)  # 'auto' or an integer in [1, 1024]; one line otherwise
    if value is None:
        return DEFAULT_BLAS_THREADS
    return None if value == "auto" else int(value)


def fingerprint_extra(environ: Mapping[str, str] | None = None) -> dict:
    """What a run adds to its fingerprints for its BLAS threads: ``{"blas_threads": n}``, or ``{}``
    under ``auto`` (the run ids of before the switch).

    Parameters
    ----------
    environ : mapping, optional
        The environment to read (default ``os.environ``).

    Returns
    -------
    dict
        Empty, or one key ``blas_threads``.

    Examples
    --------
    >>> fingerprint_extra({})
    {'blas_threads': 1}
    """
    n = blas_threads_setting(environ)
    return {} if n is None else {"blas_threads": n}


@contextlib.contextmanager
def limit_blas(threads: int | None) -> Iterator[None]:
    """numpy's and scipy's BLAS limited to ``threads`` inside the block (None: unchanged).

    Parameters
    ----------
    threads : int or None
        Threads per BLAS call (:func:`blas_threads_setting`).

    Returns
    -------
    context manager
        Restores the previous limits on exit.

    Examples
    --------
    >>> import numpy as np
    >>> with limit_blas(1):
    ...     float((np.ones((2, 3)) @ np.ones((3, 2)))[0, 0])
    3.0
    """
    if threads is None:
        yield
        return
    import scipy.linalg  # noqa: F401 - scipy's own OpenBLAS, loaded now so that the limit covers it too

    # (a BLAS library loaded inside the block would keep its default: the first run in a process and
    # the next would then round differently)
    with controller().limit(limits=int(threads), user_api="blas"):
        yield


def controller() -> Any:
    """The ``threadpoolctl.ThreadpoolController`` of the thread pools loaded now (numpy's and scipy's
    OpenBLAS, scikit-learn's OpenMP), looked up once per set of imported modules.

    The lookup inspects every loaded shared library (about 3 ms); a new import may load another pool,
    so the controller is rebuilt when ``sys.modules`` has grown.  Entering a limit again then costs
    microseconds.

    Returns
    -------
    threadpoolctl.ThreadpoolController
        The controller; its ``limit(limits=..., user_api=...)`` is a context manager that restores the
        pools on exit.

    Examples
    --------
    >>> controller() is controller()
    True
    """
    from threadpoolctl import ThreadpoolController

    key = len(sys.modules)
    ctl = _CONTROLLERS.get(key)
    if ctl is None:
        _CONTROLLERS.clear()
        ctl = _CONTROLLERS[key] = ThreadpoolController()
    return ctl


def one_thread() -> Any:
    """Every loaded BLAS / OpenMP pool limited to one thread inside the block (module docstring).

    Returns
    -------
    context manager
        Restores the pools' previous limits on exit.

    Examples
    --------
    >>> with one_thread():
    ...     pass
    """
    return controller().limit(limits=1)
