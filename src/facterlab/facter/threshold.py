"""Online threshold updates (FACTER Eq. 11 / Theorem 2; docs/FACTER.md §3).

Named rules (``threshold_rule``):

- ``one_sided`` (default; REPRO and ORIG's code): on a violation S_t > Q_t,
  Q_{t+1} = gamma Q_t + (1 - gamma) S_t; otherwise Q_{t+1} = Q_t.  Q only rises.
- ``eq11_as_printed``: Q_{t+1} = gamma Q_t + (1 - gamma) min(Q_t, S_t) (a no-op on violations).
- ``aci`` (Gibbs & Candes 2021): Q_{t+1} = max(0, Q_t + eta (1[S_t > Q_t] - alpha)), every step.

>>> update_threshold(1.0, 2.0, "one_sided", gamma=0.9)
1.1
>>> update_threshold(1.0, 0.5, "one_sided", gamma=0.9)
1.0
>>> round(update_threshold(1.0, 0.5, "eq11_as_printed", gamma=0.9), 10)
0.95
>>> round(update_threshold(1.0, 2.0, "aci", eta=0.05, alpha=0.1), 10), round(update_threshold(1.0, 0.5, "aci", eta=0.05, alpha=0.1), 10)
(1.045, 0.995)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from facterlab.config import THRESHOLD_RULES


def update_threshold(
    q: float, s: float, rule: str = "one_sided", gamma: float = 0.95, eta: float = 0.05, alpha: float = 0.10
) -> float:
    """The online threshold after one step of the named rule (the formulas: module docstring).

    Parameters
    ----------
    q : float
        Current threshold Q_t.
    s : float
        Current nonconformity score S_t.
    rule : {"one_sided", "eq11_as_printed", "aci"}, default "one_sided"
        The update rule.
    gamma : float, default 0.95
        Smoothing weight for ``one_sided`` and ``eq11_as_printed``; ignored by ``aci``.
    eta : float, default 0.05
        Step size for ``aci``; ignored otherwise.
    alpha : float, default 0.10
        Target miscoverage for ``aci``; ignored otherwise.

    Returns
    -------
    float
        The next threshold Q_{t+1}.

    Reference: [fayyazi2025facter], [gibbs2021aci] (docs/references.bib).
    """
    q, s = float(q), float(s)
    if rule == "one_sided":
        return gamma * q + (1.0 - gamma) * s if s > q else q
    if rule == "eq11_as_printed":
        return gamma * q + (1.0 - gamma) * min(q, s)
    if rule == "aci":
        return max(0.0, q + eta * ((1.0 if s > q else 0.0) - alpha))
    raise ValueError(f"unknown threshold_rule {rule!r}; choose one of {', '.join(map(repr, THRESHOLD_RULES))}")


class OnlineThreshold:
    """Stateful threshold Q_t: ``step(S_t)`` returns whether S_t > Q_t and then updates Q.

    Parameters
    ----------
    q0 : float
        Initial threshold (typically the conformal Q0).
    rule : {"one_sided", "eq11_as_printed", "aci"}, default "one_sided"
        The update rule (see :func:`update_threshold`).
    gamma, eta, alpha : float, defaults 0.95, 0.05, 0.10
        Rule parameters passed to :func:`update_threshold`.

    Attributes
    ----------
    q : float
        The current threshold Q_t.

    Examples
    --------
    >>> th = OnlineThreshold(1.0, gamma=0.5)
    >>> [th.step(s) for s in (0.5, 3.0, 1.5, 2.5)], th.q
    ([False, True, False, True], 2.25)

    Reference: [fayyazi2025facter], [gibbs2021aci] (docs/references.bib).
    """

    def __init__(self, q0: float, rule: str = "one_sided", gamma: float = 0.95, eta: float = 0.05, alpha: float = 0.10):
        if rule not in THRESHOLD_RULES:
            raise ValueError(f"unknown threshold_rule {rule!r}; choose one of {', '.join(map(repr, THRESHOLD_RULES))}")
        self.q0 = self.q = float(q0)
        self.rule, self.gamma, self.eta, self.alpha = rule, float(gamma), float(eta), float(alpha)

    def step(self, s: float) -> bool:
        """Flag S_t > Q_t, then update Q_t to Q_{t+1}.

        Parameters
        ----------
        s : float
            The nonconformity score S_t.

        Returns
        -------
        bool
            True if S_t was strictly above the threshold before the update.
        """
        v = bool(float(s) > self.q)
        self.q = update_threshold(self.q, s, self.rule, self.gamma, self.eta, self.alpha)
        return v


def threshold_path(
    q0: float,
    scores: Sequence[float],
    rule: str = "one_sided",
    gamma: float = 0.95,
    eta: float = 0.05,
    alpha: float = 0.10,
):
    """Run a rule over a score stream -> (violation flags, Q before each step, final Q).

    Parameters
    ----------
    q0 : float
        Initial threshold.
    scores : sequence of float
        The score stream S_1, ..., S_T, in order.
    rule : {"one_sided", "eq11_as_printed", "aci"}, default "one_sided"
        The update rule (see :func:`update_threshold`).
    gamma, eta, alpha : float, defaults 0.95, 0.05, 0.10
        Rule parameters passed to :func:`update_threshold`.

    Returns
    -------
    flags : numpy.ndarray of bool, shape (T,)
        True where S_t > Q_t.
    before : numpy.ndarray of float64, shape (T,)
        The threshold Q_t in force at each step (before its update).
    q_final : float
        The threshold after the last step.

    Examples
    --------
    >>> v, qs, qf = threshold_path(1.0, [2.0, 0.0], gamma=0.5)
    >>> v.tolist(), qs.tolist(), qf
    ([True, False], [1.0, 1.5], 1.5)
    """
    th = OnlineThreshold(q0, rule, gamma, eta, alpha)
    flags, before = [], []
    for s in scores:
        before.append(th.q)
        flags.append(th.step(s))
    return np.array(flags, dtype=bool), np.array(before, dtype=np.float64), th.q
