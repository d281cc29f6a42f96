"""Group fairness of recommendation lists: SNSR / SNSV, two named variants (docs/FACTER.md §4).

``snsr_proxy`` (REPRO and ORIG code; the variant in our tables):
  1. per row i, ``m_i = normalise(mean of its top-k item embeddings)``
     (:func:`facterlab.metrics.embeddings.normalised_row_means`);
  2. per group g (a value of one attribute, or the joint (gender, age, occupation) tuple) with at least
     ``min_group`` rows, the centroid ``c_g = normalise(mean_{i in g} m_i)``;
  3. pairwise cosine distances ``D_gh = 1 - c_g . c_h`` over the qualifying groups;
  4. ``SNSR = max_{g<h} D_gh``, ``SNSV = mean_{g<h} D_gh``.

  Fewer than two qualifying groups: the value is missing, with the reason (never 0).

``snsr_fairllm`` (Zhang et al. 2023, FaiRLLM):
  per attribute value v, ``sim_v = mean_u Jaccard@k(L_u^v, L_u^neutral)`` over sampled users u, with
  ``Jaccard@k(A, B) = |A_k ∩ B_k| / |A_k ∪ B_k|`` on the sets of the top-k items;
  ``SNSR = max_v sim_v - min_v sim_v``, ``SNSV = sqrt(mean_v (sim_v - mean sim)^2)`` (population std).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import numpy as np
import pandas as pd

from facterlab.config import SNSR_EMPTY_ROWS
from facterlab.data.dataset import PROTECTED
from facterlab.metrics.embeddings import as_row_vectors, normalise_rows
from facterlab.metrics.ranking import is_unmapped

ERR_ROWS = "got {n_emb} row embeddings but {n_groups} rows of group attributes: they must be aligned"
ERR_COLUMNS = "groups is missing the attribute column(s) {missing}"
ERR_NA = "attribute {attr!r} has missing values in {n} row(s); fill or drop them first"

#: rows without a mapped item in SNSR: "drop" (facterlab) | "zero" (REPRO: kept as zero vectors)
EMPTY_ROWS = SNSR_EMPTY_ROWS  # the config owns the vocabulary (metrics.snsr_empty_rows)

__all__ = ["EMPTY_ROWS", "snsr_proxy", "group_centroids", "snsr_fairllm", "jaccard_at_k", "PROTECTED"]


def _label(key, attrs) -> str:
    if len(attrs) == 1:
        return str(key[0] if isinstance(key, tuple) else key)
    return ", ".join(f"{a}={v}" for a, v in zip(attrs, key))


def group_centroids(row_vectors: np.ndarray, groups: pd.DataFrame, attrs: Sequence[str]) -> tuple:
    """Normalised group means of row vectors: ``c_g = normalise(mean_{i in g} m_i)`` (docs/FACTER.md §4).

    Returns ``(labels, sizes, centroids)`` for every group present (sorted by label), where a group is
    a distinct value tuple of ``attrs``.  Rows whose vector is NaN must be dropped by the caller.

    Parameters
    ----------
    row_vectors : numpy.ndarray
        Shape (n, d), one vector per row (no NaN).
    groups : pandas.DataFrame
        The ``attrs`` columns, aligned with the rows.
    attrs : sequence of str
        The attributes whose value tuple defines a group.

    Returns
    -------
    tuple
        ``(labels, sizes, centroids)``: group labels (sorted), their row counts and unit-norm centroids.

    Examples
    --------
    >>> g = pd.DataFrame({"gender": ["M", "F", "M"]})
    >>> labels, sizes, c = group_centroids(np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]]), g, ["gender"])
    >>> labels, sizes.tolist(), c.round(4).tolist()
    (['F', 'M'], [1, 2], [[0.0, 1.0], [0.7071, 0.7071]])
    """
    attrs = list(attrs)
    df = pd.DataFrame(np.asarray(row_vectors, dtype=np.float64))
    keys = groups[attrs].astype(str).reset_index(drop=True)
    grouped = df.groupby([keys[a] for a in attrs], sort=True)
    means = grouped.mean()
    sizes = grouped.size().to_numpy()
    labels = [_label(k if isinstance(k, tuple) else (k,), attrs) for k in means.index]
    return labels, sizes, normalise_rows(means.to_numpy())


def _pairwise(centroids: np.ndarray) -> np.ndarray:
    sim = np.clip(centroids @ centroids.T, -1.0, 1.0)
    iu = np.triu_indices(len(centroids), k=1)
    return 1.0 - sim[iu]


def _one_snsr(vecs: np.ndarray, groups: pd.DataFrame, attrs, min_group: int, name: str) -> dict:
    labels, sizes, cents = group_centroids(vecs, groups, attrs)
    q = sizes >= min_group
    if q.sum() < 2:
        order = np.argsort(-sizes, kind="stable")
        shown = ", ".join(f"{labels[i]}: {sizes[i]}" for i in order[:10])
        more = f", and {len(labels) - 10} smaller groups" if len(labels) > 10 else ""
        reason = (
            f"snsr_proxy[{name}]: {int(q.sum())} group(s) have at least min_group={min_group} rows, "
            f"two are needed; rows per group ({len(labels)} groups, {int(sizes.sum())} rows): "
            f"{shown}{more}"
        )
        return {
            "value": None,
            "missing_reason": reason,
            "n_groups": int(q.sum()),
            "group_sizes": {labels[i]: int(sizes[i]) for i in order},
        }
    d = _pairwise(cents[q])
    return {
        "snsr": float(d.max()),
        "snsv": float(d.mean()),
        "n_groups": int(q.sum()),
        "group_sizes": {lab: int(s) for lab, s, ok in zip(labels, sizes, q) if ok},
        "n_groups_excluded": int((~q).sum()),
        "n_rows": int(sizes[q].sum()),
    }


def snsr_proxy(
    row_embeddings: np.ndarray,
    groups: pd.DataFrame,
    min_group: int = 30,
    attrs: Sequence[str] = PROTECTED,
    mask: np.ndarray | None = None,
    empty_rows: str = "drop",
) -> dict:
    """SNSR and SNSV of the ``snsr_proxy`` variant: the largest and the mean cosine distance between the
    groups' recommendation centroids (docs/FACTER.md §4; the formulas: module docstring).

    ``row_embeddings``: (n, d) per-row vectors (normalised means; re-normalised here), or (n, k, d)
    item embeddings with an optional (n, k) ``mask``.  ``groups``: DataFrame with the ``attrs`` columns,
    aligned with the rows.  Rows without an embedding (NaN: no item mapped) are, with
    ``empty_rows="drop"``, dropped and counted (``n_rows_dropped``); with ``empty_rows="zero"`` (REPRO's
    code) kept as zero vectors (``n_rows_zero``): they add nothing to a group's centroid direction but
    count towards its size, so they can lift a group over ``min_group``.  Returns ``{"joint": r, "gender": r, "age": r, "occupation": r}`` (one key
    per entry of ``attrs``) with ``r = {"snsr", "snsv", "n_groups", "group_sizes" (qualifying groups),
    "n_groups_excluded", "n_rows", "min_group", "n_rows_dropped"}`` or, when fewer than two groups
    reach ``min_group`` rows, ``r = {"value": None, "missing_reason", "n_groups", "group_sizes" (all
    groups), "min_group", "n_rows_dropped"}``.

    Parameters
    ----------
    row_embeddings : numpy.ndarray
        (n, d) per-row vectors or (n, k, d) item embeddings.
    groups : pandas.DataFrame
        The ``attrs`` columns, aligned with the rows.
    min_group : int, default 30
        Smallest group that counts.
    attrs : sequence of str, default PROTECTED
        One result per attribute, plus ``joint``.
    mask : numpy.ndarray of bool, optional
        (n, k) positions that exist, for item embeddings.
    empty_rows : {"drop", "zero"}, default "drop"
        What a row without an embedding becomes (above).

    Returns
    -------
    dict
        ``{"joint": r, <attr>: r, ...}`` with ``r`` as described above.

    Examples
    --------
    >>> emb = np.array([[1.0, 0.0]] * 2 + [[0.0, 1.0]] * 2)
    >>> g = pd.DataFrame({"gender": ["M", "M", "F", "F"], "age": ["18-24"] * 4, "occupation": ["x"] * 4})
    >>> out = snsr_proxy(emb, g, min_group=2)
    >>> out["gender"]["snsr"], out["joint"]["snsv"]
    (1.0, 1.0)
    >>> out["age"]["value"] is None
    True

    Reference: [fayyazi2025facter], [zhang2023fairllm] (docs/references.bib).
    """
    if isinstance(min_group, bool) or not isinstance(min_group, (int, np.integer)) or min_group < 1:
        raise ValueError(f"min_group must be a positive integer, got {min_group!r}")
    vecs = as_row_vectors(row_embeddings, mask)
    if not isinstance(groups, pd.DataFrame):
        raise ValueError("groups must be a DataFrame with the attribute columns")
    if len(groups) != len(vecs):
        raise ValueError(ERR_ROWS.format(n_emb=len(vecs), n_groups=len(groups)))
    attrs = list(attrs)
    missing = [a for a in attrs if a not in groups.columns]
    if missing:
        raise ValueError(ERR_COLUMNS.format(missing=missing))
    for a in attrs:
        n_na = int(groups[a].isna().sum())
        if n_na:
            raise ValueError(ERR_NA.format(attr=a, n=n_na))
    if empty_rows not in EMPTY_ROWS:
        raise ValueError(f"empty_rows must be one of {EMPTY_ROWS}, got {empty_rows!r}")
    empty = np.isnan(vecs).any(axis=1)
    if empty_rows == "zero":  # REPRO: a row with no mapped item is a zero vector, kept in its group
        vecs = np.where(empty[:, None], 0.0, vecs)
        ok = np.ones(len(vecs), dtype=bool)
    else:
        ok = ~empty
    vecs = vecs[ok]
    g = groups.reset_index(drop=True)[ok]
    out = {"joint": _one_snsr(vecs, g, attrs, min_group, "joint")}
    for a in attrs:
        out[a] = _one_snsr(vecs, g, [a], min_group, a)
    for block in out.values():
        block["min_group"] = int(min_group)
        block["n_rows_dropped"] = int((~ok).sum())
        if empty_rows == "zero":
            block["n_rows_zero"] = int(empty.sum())
    return out


def _topk_set(lst, k: int) -> set:
    return {x for x in list(lst)[:k] if not is_unmapped(x)}


def jaccard_at_k(a: Sequence[Hashable], b: Sequence[Hashable], k: int = 10) -> float:
    """``Jaccard@k = |A_k ∩ B_k| / |A_k ∪ B_k|`` on the sets of the top-k items (unmapped ignored).

    NaN when both top-k sets are empty (undefined).

    Parameters
    ----------
    a, b : sequence of hashable
        Two ranked lists (unmapped positions ignored).
    k : int, default 10
        Cut-off.

    Returns
    -------
    float
        Jaccard similarity of the two top-k sets, NaN when both are empty.

    Examples
    --------
    >>> jaccard_at_k([1, 2, 3], [3, 2, 9], k=3)
    0.5
    >>> jaccard_at_k([1, 2, 3], [3, 2, 9], k=1)
    0.0

    Reference: [zhang2023fairllm] (docs/references.bib).
    """
    sa, sb = _topk_set(a, k), _topk_set(b, k)
    union = sa | sb
    if not union:
        return float("nan")
    return len(sa & sb) / len(union)


def snsr_fairllm(
    lists_by_value: Mapping[str, Mapping[str, Sequence[Sequence[Hashable]]]],
    neutral_lists: Sequence[Sequence[Hashable]],
    k: int = 10,
) -> dict:
    """SNSR/SNSV, ``snsr_fairllm`` variant (Zhang et al. 2023; docs/FACTER.md §4).

    ``lists_by_value[attr][value]`` holds one ranked list per sampled user, aligned with
    ``neutral_lists`` (that user's list under the prompt without the attribute block).  Per value,
    ``sim_v`` is the mean of :func:`jaccard_at_k` over users (pairs where both lists are empty are
    undefined and dropped, counted in ``n_undefined``); ``SNSR = max_v sim_v - min_v sim_v``,
    ``SNSV`` = population std of ``sim_v``.  Returns ``{attr: {"snsr", "snsv", "n_values",
    "similarity": {value: sim_v}, "n_users", "n_undefined"}}``, or ``{attr: {"value": None,
    "missing_reason"}}`` when fewer than two values have a defined similarity.

    Parameters
    ----------
    lists_by_value : mapping of str to mapping of str to lists
        ``lists_by_value[attr][value]``: one ranked list per sampled user.
    neutral_lists : sequence of sequences of hashable
        Each user's list under the prompt without attributes, aligned with the above.
    k : int, default 10
        Cut-off of :func:`jaccard_at_k`.

    Returns
    -------
    dict
        ``{attr: {"snsr", "snsv", "n_values", "similarity", "n_users", "n_undefined"}}`` or a missing value
        per attribute (above).

    Examples
    --------
    >>> neutral = [[1, 2], [3, 4]]
    >>> out = snsr_fairllm({"gender": {"M": [[1, 2], [3, 4]], "F": [[1, 9], [3, 4]]}}, neutral, k=2)
    >>> out["gender"]["similarity"], round(out["gender"]["snsr"], 6), round(out["gender"]["snsv"], 6)
    ({'M': 1.0, 'F': 0.6666666666666666}, 0.333333, 0.166667)

    Reference: [zhang2023fairllm] (docs/references.bib).
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    neutral_lists = list(neutral_lists)
    out: dict = {}
    for attr, by_value in lists_by_value.items():
        sims, n_undef = {}, 0
        for value, lists in by_value.items():
            lists = list(lists)
            if len(lists) != len(neutral_lists):
                raise ValueError(
                    f"snsr_fairllm: {attr}={value} has {len(lists)} lists but there are "
                    f"{len(neutral_lists)} neutral lists; they must be aligned per user"
                )
            j = np.array([jaccard_at_k(a, b, k) for a, b in zip(lists, neutral_lists)], dtype=np.float64)
            defined = ~np.isnan(j)
            n_undef += int((~defined).sum())
            if defined.any():
                sims[str(value)] = float(j[defined].mean())
        if len(sims) < 2:
            out[attr] = {
                "value": None,
                "missing_reason": (
                    f"snsr_fairllm[{attr}]: {len(sims)} value(s) with a defined Jaccard similarity, two are "
                    f"needed ({len(by_value)} values given, {len(neutral_lists)} users, {n_undef} undefined pairs)"
                ),
            }
            continue
        v = np.array(list(sims.values()))
        out[attr] = {
            "snsr": float(v.max() - v.min()),
            "snsv": float(v.std(ddof=0)),
            "n_values": len(sims),
            "similarity": sims,
            "n_users": len(neutral_lists),
            "n_undefined": n_undef,
        }
    return out
