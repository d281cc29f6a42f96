"""Offline calibration of a FACTER run (docs/FACTER.md §2): :func:`calibrate`.

Calibration rows are predicted under the calibration prompt with the seeds of pass 0; their scores
S = d + lambda Delta (neighbour Delta, or the twin Delta of docs/FACTER.md §7 with its placebos and
null threshold) give Q0 and the :class:`~facterlab.facter.scorers.CalibrationState` the online phase
scores test rows against.  Also here: the context embeddings and protected tuples of interaction rows
and the twins of rows, which the pipeline uses for the test rows too.

:func:`calibrate` and :func:`context_embeddings` are re-exported by :mod:`facterlab.facter.pipeline`,
where they lived before issue 32; the calibration logs under the pipeline's logger (one name for a
run's log lines, docs/PROGRESS.md).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from facterlab.config import RunConfig
from facterlab.data.dataset import PROTECTED
from facterlab.data.wording import has_rewording, missing_rewordings
from facterlab.facter.conformal import ConformalThreshold
from facterlab.facter.monitor import prompt_items, request_seed
from facterlab.facter.neighbours import counterfactual_neighbours
from facterlab.facter.prompts import protected_of
from facterlab.facter.scorers import NO_NEIGHBOUR_SEARCH, CalibrationState
from facterlab.facter.scores import ItemRepresenter, nonconformity_scores, top1_distance
from facterlab.facter.twins import (
    PLACEBO_EDITS,
    answer_vectors,
    mean_over_draws,
    null_threshold,
    placebo_request,
    reworded_twins,
    statistic_distance,
    top1_part,
    twin_attributes,
    twin_row,
    with_draws,
)
from facterlab.progress import Progress

#: the run's logger, not this module's: calibration's progress lines read ``facter.pipeline: calibration: ...``
#: like every other phase of a run (docs/PROGRESS.md); a name, not an import of the pipeline
log = logging.getLogger(f"{__package__}.pipeline")


def _predict_all(recommender, requests: list, batch: int, progress: bool, desc: str) -> list:
    """Predictions for ``requests`` in chunks of ``batch``; the bar counts requests and moves with
    every generated batch inside a chunk (facterlab.progress), the log says cached vs new and the time left."""
    out: list = []
    with Progress(desc, total=len(requests), unit="rows", log=log, bar=progress, advance_on_predictions=True) as bar:
        for s in range(0, len(requests), max(1, batch)):
            out.extend(recommender.predict(requests[s : s + batch]))
            bar.update_to(len(out))
    return out


def context_embeddings(rows: pd.DataFrame, items: pd.DataFrame, encoder, prompts) -> np.ndarray:
    """f(context_text(history titles)) for each row (docs/FACTER.md §2: no demographics in the context).

    Parameters
    ----------
    rows : pandas.DataFrame
        Interaction rows with a ``history`` column (sequences of item ids).
    items : pandas.DataFrame
        The catalogue (indexed by ``item_id`` or with an ``item_id`` column) with a ``title`` column.
    encoder : object
        Text encoder with ``encode(list[str]) -> array (n, dim)``.
    prompts : module
        The prompt module; its ``context_text(titles)`` builds each context.

    Returns
    -------
    numpy.ndarray of float32, shape (len(rows), dim)
        One context embedding per row, as the encoder returns it (not re-normalised here).
    """
    titles = prompt_items(items)
    texts = [prompts.context_text([titles[int(i)] for i in h]) for h in rows["history"]]
    return np.asarray(encoder.encode(texts), dtype=np.float32)


def _groups(rows: pd.DataFrame, attrs: Sequence[str] = PROTECTED) -> list:
    """Protected tuples of the rows (their values of ``attrs``, the dataset's protected attributes)."""
    return list(zip(*(rows[a].astype(str).tolist() for a in attrs)))


def _twins_of(rows: pd.DataFrame, attribute_values: dict, cfg: RunConfig, wordings: dict | None = None) -> list:
    """Each row's twin attributes: flipped (``facter.twin = "flip"``) or the row's own reworded
    (``"reword"``: the negative control, docs/FACTER.md §7.2)."""
    if cfg.facter.twin == "reword":
        return reworded_twins(rows, tuple(attribute_values), wordings)
    return twin_attributes(rows, attribute_values, cfg.metrics.flip_strategy, cfg.seed)


def _announce_rewording(
    kinds: Sequence[str], attrs: Sequence[str], wordings: dict | None, attribute_values: dict | None = None
) -> None:
    """Say which attributes, and which values, the reword placebo cannot write in other words (neither a
    built-in vocabulary nor a user wording: :func:`facterlab.data.wording.missing_rewordings`, each with
    its reason): their lines stay as they are under it (or only change case), so for them the bound's
    null rests on the other edits (docs/FACTER.md §7, docs/OWN_DATA.md)."""
    if "reword" not in kinds:
        return
    others = [k for k in kinds if k != "reword"]
    rest = " and ".join(f"the {k!r} placebo" for k in others) if others else "no other placebo"
    bare = [a for a in attrs if not has_rewording(a, wordings)]
    if bare:
        log.warning(
            "reword placebo: no wording for %s (pass a wording map: facterlab.data.from_tables(wordings=...)); "
            "their lines are left unchanged by it, so for them the null threshold rests on %s",
            ", ".join(bare),
            rest,
        )
    missing = missing_rewordings({a: v for a, v in (attribute_values or {}).items() if a not in bare}, wordings)
    for attr, values in missing.items():
        shown = "; ".join(f"{v!r}: {why}" for v, why in list(values.items())[:5])
        more = f" (and {len(values) - 5} more)" if len(values) > 5 else ""
        log.warning(
            "reword placebo: %d value(s) of %s have no real rewording (%s%s); add them to the wording map. "
            "For them the null threshold rests on %s",
            len(values),
            attr,
            shown,
            more,
            rest,
        )


@dataclass(frozen=True)
class CalibrationPlan:
    """Every request the calibration of a run asks, known before any answer (:func:`calibration_plan`).

    ``requests``: one per calibration row under the calibration prompt, seeds of pass 0; with the twin
    Delta, ``flips`` (each row's twin attributes), ``twin_dicts`` (the twin rows) and ``twin_requests``
    (same prompt and seed); with the null threshold, ``placebo_requests``: placebo kind -> one request per
    row.  Each list is asked ``draws`` times (:func:`facterlab.facter.twins.with_draws`)."""

    row_dicts: list
    requests: list
    draws: int = 1
    flips: list = field(default_factory=list)
    twin_dicts: list = field(default_factory=list)
    twin_requests: list = field(default_factory=list)
    placebo_requests: dict = field(default_factory=dict)

    def all_requests(self) -> list:
        """Every request, draws included, in the order :func:`calibrate` asks them."""
        lists = [self.requests, self.twin_requests, *self.placebo_requests.values()]
        return [r for reqs in lists if reqs for r in with_draws(reqs, self.draws)]


def calibration_plan(
    calib_rows: pd.DataFrame, items: pd.DataFrame, cfg: RunConfig, domain: str, prompts, attribute_values=None
) -> CalibrationPlan:
    """The requests of :func:`calibrate` for these rows (its arguments of the same names).

    :func:`calibrate` asks exactly these, so a caller may ask them earlier, together with other phases'
    requests (:mod:`facterlab.facter.prefetch`), and calibration then reads the answers from the cache.

    Parameters
    ----------
    calib_rows : pandas.DataFrame
        Calibration interaction rows.
    items : pandas.DataFrame
        The catalogue.
    cfg : RunConfig
        The run's configuration.
    domain : str
        Domain word of the prompts.
    prompts : module
        The prompt module.
    attribute_values : dict or None, default None
        Every value of each protected attribute; required with ``facter.delta = "twin"``.

    Returns
    -------
    CalibrationPlan
    """
    fc = cfg.facter
    rows = calib_rows.reset_index(drop=True)
    row_dicts = rows.to_dict("records")
    system = prompts.system_prompt(fc.calibration_prompt)
    pitems = prompt_items(items)

    def build(row: dict, seed: int):
        return prompts.build_request(row, pitems, system, cfg.protocol, cfg.metrics.k, domain, seed)

    reqs = [build(r, request_seed(cfg.seed, int(r["row_id"]), 0)) for r in row_dicts]
    if fc.delta != "twin":
        return CalibrationPlan(row_dicts, reqs)
    if attribute_values is None:
        raise ValueError("facter.delta = 'twin' needs the dataset's attribute values to flip the twins")
    wordings = getattr(prompts, "wordings", None)
    flips = _twins_of(rows, attribute_values, cfg, wordings)
    twin_dicts = [twin_row(r, t) for r, t in zip(row_dicts, flips)]
    twin_reqs = [build(t, rq.seed) for t, rq in zip(twin_dicts, reqs)]
    placebos: dict = {}
    if fc.threshold == "null":  # the placebo family (docs/FACTER.md §7), one list per edit
        kinds = PLACEBO_EDITS if fc.placebo == "family" else (fc.placebo,)
        _announce_rewording(kinds, protected_of(prompts), wordings, attribute_values)
        placebos = {kind: [placebo_request(r, kind, wordings) for r in reqs] for kind in kinds}
    return CalibrationPlan(row_dicts, reqs, int(fc.draws), flips, twin_dicts, twin_reqs, placebos)


def calibrate(
    calib_rows: pd.DataFrame,
    items: pd.DataFrame,
    recommender,
    encoder,
    represent: ItemRepresenter,
    postprocess,
    cfg: RunConfig,
    domain: str,
    prompts,
    progress: bool = False,
    attribute_values: dict | None = None,
) -> tuple:
    """Offline calibration (docs/FACTER.md §2) -> (CalibrationState, calibration DataFrame).

    Calibration responses are generated under ``cfg.facter.calibration_prompt`` ("neutral" default, or
    "empty"), with the seeds of pass 0.  With ``facter.delta = "twin"`` (docs/FACTER.md §7) each row's
    twin (``attribute_values`` needed to flip) is asked under the same prompt and seed, Delta is the
    distance of the two answers and no neighbour search runs; with ``facter.threshold = "null"`` each
    row's placebo (:func:`facterlab.facter.twins.placebo_request`) is asked too and Q_null is set.

    Parameters
    ----------
    calib_rows : pandas.DataFrame
        Calibration interaction rows (``row_id``, ``user_id``, protected attributes, ``target``,
        ``history`` and what ``prompts.build_request`` reads).
    items : pandas.DataFrame
        The catalogue (indexed by ``item_id`` for ``postprocess``).
    recommender : Recommender
        The model under audit.
    encoder : object
        Text encoder for the contexts (neighbour Delta only).
    represent : ItemRepresenter
        Gives f(yhat) and the targets' representations.
    postprocess : callable
        From :func:`make_postprocess`.
    cfg : RunConfig
        The run's configuration (``facter``, ``protocol``, ``metrics.k``, ``model.batch_size``,
        ``seed``, ``metrics.flip_strategy``).
    domain : str
        Domain word of the prompts.
    prompts : module
        The prompt module (``system_prompt``, ``build_request``, ``context_text``).
    progress : bool, default False
        Show progress bars.
    attribute_values : dict or None, default None
        Every value of each protected attribute; required with ``facter.delta = "twin"``.

    Returns
    -------
    state : CalibrationState
        Q0 (and Q_null), contexts (a zero column with the twin Delta), groups and f(yhat_j).
    table : pandas.DataFrame
        One row per calibration row: ids, protected attributes, target, ``S``, ``d``, ``delta``,
        ``n_neighbours`` (-1 with the twin Delta), twin and placebo columns when used, titles,
        mapped ids, top-1, parse status, raw output and the system prompt kind.
    """
    fc = cfg.facter
    rows = calib_rows.reset_index(drop=True)
    plan = calibration_plan(rows, items, cfg, domain, prompts, attribute_values)
    row_dicts, reqs = plan.row_dicts, plan.requests
    batch = max(1, cfg.model.batch_size) * 8
    draws = plan.draws
    how = fc.twin_distance  # the twin Delta's statistic; the placebos are measured the same way

    def answers(requests: list, dicts: list, desc: str) -> tuple:
        """(predictions, postprocessed, f(yhat)) of ``requests`` for the rows ``dicts``; with
        ``facter.draws`` > 1 each request is asked once per draw and f(yhat) is the mean over its draws
        (predictions and postprocessed answers: draw 0's)."""
        got = _predict_all(recommender, with_draws(requests, draws), batch, progress, desc)
        done = postprocess(list(dicts) * draws, got)
        # f(yhat), and with facter.twin_distance = "list" the rank-weighted list mean beside it (twins.answer_vectors)
        emb = mean_over_draws(answer_vectors(represent.predictions, done, got, how), draws)
        n = len(requests)
        return got[:n], done[:n], emb

    preds, post, stat_emb = answers(reqs, row_dicts, "calibration")
    pred_emb = top1_part(stat_emb, how)  # f(yhat) of the top-1: FACTER's d and the calibration state
    target_emb = represent.items(rows["target"].tolist())
    attrs = protected_of(prompts)
    groups = _groups(rows, attrs)
    twin_cols: dict = {}
    q_null = None
    if fc.delta == "twin":
        flips, twin_dicts = plan.flips, plan.twin_dicts
        twin_preds, twin_post, twin_emb = answers(plan.twin_requests, twin_dicts, "calibration twins")
        d = top1_distance(pred_emb, target_emb)
        delta = statistic_distance(stat_emb, twin_emb, how)
        sc = pd.DataFrame({"S": d + fc.lam * delta, "d": d, "delta": delta, "n_neighbours": NO_NEIGHBOUR_SEARCH})
        ctx = np.zeros((len(rows), 1), dtype=np.float32)  # no neighbour search with the twin Delta
        twin_cols = {
            **{f"twin_{a}": [t[a] for t in flips] for a in attrs},
            "twin_top1_id": [int(p[1]) for p in twin_post],
            "twin_top1_text": [p[2] for p in twin_post],
            "twin_raw": [str(p.raw or "") for p in twin_preds],
        }
        if fc.threshold == "null":
            # the placebo family (docs/FACTER.md §7): per row the largest distance over the edits asked
            per_kind = {
                kind: statistic_distance(stat_emb, answers(plc, row_dicts, f"calibration placebos ({kind})")[2], how)
                for kind, plc in plan.placebo_requests.items()
            }
            plc_delta = np.max(np.vstack(list(per_kind.values())), axis=0)
            q_null = null_threshold(plc_delta, fc.alpha, fc.null_tol)
            twin_cols["placebo_delta"] = plc_delta
            if len(per_kind) > 1:
                for kind, dist in per_kind.items():
                    twin_cols[f"placebo_delta_{kind}"] = dist
    else:
        ctx = context_embeddings(rows, items, encoder, prompts)
        index = counterfactual_neighbours(ctx, groups, tau_rho=fc.tau_rho, tau_x=fc.tau_x, progress=progress)
        sc = nonconformity_scores(pred_emb, target_emb, index, pred_emb, lam=fc.lam)
    ct = ConformalThreshold(fc.alpha).fit(sc["S"].to_numpy())
    state = CalibrationState(
        q0=ct.threshold_,
        context_emb=ctx,
        groups=groups,
        pred_emb=pred_emb,
        alpha=fc.alpha,
        k_index=ct.k_index_,
        n=ct.n_,
        q_null=None if q_null is None else q_null.q,
    )
    df = rows[["row_id", "user_id", *attrs, "target"]].copy()
    for c in ("S", "d", "delta", "n_neighbours"):
        df[c] = sc[c].to_numpy()
    for c, v in twin_cols.items():
        df[c] = v
    df["titles"] = [[str(t) for t in p.titles] for p in preds]
    df["mapped_ids"] = [[int(m) for m in p[0]] for p in post]
    df["top1_id"] = [int(p[1]) for p in post]
    df["top1_text"] = [p[2] for p in post]
    df["parse_status"] = [p.parse_status for p in preds]
    df["raw"] = [str(p.raw or "") for p in preds]
    df["system_prompt"] = fc.calibration_prompt
    return state, df
