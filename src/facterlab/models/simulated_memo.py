"""The simulated recommender's per-request memos (tests/models/test_simulated_memo.py): the bounded
least-recently-used mapping they live in (``_LRU``), their size (:data:`MEMO_BYTES`,
:data:`MEMO_MIN`, :data:`MEMO_MAX`) and a request's core (``_Core``: its pool, preferences plus
noise and the draws that follow them).

Containers only: what goes in them is computed by
:class:`facterlab.models.simulated.SimulatedRecommender`, and every memo holds a pure function of its
key, so the bound changes the speed, never an answer.  :mod:`facterlab.models.simulated` re-exports
every name.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

__all__ = ["MEMO_BYTES", "MEMO_MIN", "MEMO_MAX"]

#: bytes each of the simulator's two memos may hold (per request core: its pool and its preferences plus
#: noise, 12 bytes per item; per surface term: 8 bytes per item); the entry count follows from the
#: catalogue size (:class:`_LRU`)
MEMO_BYTES = 48 * 2**20
#: fewest and most entries of a memo, whatever the catalogue size
MEMO_MIN, MEMO_MAX = 64, 8192


class _LRU:
    """A mapping of at most ``maxsize`` entries, the least recently used dropped first.

    The simulator's memos hold pure functions of their keys (and of the recommender's fixed parameters),
    so a dropped entry is recomputed, bit for bit, when it is asked for again: the bound changes the
    speed, never an answer.

    >>> m = _LRU(2)
    >>> _ = m.put("a", 1), m.put("b", 2), m.get("a"), m.put("c", 3)
    >>> sorted(m.keys()), len(m)
    (['a', 'c'], 2)
    """

    def __init__(self, maxsize: int):
        self.maxsize = max(1, int(maxsize))
        self._d: OrderedDict = OrderedDict()

    def get(self, key):
        got = self._d.get(key)
        if got is not None:
            self._d.move_to_end(key)
        return got

    def put(self, key, value):
        self._d[key] = value
        self._d.move_to_end(key)
        while len(self._d) > self.maxsize:
            self._d.popitem(last=False)
        return value

    def keys(self):
        return self._d.keys()

    def clear(self) -> None:
        self._d.clear()

    def __len__(self) -> int:
        return len(self._d)


class _Core:
    """What a request's answer owes to (``seed``, request seed, history ids, candidates) alone: the pool
    (int32 for open generation), the standardised preferences plus the sigma noise, the noise generator's state after that draw (the corruption draws continue it), the
    corruption draws per answer length and the rule draws (``SimulatedRecommender._core``)."""

    __slots__ = ("key", "pool", "base", "state", "corr", "rule_draws")

    def __init__(self, key: tuple, pool: np.ndarray, base: np.ndarray, state):
        self.key, self.pool, self.base, self.state = key, pool, base, state
        self.corr: dict = {}
        self.rule_draws: dict = {}
