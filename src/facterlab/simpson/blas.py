"""One BLAS / OpenMP thread around the simulator's small linear algebra.

The simulations' linear algebra is small (a logistic regression on 8 features, N x 8 times 8 x M
products) and runs in worker processes, one per core (:func:`facterlab.simpson.sweeping.run_many`).
With the kernel's thread plan (``OMP_NUM_THREADS`` = the cores, :mod:`facterlab.threads`) each worker's
OpenBLAS would start as many threads, which on a busy machine wait for one another: the logistic
regression of the model IPS took 68 ms per fit with 2 threads and 7 ms with 1 (5,000 x 8, 2 cores,
load ~3, 2026-12-04), and notebook 14 spent its CPU time waiting.  :func:`one_thread` limits every
thread pool already loaded (numpy's and scipy's OpenBLAS, scikit-learn's OpenMP) to one thread for
the block it guards and restores them after.

The results do not change (checked, not assumed): the notebooks' metrics are identical with one and
with two threads (notebooks 11-14 at their default sizes, 2026-12-04), and
``tests/simpson/test_simpson_blas.py`` checks simulations with every IPS estimate bit for bit against
the same simulations run under two threads.
"""

from __future__ import annotations

import contextlib
import sys

_CONTROLLERS: dict = {}


def one_thread():
    """A context manager limiting the loaded BLAS / OpenMP pools to one thread (``threadpoolctl``;
    a no-op where it is not installed).  The pools are looked up once per set of imported modules
    (about 3 ms), so entering it again costs microseconds.

    >>> with one_thread():
    ...     pass
    """
    key = len(sys.modules)  # a new import may have loaded another library with a pool
    ctl = _CONTROLLERS.get(key)
    if ctl is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # scikit-learn brings threadpoolctl; without it, leave the pools alone
            return contextlib.nullcontext()
        _CONTROLLERS.clear()
        ctl = _CONTROLLERS[key] = ThreadpoolController()
    return ctl.limit(limits=1)
