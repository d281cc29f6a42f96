"""Estimating the per-user gap from a random experiment (Prost et al. 2022, §4, eq. 1; docs/SIMPSON.md §2).

Each user is shown one uniformly drawn item; O_s = users whose shown item is relevant and of
group s.  With user variables V:

    w_s(v) = P(V = v) / P(V = v | Rel = 1, S = s) = P(Rel = 1 | S = s) / P(Rel = 1 | V = v, S = s)

- ``"counts"``: V discretised into cells (10 quantile bins of ``x = U . mu_1/|mu_1|``), the
  probabilities are cell frequencies;
- ``"model"``: h_s(v) ~ P(Rel = 1 | V = v, S = s) from a scikit-learn logistic regression on the
  random-experiment rows of group s (features: the user embedding U), w = rate_s / max(h_s, 1e-3).

- ``"oracle"`` (simulation only): the true propensities, w = 1/n_s(u) with n_s(u) the user's
  number of relevant items of group s (P(Rel = 1 | u, S = s) = n_s(u)/M_s).  Its estimand is
  :func:`facterlab.simpson.gaps.ips_estimand` (mean e_0 over users with n_0 >= 1 minus mean e_1 over
  users with n_1 >= 1): it differs from the PerUserGap whenever some users lack one group.
- ``"oracle_both"`` (simulation only): the same weights restricted to users with relevant items of
  both groups (U*); its estimand is the PerUserGap itself (matching theorem).

Estimate = self-normalised weighted mean exposure over O_0 minus the same over O_1.
The naive (unweighted) difference estimates the AggregateGap instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from facterlab.blas import one_thread

IPS_METHODS = ("counts", "model", "oracle", "oracle_both")


@dataclass
class Estimate:
    """An estimated gap with its two group means and the numbers of observed relevant users."""

    value: float
    mean_0: float
    mean_1: float
    n_0: int
    n_1: int
    method: str
    missing_reason: str | None = None


def _observed(exp, s):
    return np.asarray(exp.relevant, bool) & (np.asarray(exp.group) == s)


def naive_estimate(exp) -> Estimate:
    """Naive estimate: mean Exp over O_0 minus mean Exp over O_1 (unbiased for the AggregateGap).

    >>> from types import SimpleNamespace as NS
    >>> e = NS(relevant=np.array([1, 1, 1, 0]), group=np.array([0, 1, 1, 0]), exposure=np.array([0.5, 1.0, 0.2, 9.0]))
    >>> naive_estimate(e).value
    -0.09999999999999998

    Reference: [prost2022simpson] (docs/references.bib).
    """
    return _weighted(exp, np.ones(len(exp.exposure)), "naive")


def _weighted(exp, w, method) -> Estimate:
    e = np.asarray(exp.exposure, dtype=float)
    means, ns = [], []
    for s in (0, 1):
        o = _observed(exp, s)
        ns.append(int(o.sum()))
        means.append(float(np.sum(w[o] * e[o]) / np.sum(w[o])) if o.any() else float("nan"))
    if min(ns) == 0:
        return Estimate(
            float("nan"),
            means[0],
            means[1],
            ns[0],
            ns[1],
            method,
            f"no observed relevant item of group {0 if ns[0] == 0 else 1}",
        )
    return Estimate(means[0] - means[1], means[0], means[1], ns[0], ns[1], method)


def weighted_estimate(exp, weights, method: str = "ips_given") -> Estimate:
    """Self-normalised IPS estimate with given weights (one per row of ``exp``; only the observed
    relevant rows' weights are used): ``sum_{O_0} w e / sum_{O_0} w - sum_{O_1} w e / sum_{O_1} w``.
    A NaN or negative weight on an observed row is an error; a group whose observed weights are all 0
    gives a missing value with its reason.

    >>> from types import SimpleNamespace as NS
    >>> e = NS(relevant=np.array([1, 1, 1]), group=np.array([0, 0, 1]), exposure=np.array([1.0, 0.5, 0.25]))
    >>> weighted_estimate(e, np.array([1.0, 3.0, 2.0])).value  # (1 + 1.5)/4 - 0.25
    0.375
    """
    w = np.asarray(weights, dtype=float)
    if w.shape != (len(exp.exposure),):
        raise ValueError(f"weights must have one entry per row ({len(exp.exposure)}), got shape {w.shape}")
    obs = _observed(exp, 0) | _observed(exp, 1)
    if np.any(~np.isfinite(w[obs])) or np.any(w[obs] < 0):
        raise ValueError("weights must be finite and >= 0 on the observed relevant rows")
    for s in (0, 1):
        o = _observed(exp, s)
        if o.any() and not np.any(w[o] > 0):
            n0, n1 = int(_observed(exp, 0).sum()), int(_observed(exp, 1).sum())
            return Estimate(float("nan"), float("nan"), float("nan"), n0, n1, method,
                            f"every observed group-{s} row has weight 0")  # fmt: skip
    return _weighted(exp, np.where(obs, w, 0.0), method)


def quantile_cells(x, n_bins: int = 10) -> np.ndarray:
    """Cell index 0..n_bins-1 of each value: quantile bins of x over all users.

    >>> quantile_cells(np.arange(10.0), 5).tolist()
    [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    """
    x = np.asarray(x, dtype=float)
    if n_bins < 1:
        raise ValueError("n_bins must be >= 1")
    edges = np.quantile(x, np.linspace(0, 1, n_bins + 1)[1:-1])
    return np.searchsorted(edges, x, side="right")


def weights_counts(exp, n_bins: int = 10, cells=None) -> np.ndarray:
    """w_s(c) = P(Rel=1 | S=s) / P(Rel=1 | cell=c, S=s) from cell frequencies; NaN outside O_0 and O_1.

    ``cells`` overrides the default cells (quantile bins of ``exp.user_feature``).
    """
    c = quantile_cells(exp.user_feature, n_bins) if cells is None else np.asarray(cells)
    k = int(c.max()) + 1
    rel = np.asarray(exp.relevant, bool)
    grp = np.asarray(exp.group)
    w = np.full(len(rel), np.nan)
    for s in (0, 1):
        in_s = grp == s
        if not in_s.any():
            continue
        rate = rel[in_s].mean()
        shown = np.bincount(c[in_s], minlength=k)
        hits = np.bincount(c[in_s & rel], minlength=k)
        h = np.divide(hits, shown, out=np.zeros(k), where=shown > 0)
        o = in_s & rel
        w[o] = rate / h[c[o]]
    return w


def weights_model(exp, floor: float = 1e-3, features: str = "embedding", C: float = 1.0) -> np.ndarray:
    """w_s(v) = rate_s / max(h_s(v), floor), h_s a logistic regression of Rel on V over group-s rows.

    ``features``: ``"embedding"`` (the user vector U, default) or ``"scalar"`` (``x = U . mu_1/|mu_1|``).

    Reference: [prost2022simpson] (docs/references.bib).
    """
    from sklearn.linear_model import LogisticRegression

    if features == "embedding":
        X = np.asarray(exp.user_embedding, dtype=float)
    elif features == "scalar":
        X = np.asarray(exp.user_feature, dtype=float)[:, None]
    else:
        raise ValueError(f"unknown features {features!r}; choose 'embedding' or 'scalar'")
    rel = np.asarray(exp.relevant, bool)
    grp = np.asarray(exp.group)
    w = np.full(len(rel), np.nan)
    for s in (0, 1):
        in_s = grp == s
        y = rel[in_s]
        if y.all() or not y.any():
            continue  # one class only: O_s is empty or the model is degenerate; estimate reports it
        o = in_s & rel
        with one_thread():  # 8 features: one BLAS thread is several times faster on a busy machine (facterlab.blas)
            model = LogisticRegression(C=C, max_iter=1000).fit(X[in_s], y)
            h = model.predict_proba(X[o])[:, 1]
        w[o] = y.mean() / np.maximum(h, floor)
    return w


def weights_oracle(exp, both_groups_only: bool = False) -> np.ndarray:
    """w_s(u) = 1/n_s(u), the true inverse propensity (up to a constant) of a relevant group-s item;
    NaN outside O_0 and O_1.  Needs the true counts ``exp.n_relevant_0`` and ``exp.n_relevant_1``
    (a simulation knows them; a real experiment does not).  ``both_groups_only`` sets w = 0 for
    users without relevant items of both groups.

    >>> from types import SimpleNamespace as NS
    >>> e = NS(relevant=np.array([1, 1, 0]), group=np.array([0, 1, 1]), n_relevant_0=np.array([2, 4, 1]),
    ...        n_relevant_1=np.array([0, 5, 3]))
    >>> weights_oracle(e).tolist(), weights_oracle(e, both_groups_only=True).tolist()
    ([0.5, 0.2, nan], [0.0, 0.2, nan])
    """
    n0 = getattr(exp, "n_relevant_0", None)
    n1 = getattr(exp, "n_relevant_1", None)
    if n0 is None or n1 is None:
        raise ValueError("oracle weights need the true counts n_relevant_0 / n_relevant_1 (known only in a simulation)")
    n0, n1 = np.asarray(n0), np.asarray(n1)
    rel = np.asarray(exp.relevant, bool)
    grp = np.asarray(exp.group)
    w = np.full(len(rel), np.nan)
    for s, ns in ((0, n0), (1, n1)):
        o = rel & (grp == s)
        if np.any(ns[o] < 1):
            raise ValueError(
                f"an observed relevant group-{s} item belongs to a user with n_{s}(u) = 0: counts do not match"
            )
        w[o] = 1.0 / ns[o]
    if both_groups_only:
        o = rel & ~np.isnan(w)
        w[o & ((n0 < 1) | (n1 < 1))] = 0.0
    return w


def ips_estimate(
    exp, method: str = "counts", n_bins: int = 10, floor: float = 1e-3, features: str = "embedding"
) -> Estimate:
    """Self-normalised IPS estimate of the per-user gap from a random experiment (paper eq. 1).

    With :math:`O_s` the users whose shown item is relevant and of group :math:`s`, :math:`e` its exposure
    and :math:`w` its weight (the inverse of how likely a random shown item is a relevant one of that
    group for that user, estimated as ``method`` says), the estimate is
    :math:`\\sum_{O_0} w e / \\sum_{O_0} w - \\sum_{O_1} w e / \\sum_{O_1} w`
    (docs/SIMPSON.md §2).  When the weights of a group are undefined or all zero, the value is NaN and
    ``missing_reason`` says why.

    Parameters
    ----------
    exp : RandomExperiment
        One uniformly drawn shown item per user (:func:`~facterlab.simpson.random_experiment`), or any
        object with the arrays ``relevant``, ``group``, ``exposure`` and ``user_feature`` (the
        ``model`` method also reads ``user_embedding``, ``oracle`` the true counts ``n_relevant_0/1``).
    method : str, default "counts"
        The weights: ``"counts"`` (cells of the user feature, :func:`weights_counts`), ``"model"``
        (a logistic model, :func:`weights_model`), ``"oracle"`` or ``"oracle_both"`` (the true counts,
        :func:`weights_oracle`).
    n_bins : int, default 10
        Cells of the user feature (``counts``).
    floor : float, default 1e-3
        Smallest modelled probability (``model``).
    features : str, default "embedding"
        What the logistic model reads (``model``).

    Returns
    -------
    Estimate
        ``value`` (the estimated per-user gap), the two weighted group means and the numbers of
        observed relevant users of each group.

    See Also
    --------
    naive_estimate : the unweighted difference, unbiased for the aggregate gap instead.
    facterlab.simpson.gaps_from_table : the exact gaps when every position and relevance is known.
    facterlab.simpson.audit : the gaps and these estimates from your own exposure log.

    Examples
    --------
    A simulated world with a bias against group 1, where the exact per-user gap is known, and one
    random shown item per user:

    >>> from facterlab.simpson import (SimpsonConfig, aggregate_gap, ips_estimate, naive_estimate,
    ...                                per_user_gap, random_experiment, simulate)
    >>> sim = simulate(SimpsonConfig(n_users=2000, bias=1.0, seed=0))
    >>> exp = random_experiment(sim)
    >>> round(per_user_gap(sim.stats).value, 3), round(aggregate_gap(sim.stats).value, 3)  # the truth
    (-0.309, -0.25)
    >>> est = ips_estimate(exp, "counts")
    >>> round(est.value, 3), est.n_0, est.n_1, est.method
    (-0.279, 212, 208, 'ips_counts')
    >>> round(ips_estimate(exp, "oracle").value, 3), round(naive_estimate(exp).value, 3)
    (-0.293, -0.238)

    By hand: the user feature's second cell is half as likely relevant as the first, so its shown item
    gets twice the weight (4/3 against 2/3):

    >>> from types import SimpleNamespace as NS
    >>> e = NS(relevant=np.array([1, 1, 0, 1, 1, 0]), group=np.array([0, 0, 0, 1, 1, 1]),
    ...        exposure=np.array([1.0, 0.5, 0.0, 0.5, 0.25, 0.0]), user_feature=np.array([0, 1, 1, 0, 1, 1.0]))
    >>> # cell 1 is half as likely relevant as cell 0: its item gets twice the weight (4/3 vs 2/3)
    >>> round(ips_estimate(e, "counts", n_bins=2).value, 12), naive_estimate(e).value  # (2/3 - 1/3) vs (3/4 - 3/8)
    (0.333333333333, 0.375)

    Reference: [horvitz1952ips], [prost2022simpson] (docs/references.bib).
    """
    if method == "counts":
        w = weights_counts(exp, n_bins)
    elif method == "model":
        w = weights_model(exp, floor, features)
    elif method in ("oracle", "oracle_both"):
        w = weights_oracle(exp, both_groups_only=method == "oracle_both")
    else:
        raise ValueError(f"unknown IPS method {method!r}; choose one of {', '.join(IPS_METHODS)}")
    for s in (0, 1):
        o = _observed(exp, s)
        if o.any() and np.isnan(w[o]).any():
            return Estimate(
                float("nan"),
                float("nan"),
                float("nan"),
                int(_observed(exp, 0).sum()),
                int(_observed(exp, 1).sum()),
                method,
                f"weights undefined for group {s} (relevance constant among its shown rows)",
            )
    est = _weighted(exp, np.nan_to_num(w), f"ips_{method}")
    for s in (0, 1):
        o = _observed(exp, s)
        if o.any() and not np.any(w[o] > 0):
            return Estimate(
                float("nan"),
                float("nan"),
                float("nan"),
                est.n_0,
                est.n_1,
                est.method,
                f"every observed group-{s} row has weight 0",
            )
    return est
