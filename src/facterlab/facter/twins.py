"""Counterfactual twins and the null-anchored threshold: a facterlab extension (docs/FACTER.md §7).

Neither FACTER nor REPRO does this; the ``repro`` and ``icml`` presets keep FACTER's neighbour Delta.

**Twin Delta** (``facter.delta = "twin"``).  FACTER's penalty compares a row's answer with the answers
of *other users* whose context is similar (cosine > tau_rho) and whose protected tuple differs: on
MovieLens most rows have no such neighbour, and where one exists Delta compares two users' films.  The
twin asks the recommender the *same* question again with only the protected attributes flipped: same
history, same candidates, same sampling seed, under the system prompt the twin's group would get (its
own rules).  Then

    Delta_i = ||f(yhat_i) - f(yhat_twin_i)||_2,      S_i = d_i + lambda * Delta_i

and Delta_i > 0 means the demographics (directly, or through the rules they select) changed the answer.
f is the top-1 item's representation (``facter.twin_distance = "top1"``, FACTER's), or the rank-weighted mean
of the representations of the whole top-k list (``"list"``: :func:`answer_vectors`, :func:`statistic_distance`),
which also sees a twin whose top-1 stayed and whose list moved; placebos are measured the same way.

**Null-anchored threshold** (``facter.threshold = "null"``, needs the twin).  The conformal Q0 is a
quantile of the biased model's own scores, so it flags about alpha of the rows whatever the bias.  A
fairness test needs a threshold anchored at "demographics change nothing beyond what an irrelevant edit
of the prompt does".  We calibrate it on *placebo* twins (:func:`placebo_request`,
:data:`PLACEBO_EDITS`): each calibration row is asked again with its demographics block changed without
changing any value's meaning, under the same prompt and seed.  The null is the **placebo family**
(``facter.placebo = "family"``, the default): three edits per row, the values reworded (``reword``), an
irrelevant line added (``field``), the lines in reverse order (``order``), and the row's placebo
distance is the **largest** of the three, M_i.  (A single edit can be chosen; the reversed order
alone, facterlab's placebo before the family, is defeated by a model that reads the demographics as a
set of lines.)  With

    Q_null = M_(ceil((n+1)(1-alpha)))  (+ null_tol),      flag  <=>  Delta_t > Q_null,

the split-conformal argument gives: if, for row t, the twin distance D_t is no larger in law than the
placebo distance of *some* edit of the family (the null hypothesis H0), and rows are exchangeable, then
P(D_t > Q_null) <= alpha (the maximum only makes M_t larger).  For a recommender whose answer is a
function of (history, seed, demographics) and which ignores the demographics and the prompt's surface
(the fields-reading simulator at beta = 0, greedy decoding), every distance is exactly 0 and the flag
never fires: the claims report that case "by construction".  The proof and the assumption are written
out in docs/FACTER.md §7.2.

**What the flag answers.**  The flag and its bound test *row-level counterfactual dependence*: "does this
user's answer depend on their demographics (more than an irrelevant edit moves it)?"  They do not test
*group-level directional bias*, "is some group systematically pushed?": a model that answers as a
random function of who the user is, preferring no group, is rightly flagged (the text simulator's
``semantic`` case).  The directional question is answered by :mod:`facterlab.facter.directional`: per
(attribute value, feature) cell an exact two-sided McNemar test on the twin pairs, Holm over the cells
(confirmed mining, :mod:`facterlab.facter.repair`, uses the same test to make rules; docs/FACTER.md §7).

The twin costs one extra recommender request per scored row; with the null threshold each calibration
row also gets its placebos (three with the family); all of it times ``facter.draws``.  The pipeline counts
and reports them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from facterlab.data.dataset import PROTECTED
from facterlab.data.wording import attribute_of_label, has_rewording, reword
from facterlab.datatypes import PromptRequest
from facterlab.facter.conformal import ConformalThreshold
from facterlab.metrics import flip_attributes

__all__ = [
    "twin_attributes",
    "twin_row",
    "reworded_twins",
    "placebo_request",
    "placebo_requests",
    "PLACEBO_EDITS",
    "draw_seed",
    "with_draws",
    "mean_over_draws",
    "twin_distance",
    "rank_weights",
    "answer_vectors",
    "top1_part",
    "statistic_distance",
    "NullThreshold",
    "null_threshold",
]

#: the rng stream of the twins' flips (one fixed draw per row and run seed)
_TWIN_STREAM = 11


def twin_attributes(rows: pd.DataFrame, attribute_values: Mapping, strategy: str = "distinct", seed: int = 0) -> list:
    """The flipped protected attributes of each row's twin (every attribute of ``attribute_values`` changed,
    drawn once per row from ``(seed, 11)`` with :func:`facterlab.metrics.flip_attributes`).

    Parameters
    ----------
    rows : pandas.DataFrame
        Rows with the protected-attribute columns (the keys of ``attribute_values``).
    attribute_values : mapping of str to sequence of str
        Every value of each attribute, in canonical order (``Dataset.attribute_values``); its keys are
        the attributes flipped.  A twin's value is drawn among the attribute's observed values, so a
        missing value (imported as its own value, e.g. ``"unknown"``) flips like any other.
    strategy : {"distinct", "minimal", "repro"}, default "distinct"
        How a counterfactual value is chosen (see :func:`facterlab.metrics.flip_attributes`);
        ``"minimal"`` draws nothing.
    seed : int, default 0
        Run seed of the random draw (unused with ``"minimal"``).

    Returns
    -------
    list of dict
        One ``{attr: value}`` dict (values as str) per row, in row order.

    Examples
    --------
    >>> vals = {"gender": ["M", "F"], "age": ["18-24", "56+"], "occupation": ["a", "b"]}
    >>> rows = pd.DataFrame({"gender": ["M"], "age": ["56+"], "occupation": ["a"]})
    >>> twin_attributes(rows, vals, "minimal")
    [{'gender': 'F', 'age': '18-24', 'occupation': 'b'}]
    """
    attrs = tuple(attribute_values)
    flipped = flip_attributes(
        rows[list(attrs)].astype(str),
        attribute_values,
        strategy,
        attrs=attrs,
        rng=None if strategy == "minimal" else np.random.default_rng([int(seed), _TWIN_STREAM]),
    )
    return [{a: str(r[a]) for a in attrs} for r in flipped.to_dict("records")]


def reworded_twins(rows: pd.DataFrame, attrs: Sequence[str] = PROTECTED, wordings: Mapping | None = None) -> list:
    """The negative control's twins (``facter.twin = "reword"``): each row's own protected values
    written in other words (:func:`facterlab.data.wording.reword`, style 2: "a woman", "between 25 and
    34", "a writer"), so that the twin's demographics mean the same as the row's.

    >>> reworded_twins(pd.DataFrame({"gender": ["F"], "age": ["25-34"], "occupation": ["writer"]}))
    [{'gender': 'a woman', 'age': 'between 25 and 34', 'occupation': 'a writer'}]
    """
    return [{a: reword(a, str(r[a]), 2, wordings) for a in attrs} for r in rows[list(attrs)].to_dict("records")]


def twin_row(row: Mapping, twin_attrs: Mapping) -> dict:
    """The row as its twin: the same row with the protected attributes replaced.

    Parameters
    ----------
    row : mapping
        The row (all its keys are kept).
    twin_attrs : mapping
        The twin's protected attributes (every one of the dataset's).

    Returns
    -------
    dict
        A new dict; the input is not modified.
    """
    return {**row, **twin_attrs}


_DEMO_BLOCK = re.compile(r"(User demographics:\n)((?:- [^\n]*\n?)+)")

#: the placebo family of ``facter.placebo = "family"``: each an irrelevant edit of the demographics block
PLACEBO_EDITS = ("reword", "field", "order")
#: the irrelevant field the ``"field"`` placebo adds (its value drawn per request)
PLACEBO_FIELD = "Member number"


def _reword_line(line: str, wordings: Mapping | None = None) -> str:
    label, sep, value = line[2:].partition(":")
    attr = attribute_of_label(label, wordings or ())
    if not sep or attr is None or not has_rewording(attr, wordings):
        return line  # no wording known for this attribute: the line is left as it is (docs/FACTER.md §7)
    return f"- {label}: {reword(attr, value.strip(), 1, wordings)}"


def placebo_request(req: PromptRequest, kind: str = "order", wordings: Mapping | None = None) -> PromptRequest:
    """The request with its "User demographics" block changed in a way that keeps every value's
    meaning (the null threshold's placebo; docs/FACTER.md §7):

    - ``"reword"``: every protected value written in other words (:func:`facterlab.data.wording.reword`:
      "F" -> "woman", "25-34" -> "25 to 34", "writer" -> "author": a synonym, never a case change): the
      same lines change as in the twin, each to a new text of the same meaning (the edit matched to the
      twin's); a value with no known rewording is reported by the run
      (:func:`facterlab.data.wording.missing_rewordings`);
    - ``"field"``: an irrelevant line added, ``- Member number: NNNNN`` (drawn from the request seed);
    - ``"order"``: the lines in reverse order (the placebo of facterlab before the family).

    A request without the block is returned unchanged.

    Parameters
    ----------
    req : PromptRequest
        The request; only its ``user`` messages are changed (the first block in each).
    kind : {"reword", "field", "order"}, default "order"
        The edit.
    wordings : mapping or None, default None
        The dataset's user-supplied wordings (``Dataset.wordings``) for the reword placebo; an attribute
        with neither a built-in vocabulary nor a wording keeps its line unchanged under ``"reword"``.

    Returns
    -------
    PromptRequest
        A copy with the block edited; other fields unchanged.

    Examples
    --------
    >>> r = PromptRequest(messages=(("system", "s"), ("user", "User demographics:\\n- Gender: F\\n- Age: 25-34\\n\\nHistory")))
    >>> placebo_request(r).messages[1][1]
    'User demographics:\\n- Age: 25-34\\n- Gender: F\\n\\nHistory'
    >>> placebo_request(r, "reword").messages[1][1]
    'User demographics:\\n- Gender: woman\\n- Age: 25 to 34\\n\\nHistory'
    >>> placebo_request(r, "field").messages[1][1].splitlines()[3].startswith("- Member number: ")
    True
    """
    if kind not in PLACEBO_EDITS:
        raise ValueError(f"unknown placebo {kind!r}; choose one of {', '.join(map(repr, PLACEBO_EDITS))}")

    def edit(m: re.Match) -> str:
        body = m.group(2)
        tail = "\n" if body.endswith("\n") else ""
        lines = body.rstrip("\n").split("\n")
        if kind == "order":
            lines = list(reversed(lines))
        elif kind == "reword":
            lines = [_reword_line(x, wordings) for x in lines]
        else:
            member = 10_000 + int(hashlib.blake2b(f"field:{req.seed}".encode(), digest_size=4).hexdigest(), 16) % 90_000
            lines = [*lines, f"- {PLACEBO_FIELD}: {member}"]
        return m.group(1) + "\n".join(lines) + tail

    msgs = tuple((r, _DEMO_BLOCK.sub(edit, c, count=1) if r == "user" else c) for r, c in req.messages)
    return replace(req, messages=msgs)


def placebo_requests(req: PromptRequest, placebo: str = "family", wordings: Mapping | None = None) -> list:
    """The placebo requests of ``facter.placebo``: the three of :data:`PLACEBO_EDITS` for ``"family"``,
    else the one edit.

    >>> r = PromptRequest(messages=(("user", "User demographics:\\n- Gender: F\\n\\nHistory"),))
    >>> len(placebo_requests(r)), len(placebo_requests(r, "reword"))
    (3, 1)
    """
    kinds = PLACEBO_EDITS if placebo == "family" else (placebo,)
    return [placebo_request(req, k, wordings) for k in kinds]


def draw_seed(seed: int, draw: int) -> int:
    """The request seed of draw ``draw`` (0-based) of a request with seed ``seed``: draw 0 keeps the seed
    (so ``facter.draws = 1`` asks exactly what it asked before), later draws a hash of both.

    >>> draw_seed(123, 0), draw_seed(123, 1) == draw_seed(123, 1), draw_seed(123, 1) != draw_seed(123, 2)
    (123, True, True)
    """
    if int(draw) == 0:
        return int(seed)
    h = hashlib.blake2b(f"draw:{int(seed)}:{int(draw)}".encode(), digest_size=4).hexdigest()
    return int(h, 16) % (2**31 - 1)


def with_draws(requests: Sequence[PromptRequest], draws: int) -> list:
    """``requests`` repeated ``draws`` times, draw by draw (all of draw 0, then draw 1, ...), each with
    its :func:`draw_seed`.

    >>> rs = with_draws([PromptRequest(messages=(), seed=5)], 2)
    >>> [r.seed for r in rs][0], len(rs)
    (5, 2)
    """
    if draws == 1:
        return list(requests)
    return [replace(r, seed=draw_seed(r.seed, j)) for j in range(int(draws)) for r in requests]


def mean_over_draws(vectors: np.ndarray, draws: int) -> np.ndarray:
    """The mean representation of each request over its draws (rows laid out as :func:`with_draws`):
    with ``draws`` > 1 the twin Delta is the distance of the two means, a linear-kernel MMD between the
    row's and the twin's k answers.

    >>> mean_over_draws(np.array([[0.0, 2.0], [1.0, 1.0], [2.0, 0.0], [3.0, 3.0]]), 2).tolist()
    [[1.0, 1.0], [2.0, 2.0]]
    """
    if draws == 1:
        return vectors  # unchanged (dtype included): one draw asks and answers exactly as before draws existed
    v = np.asarray(vectors, dtype=np.float64)
    n = len(v) // int(draws)
    return v.reshape(int(draws), n, -1).mean(axis=0)


def twin_distance(pred_emb: np.ndarray, twin_emb: np.ndarray) -> np.ndarray:
    """Delta_i = ||p_i - t_i||_2 row-wise, in float64.

    Parameters
    ----------
    pred_emb : numpy.ndarray, shape (n, dim)
        Representations of the rows' predictions.
    twin_emb : numpy.ndarray, shape (n, dim)
        Representations of the twins' predictions; same shape.

    Returns
    -------
    numpy.ndarray of float64, shape (n,)
        The L2 distance of each pair.

    Examples
    --------
    >>> twin_distance(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[1.0, 0.0], [1.0, 0.0]])).round(4).tolist()
    [0.0, 1.4142]
    """
    p = np.asarray(pred_emb, dtype=np.float64)
    t = np.asarray(twin_emb, dtype=np.float64)
    if p.shape != t.shape:
        raise ValueError(f"prediction and twin embeddings differ in shape: {p.shape} vs {t.shape}")
    return np.sqrt(np.einsum("ij,ij->i", p - t, p - t))


def rank_weights(n: int) -> np.ndarray:
    """The weights of list positions 1..n in ``facter.twin_distance = "list"``: the DCG discount
    1 / log2(r + 1), normalised to sum 1 (a rank-weighted mean; docs/FACTER.md §7.2).

    >>> rank_weights(3).round(3).tolist()
    [0.469, 0.296, 0.235]
    """
    if n < 1:
        raise ValueError(f"a list needs at least one position, got {n}")
    w = 1.0 / np.log2(np.arange(2, n + 2, dtype=np.float64))
    return w / w.sum()


def answer_vectors(represent, post: Sequence, preds: Sequence, how: str = "top1") -> np.ndarray:
    """The representation of each answer that the twin Delta compares (``facter.twin_distance``).

    - ``"top1"``: ``represent(top-1 ids, top-1 raw titles)``, FACTER's f(yhat) (exactly as before the option);
    - ``"list"``: the top-1 representation, then (concatenated, shape ``(n, 2 * dim)``) the rank-weighted
      mean of the representations of every position of the answer's list (:func:`rank_weights`; a position
      that maps to no catalogue item is represented by its raw title, as the top-1 is), the zero vector for an
      empty answer.  The top-1 half keeps FACTER's d (:func:`top1_part`); the list half is what
      :func:`statistic_distance` compares.  Row, twin and placebos are all represented so, so Q_null is a
      quantile of the same statistic as the twin distance it bars (the bound of docs/FACTER.md §7.2 holds).

    Rows laid out as the answers (``with_draws`` order); :func:`mean_over_draws` then averages both halves.

    Parameters
    ----------
    represent : callable
        ``represent(ids, raw_titles) -> array (n, dim)`` (``ItemRepresenter.predictions``).
    post : sequence of (list of int, int, str)
        The postprocessed answers (mapped ids per position, -1 unmapped; top-1 id; top-1 raw title).
    preds : sequence of Prediction
        The answers themselves (their ``titles`` give an unmapped position's raw title); same length.
    how : {"top1", "list"}, default "top1"
        The statistic.

    Returns
    -------
    numpy.ndarray, shape (n, dim) or (n, 2 * dim)

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> rep = lambda ids, raws: np.array([[float(i == 1), float(i == 2)] for i in ids])
    >>> post = [([1, 2], 1, "a"), ([1], 1, "a")]
    >>> preds = [SimpleNamespace(titles=["a", "b"]), SimpleNamespace(titles=["a"])]
    >>> answer_vectors(rep, post, preds, "list").round(3).tolist()
    [[1.0, 0.0, 0.613, 0.387], [1.0, 0.0, 1.0, 0.0]]
    """
    if how not in ("top1", "list"):
        raise ValueError(f"unknown twin_distance {how!r}; choose 'top1' or 'list'")
    top = represent([x[1] for x in post], [x[2] for x in post])
    if how == "top1":
        return top
    top = np.asarray(top, dtype=np.float64)
    if len(post) != len(preds):
        raise ValueError(f"{len(post)} postprocessed answers for {len(preds)} predictions")
    ids: list[int] = []
    raws: list[str] = []
    owner: list[int] = []
    weights: list[float] = []
    for i, ((mapped, _, _), pr) in enumerate(zip(post, preds)):
        titles = list(getattr(pr, "titles", ()) or ())
        if not mapped:
            continue
        for r, m in enumerate(mapped):
            ids.append(int(m))
            raws.append(str(titles[r]) if int(m) < 0 and r < len(titles) else "")
            owner.append(i)
        weights.extend(rank_weights(len(mapped)))
    dim = top.shape[1] if top.ndim == 2 else 0
    out = np.zeros((len(post), dim), dtype=np.float64)
    if ids:
        vecs = np.asarray(represent(ids, raws), dtype=np.float64)
        np.add.at(out, np.asarray(owner), vecs * np.asarray(weights)[:, None])
    return np.hstack([top, out])


def top1_part(vectors: np.ndarray, how: str = "top1") -> np.ndarray:
    """The top-1 half of :func:`answer_vectors` (FACTER's f(yhat), for d): the vectors themselves with
    ``"top1"``, their first half with ``"list"``.

    >>> top1_part(np.array([[1.0, 2.0, 3.0, 4.0]]), "list").tolist()
    [[1.0, 2.0]]
    """
    if how == "top1":
        return vectors
    v = np.asarray(vectors)
    return v[..., : v.shape[-1] // 2]


def statistic_distance(a: np.ndarray, b: np.ndarray, how: str = "top1") -> np.ndarray:
    """The twin Delta (or a placebo distance) of ``facter.twin_distance`` between rows of two
    :func:`answer_vectors` arrays: :func:`twin_distance` of the top-1 representations (``"top1"``) or of the
    rank-weighted list means (``"list"``, the second half).

    >>> a, b = np.array([[1.0, 0.0, 1.0, 0.0]]), np.array([[1.0, 0.0, 0.0, 1.0]])
    >>> statistic_distance(a, b, "top1").round(4).tolist(), statistic_distance(a, b, "list").round(4).tolist()
    ([1.4142], [1.4142])
    >>> statistic_distance(a[:, :2], b[:, :2]).tolist()
    [0.0]
    """
    if how == "top1":
        return twin_distance(a, b)
    a, b = np.asarray(a), np.asarray(b)
    half = a.shape[-1] // 2
    return twin_distance(a[..., half:], b[..., half:])


@dataclass(frozen=True)
class NullThreshold:
    """Q_null = the conformal (1 - alpha) quantile of the placebo distances, plus ``tol``.

    Parameters
    ----------
    q : float
        The threshold Q_null = ``quantile + tol``.
    quantile : float
        The conformal quantile of the placebo distances.
    tol : float
        The tolerance added.
    alpha : float
        Miscoverage level.
    k_index : int
        1-based rank of the quantile.
    n : int
        Number of placebo distances.
    share_placebo_nonzero : float
        Share of placebo distances above 0, in [0, 1].
    """

    q: float
    quantile: float
    tol: float
    alpha: float
    k_index: int
    n: int
    share_placebo_nonzero: float


def null_threshold(placebo_deltas: Sequence[float] | np.ndarray, alpha: float, tol: float = 1e-6) -> NullThreshold:
    """The null-anchored threshold Q_null: the conformal (1 - alpha) quantile of the calibration rows'
    placebo distances, plus a tolerance (the argument: the module docstring).

    Parameters
    ----------
    placebo_deltas : sequence of float or numpy.ndarray
        The calibration rows' placebo distances; all finite, at least
        ``min_calibration_size(alpha)`` of them.
    alpha : float
        Miscoverage level, in (0, 1).
    tol : float, default 1e-6
        Added to the quantile (so that exact zeros do not flag).

    Returns
    -------
    NullThreshold
        The threshold ``q`` (quantile + tol) with its quantile, rank and placebo statistics.

    Examples
    --------
    >>> t = null_threshold(np.zeros(50), 0.1)
    >>> t.q, t.share_placebo_nonzero
    (1e-06, 0.0)
    """
    p = np.asarray(placebo_deltas, dtype=np.float64)
    if len(p) == 0 or not np.isfinite(p).all():
        raise ValueError("the null threshold needs at least one finite placebo distance")
    ct = ConformalThreshold(float(alpha)).fit(p.tolist())
    q = float(ct.threshold_)
    return NullThreshold(
        q=q + float(tol),
        quantile=q,
        tol=float(tol),
        alpha=float(alpha),
        k_index=int(ct.k_index_),
        n=int(ct.n_),
        share_placebo_nonzero=float((p > 0).mean()),
    )
