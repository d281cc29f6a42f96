"""One BLAS thread around the simulator's linear algebra (facterlab.blas.one_thread) changes no result."""

from __future__ import annotations

import math

import pytest

from facterlab.blas import one_thread
from facterlab.simpson.simulate import SimpsonConfig, simulate_and_measure

threadpoolctl = pytest.importorskip("threadpoolctl")


def test_one_thread_limits_the_pools_and_restores_them():
    import sklearn.linear_model  # noqa: F401  (its OpenMP and scipy's OpenBLAS are then loaded too)

    before = [p["num_threads"] for p in threadpoolctl.threadpool_info()]
    with one_thread():
        assert all(p["num_threads"] == 1 for p in threadpoolctl.threadpool_info())
    assert [p["num_threads"] for p in threadpoolctl.threadpool_info()] == before


@pytest.mark.parametrize(
    "cfg",
    [
        SimpsonConfig(n_users=4_000, bias=0.03, seed=0),
        SimpsonConfig(n_users=3_000, bias=0.03, sigma1=10.0, d1=4.0, seed=1),
        SimpsonConfig(n_users=3_000, bias=0.03, noise="item", mu1="printed", sigma1=5.0, seed=2),
    ],
    ids=["base", "noisy-dense", "item-printed"],
)
def test_every_read_out_is_the_same_under_two_threads(cfg, monkeypatch):
    """The read-outs (model IPS included) with the pools at one thread equal those with two threads
    everywhere, bit for bit."""
    import sys

    fast = simulate_and_measure(cfg)
    for mod in ("facterlab.simpson.ips", "facterlab.simpson.simulate"):  # the module, not the function `simulate`
        monkeypatch.setattr(sys.modules[mod], "one_thread", lambda: threadpoolctl.threadpool_limits(2))
    with threadpoolctl.threadpool_limits(2):
        two = simulate_and_measure(cfg)
    assert fast.keys() == two.keys()
    for k, v in fast.items():
        assert v == two[k] or (isinstance(v, float) and math.isnan(v) and math.isnan(two[k])), k
