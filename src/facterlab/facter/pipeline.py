"""One FACTER experiment end to end (docs/FACTER.md §1-§4): data, calibration, Neutral, Fair, FACTER, metrics.

``run_experiment(cfg)``:

1. dataset (``"auto"`` resolved and recorded) and interaction rows (cached by content hash);
2. encoder and recommender (unless given; the recommender answers from the LLM cache on reruns);
3. calibration: predictions for the calibration rows under the Neutral (or empty) system prompt,
   counterfactual neighbours among calibration contexts, scores S = d + lambda Delta, Q0;
4. baselines Neutral and Fair (one pass) and FACTER (T passes) with the online monitor;
5. metrics of each method (FACTER: its last pass): Recall/NDCG@10 single and multi, Valid@10,
   snsr_proxy, CFR multi and single, violations per pass, threshold path, parse status;
6. files under ``<results>/runs/<run_id>/``: ``config.json``, ``calibration.parquet``,
   ``rows_<method>.parquet``, ``metrics.json`` (docs/CONTRACTS.md schema), ``timings.json``, ``run.json``
   (start/finish time, code version, command, host: :class:`facterlab.facter.record.RunMeta`), written
   to a temporary folder and renamed into place (:mod:`facterlab.facter.runfolder`; docs/FAULTS.md).
   Their JSON is the typed run record (:mod:`facterlab.facter.record`).

The whole configuration and the output folder are validated before any data or model is touched
(:func:`facterlab.facter.validation.validate_config`).

The run id is ``<config_hash(cfg)>-<hash of dataset content hash and model fingerprints>``: it
changes whenever the config, the data or a model changes, never with the clock.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from facterlab.config import (
    FAKE_LLM,
    HASH_ENCODER,
    PROTOCOL_SWITCHES,
    SIMULATED_LLM,
    RunConfig,
    config_hash,
    config_to_dict,
    results_dir,
)
from facterlab.data import Dataset, load_dataset, resolve_dataset
from facterlab.data.dataset import PROTECTED
from facterlab.data.protocol import load_or_build_interactions
from facterlab.datatypes import MissingValue
from facterlab.facter import prompts as prompts_module
from facterlab.facter.baselines import run_baseline
from facterlab.facter.conformal import ConformalThreshold
from facterlab.facter.monitor import (
    NO_NEIGHBOUR_SEARCH,
    CalibrationState,
    FacterMonitor,
    MonitorSettings,
    OnlineScorer,
    TwinScorer,
    prompt_items,
    request_seed,
    violation_summary,
)
from facterlab.facter.neighbours import counterfactual_neighbours
from facterlab.facter.record import (
    METHODS,
    Calibration,
    Fingerprints,
    MethodMetrics,
    RandomFloor,
    RunConfigRecord,
    RunMeta,
    RunMetrics,
    RunRecord,
    SnsrGroup,
    as_value,
)
from facterlab.facter.runfolder import RunResult, mark_degenerate, write_run_folder
from facterlab.facter.scores import ItemRepresenter, nonconformity_scores, top1_distance
from facterlab.facter.truth import detector_summary
from facterlab.facter.twins import (
    PLACEBO_EDITS,
    mean_over_draws,
    null_threshold,
    placebo_request,
    reworded_twins,
    twin_attributes,
    twin_distance,
    twin_row,
    with_draws,
)
from facterlab.facter.validation import check_split, validate_config
from facterlab.metrics import (
    CatalogueMapper,
    cfr_summary,
    compact_ranking,
    flip_attributes,
    random_ranking_floor,
    ranking_metrics,
    sample_cfr_rows,
    snsr_fairllm,
    snsr_proxy,
    valid_at_k,
)
from facterlab.models import load_encoder, make_recommender
from facterlab.models.fake import FakeRecommender, HashEncoder
from facterlab.models.simulated import simulated_from_config
from facterlab.paths import runs_dir
from facterlab.progress import Progress, format_seconds

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------
# helpers


def _clean(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [_clean(v) for v in obj.tolist()]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Path):
        return str(obj)
    return obj


def candidate_ids_for_titles(titles, candidates, titles_by_id: dict) -> list:
    """Item ids of a re-ranking answer: each title takes the first candidate with that title that no
    earlier position has taken (-1 when no unused candidate has it).

    Candidates keep their ids by position, so two candidates with the same title (ML-100K has 18
    duplicated titles) stay two distinct items: the first occurrence of the title in the answer is
    the first such candidate in the list, the second the second.

    Parameters
    ----------
    titles : sequence of str
        The answer's titles, best first.
    candidates : sequence of int
        The row's candidate item ids, in list order; each must be a key of ``titles_by_id``.
    titles_by_id : dict of int to str
        Catalogue item id -> title.

    Returns
    -------
    list of int
        One item id per title, -1 where no unused candidate has the title.

    Examples
    --------
    >>> candidate_ids_for_titles(["X", "Y", "X", "Z"], [5, 9, 7], {5: "X", 9: "X", 7: "Y"})
    [5, 7, 9, -1]
    """
    from collections import deque

    free: dict = {}
    for c in candidates:
        free.setdefault(titles_by_id[int(c)], deque()).append(int(c))
    out = []
    for t in titles:
        q = free.get(str(t))
        out.append(q.popleft() if q else -1)
    return out


def protocol_variants(cfg: RunConfig) -> dict:
    """The protocol switches of a run (docs/PROTOCOL.md), as recorded in metrics.json "variants".

    Parameters
    ----------
    cfg : RunConfig
        The run's configuration.

    Returns
    -------
    dict
        Field name -> value, for each key of ``facterlab.config.PROTOCOL_SWITCHES``.

    Examples
    --------
    >>> from facterlab.config import preset
    >>> protocol_variants(preset("repro"))["tie_order"], protocol_variants(preset("facterlab"))["tie_order"]
    ('file_order', 'item_id')
    """
    out = {}
    for key in PROTOCOL_SWITCHES:
        sec, fld = key.split("__", 1)
        out[fld] = getattr(getattr(cfg, sec), fld)
    return out


def make_postprocess(protocol: str, mapper, items: pd.DataFrame, k: int = 10, top1: str = "position0"):
    """``post(rows, predictions) -> [(mapped ids, top-1 id, top-1 raw title)]``.

    Re-ranking: titles map to the row's candidate ids by position (:func:`candidate_ids_for_titles`:
    duplicate titles stay distinct items).  Open generation: the first k titles go through the
    catalogue mapper (one call per batch).

    ``top1`` (FacterConfig.top1, docs/PROTOCOL.md): ``"position0"`` (facterlab) takes the item at
    position 0, unmapped (-1, scored by its raw title) when that title maps to nothing;
    ``"first_mapped"`` (REPRO) takes the first position that maps to a catalogue item, and the raw
    title of position 0 only when no position maps.

    Parameters
    ----------
    protocol : {"open", "rank"}
        The prediction protocol; anything but ``"rank"`` is treated as open generation.
    mapper : CatalogueMapper
        Maps free titles to catalogue ids (``mapper.map(titles) -> ids``, -1 for none); used for
        open generation only, and only for titles that are not exact catalogue titles.
    items : pandas.DataFrame
        The catalogue, indexed by ``item_id``, with a ``title`` column.
    k : int, default 10
        Titles kept per answer for open generation.
    top1 : {"position0", "first_mapped"}, default "position0"
        How the top-1 item is chosen (above).

    Returns
    -------
    callable
        ``post(rows, predictions) -> list of (list of int, int, str)``: per row the mapped ids
        (-1 = unmapped), the top-1 id and the top-1 raw title ("" for an empty answer). ``rows``
        are row dicts (with ``candidates`` for ``"rank"``), ``predictions`` the matching
        :class:`~facterlab.datatypes.Prediction` objects.
    """
    if top1 not in ("position0", "first_mapped"):
        raise ValueError(f"unknown top1 {top1!r}; choose 'position0' or 'first_mapped'")
    titles_by_id = items["title"].astype(str).to_dict()
    exact: dict = {}
    for iid, t in titles_by_id.items():
        exact.setdefault(t, int(iid))

    def pick(mr: list, ts: list) -> tuple:
        raw = str(ts[0]) if ts else ""
        if top1 == "first_mapped":
            for m, t in zip(mr, ts):
                if int(m) >= 0:
                    return int(m), str(t)
            return -1, raw
        return (int(mr[0]) if mr else -1), raw

    def post(rows: list, preds: list) -> list:
        if protocol == "rank":
            out = []
            for row, pr in zip(rows, preds):
                ts = [str(t) for t in pr.titles]
                mapped = candidate_ids_for_titles(ts, row["candidates"], titles_by_id)
                out.append((mapped, *pick(mapped, ts)))
            return out
        lists = [[str(t) for t in list(pr.titles)[:k]] for pr in preds]
        # exact catalogue titles map to themselves (cosine 1 / fuzzy 100: what the mapper would return);
        # only the other titles go through the mapper, in one call per batch
        unknown = sorted({t for ts in lists for t in ts if t not in exact})
        found = dict(zip(unknown, (int(m) for m in mapper.map(unknown)))) if unknown else {}
        out = []
        for ts in lists:
            mr = [exact[t] if t in exact else found[t] for t in ts]
            out.append((mr, *pick(mr, ts)))
        return out

    return post


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


def _groups(rows: pd.DataFrame) -> list:
    """Protected tuples (gender, age, occupation) of the rows."""
    return list(zip(*(rows[a].astype(str).tolist() for a in PROTECTED)))


def fake_recommender(cfg: RunConfig, items: pd.DataFrame) -> FakeRecommender:
    """The deterministic test recommender of ``llm = "fake"`` (biased, obeys AVOID rules, seeded by the run).

    Parameters
    ----------
    cfg : RunConfig
        The run's configuration (``protocol`` and ``seed`` are used).
    items : pandas.DataFrame
        The catalogue.

    Returns
    -------
    FakeRecommender
    """
    return FakeRecommender(items, protocol=cfg.protocol, mode="biased", obey_rules=True, seed=cfg.seed)


def build_encoder(cfg: RunConfig):
    """The encoder of ``cfg.model.encoder``: ``"hash-encoder"`` is the torch-free
    :class:`~facterlab.models.fake.HashEncoder`; anything else goes through :func:`facterlab.models.load_encoder`.

    Parameters
    ----------
    cfg : RunConfig
        The run's configuration (``model.encoder`` and ``model.device`` are used).

    Returns
    -------
    object
        The encoder (``encode(list[str]) -> array``, ``fingerprint``).
    """
    if cfg.model.encoder == HASH_ENCODER:
        return HashEncoder()
    return load_encoder(cfg.model.encoder, device=cfg.model.device)


def run_id_for(cfg: RunConfig, content_hash: str, fingerprints: dict) -> str:
    """``<config_hash>-<8 hex of (content hash, model fingerprints)>``.

    Parameters
    ----------
    cfg : RunConfig
        The run's configuration.
    content_hash : str
        Content hash of the interaction rows.
    fingerprints : dict
        Model fingerprints (``{"llm": ..., "encoder": ...}``); must be JSON-serialisable.

    Returns
    -------
    str
        The run id.

    Examples
    --------
    >>> from facterlab.config import preset
    >>> a = run_id_for(preset(), "abc", {"llm": "x", "encoder": "y"})
    >>> a == run_id_for(preset(), "abc", {"llm": "x", "encoder": "y"}) != run_id_for(preset(), "abd", {"llm": "x", "encoder": "y"})
    True
    """
    blob = json.dumps({"content": content_hash, "models": fingerprints}, sort_keys=True)
    return f"{config_hash(cfg)}-{hashlib.sha256(blob.encode()).hexdigest()[:8]}"


# ---------------------------------------------------------------------------------------------
# calibration


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
    row_dicts = rows.to_dict("records")
    system = prompts.system_prompt(fc.calibration_prompt)
    pitems = prompt_items(items)
    reqs = [
        prompts.build_request(
            r, pitems, system, cfg.protocol, cfg.metrics.k, domain, request_seed(cfg.seed, int(r["row_id"]), 0)
        )
        for r in row_dicts
    ]
    batch = max(1, cfg.model.batch_size) * 8

    draws = int(fc.draws) if fc.delta == "twin" else 1

    def answers(requests: list, dicts: list, desc: str) -> tuple:
        """(predictions, postprocessed, f(yhat)) of ``requests`` for the rows ``dicts``; with
        ``facter.draws`` > 1 each request is asked once per draw and f(yhat) is the mean over its draws
        (predictions and postprocessed answers: draw 0's)."""
        got = _predict_all(recommender, with_draws(requests, draws), batch, progress, desc)
        done = postprocess(list(dicts) * draws, got)
        emb = mean_over_draws(represent.predictions([p[1] for p in done], [p[2] for p in done]), draws)
        n = len(requests)
        return got[:n], done[:n], emb

    preds, post, pred_emb = answers(reqs, row_dicts, "calibration")
    target_emb = represent.items(rows["target"].tolist())
    groups = _groups(rows)
    twin_cols: dict = {}
    q_null = None
    if fc.delta == "twin":
        if attribute_values is None:
            raise ValueError("facter.delta = 'twin' needs the dataset's attribute values to flip the twins")
        flips = _twins_of(rows, attribute_values, cfg)
        twin_dicts = [twin_row(r, t) for r, t in zip(row_dicts, flips)]
        twin_reqs = [
            prompts.build_request(t, pitems, system, cfg.protocol, cfg.metrics.k, domain, rq.seed)
            for t, rq in zip(twin_dicts, reqs)
        ]
        twin_preds, twin_post, twin_emb = answers(twin_reqs, twin_dicts, "calibration twins")
        d = top1_distance(pred_emb, target_emb)
        delta = twin_distance(pred_emb, twin_emb)
        sc = pd.DataFrame({"S": d + fc.lam * delta, "d": d, "delta": delta, "n_neighbours": NO_NEIGHBOUR_SEARCH})
        ctx = np.zeros((len(rows), 1), dtype=np.float32)  # no neighbour search with the twin Delta
        twin_cols = {
            **{f"twin_{a}": [t[a] for t in flips] for a in PROTECTED},
            "twin_top1_id": [int(p[1]) for p in twin_post],
            "twin_top1_text": [p[2] for p in twin_post],
            "twin_raw": [str(p.raw or "") for p in twin_preds],
        }
        if fc.threshold == "null":
            # the placebo family (docs/FACTER.md §7): per row the largest distance over the edits asked
            kinds = PLACEBO_EDITS if fc.placebo == "family" else (fc.placebo,)
            per_kind = {
                kind: twin_distance(
                    pred_emb,
                    answers([placebo_request(r, kind) for r in reqs], row_dicts, f"calibration placebos ({kind})")[2],
                )
                for kind in kinds
            }
            plc_delta = np.max(np.vstack(list(per_kind.values())), axis=0)
            q_null = null_threshold(plc_delta, fc.alpha, fc.null_tol)
            twin_cols["placebo_delta"] = plc_delta
            if len(kinds) > 1:
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
    df = rows[["row_id", "user_id", *PROTECTED, "target"]].copy()
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


# ---------------------------------------------------------------------------------------------
# metrics


def _parse_counts(statuses) -> dict:
    vc = pd.Series(list(statuses), dtype=object).value_counts()
    out = {"ok": 0, "fallback": 0, "empty": 0}
    out.update({str(k): int(v) for k, v in vc.items()})
    return out


def _cfr_block(
    monitor: FacterMonitor, sample: pd.DataFrame, attribute_values: dict, cfg: RunConfig, mapper, postprocess
) -> tuple:
    """CFR multi and single (docs/FACTER.md §4) for the method whose final state is in ``monitor``.

    Original and counterfactual rows are predicted under the same system prompt: the one the original
    row gets under the method's final state (static for the baselines, the final rules for FACTER),
    with the seeds of pass 0.
    """
    k = cfg.metrics.k
    systems = [monitor.row_system(r, cfg.metrics.cfr_prompt) for r in sample.to_dict("records")]

    def vecs_for(rows: pd.DataFrame) -> np.ndarray:
        dicts = rows.to_dict("records")
        reqs = [monitor.request_for(r, s, 0) for r, s in zip(dicts, systems)]
        preds = monitor.rec.predict(reqs)
        post = postprocess(dicts, preds)
        return mapper.row_embeddings([list(p.titles)[:k] for p in preds], [po[0][:k] for po in post], k=k)

    orig = vecs_for(sample)
    flips = {"multi": tuple(PROTECTED), **{a: (a,) for a in PROTECTED}}
    out = {}
    for i, (name, attrs) in enumerate(flips.items()):
        rng = np.random.default_rng([int(cfg.seed), 7, i])
        cf = flip_attributes(sample, attribute_values, cfg.metrics.flip_strategy, attrs, rng)
        # the twin monitor's runs keep each pair's distance of CFR multi (paired comparisons of methods)
        out[name] = cfr_summary(orig, vecs_for(cf), rows=name == "multi" and cfg.facter.delta == "twin")
    multi = out.pop("multi")
    return multi, out


def _fairllm_block(
    monitor: FacterMonitor, test: pd.DataFrame, attribute_values: dict, cfg: RunConfig, postprocess
) -> dict:
    """snsr_fairllm (Zhang et al. 2023; docs/FACTER.md §4): per attribute value, Jaccard@k between the list
    with the value set and the list without the demographics block, over ``fairllm_users`` sampled
    test rows, under the method's final system prompt."""
    k = cfg.metrics.k
    sample = sample_cfr_rows(test, cfg.metrics.fairllm_users, np.random.default_rng([int(cfg.seed), 11]))
    dicts = sample.to_dict("records")
    systems = [monitor.row_system(r, cfg.metrics.cfr_prompt) for r in dicts]

    def lists(rows: list, demographics: bool = True) -> list:
        reqs = [
            monitor.prompts.build_request(
                r,
                monitor.prompt_items,
                sy,
                cfg.protocol,
                k,
                monitor.domain,
                request_seed(cfg.seed, int(r["row_id"]), 0),
                demographics=demographics,
            )
            for r, sy in zip(rows, systems)
        ]
        return [po[0][:k] for po in postprocess(rows, monitor.rec.predict(reqs))]

    neutral = lists(dicts, demographics=False)
    by_value = {a: {str(v): lists([{**r, a: v} for r in dicts]) for v in attribute_values[a]} for a in PROTECTED}
    out = snsr_fairllm(by_value, neutral, k)
    out["n_users"] = int(len(dicts))
    return out


def method_metrics(
    result,
    monitor: FacterMonitor,
    test_rows: pd.DataFrame,
    cfg: RunConfig,
    mapper,
    postprocess,
    attribute_values: dict,
    fairllm: bool = False,
) -> MethodMetrics:
    """Metrics of one method (its last pass): its part of the run record (docs/CONTRACTS.md).

    Parameters
    ----------
    result : MonitorResult
        The method's monitor result.
    monitor : FacterMonitor
        The monitor that produced it (gives the audit prompts for CFR and snsr_fairllm).
    test_rows : pandas.DataFrame
        The test rows, in walk order (``relevant``, ``target``, protected attributes).
    cfg : RunConfig
        The run's configuration (``metrics`` section, ``seed``, ``facter.delta`` / ``threshold``).
    mapper : CatalogueMapper
        Maps titles to catalogue items and embeds ranked lists.
    postprocess : callable
        From :func:`make_postprocess`.
    attribute_values : dict
        Every value of each protected attribute (for the counterfactual flips).
    fairllm : bool, default False
        Also compute ``snsr_fairllm`` (many extra predictions).

    Returns
    -------
    MethodMetrics
        Ranking metrics (NDCG/Recall@k single and multi, valid@10), snsr_proxy, CFR (values or
        missing values, with detail), violations per pass, threshold path, parse-status counts,
        mean S per pass, rules of the last pass, call counts and, when the records carry a known
        truth, ``ground_truth.detector``.
    """
    k = cfg.metrics.k
    rec = result.records
    last = rec[rec["pass"] == rec["pass"].max()].sort_values("position")
    test = test_rows.reset_index(drop=True)
    ranked = [list(m)[:k] for m in last["mapped_ids"]]
    # NDCG/Recall over the positions as generated, or (REPRO) over the list with unmapped and
    # repeated positions dropped (docs/PROTOCOL.md); Recall is the same either way
    scored = ranked if cfg.metrics.ndcg_positions == "positional" else [compact_ranking(r) for r in ranked]
    multi = ranking_metrics(scored, [list(r) for r in test["relevant"]], k)
    single = ranking_metrics(scored, [[int(t)] for t in test["target"]], k)
    titles = [list(t)[:k] for t in last["titles"]]
    if cfg.metrics.snsr_items == "mapped_title":  # REPRO: catalogue titles of the mapped items only
        row_vecs = mapper.row_embeddings(titles, ranked, k=k, represent="title", unmapped="drop")
    else:  # item text ("title :: genres"), the raw title where nothing maps
        row_vecs = mapper.row_embeddings(titles, ranked, k=k)
    snsr = snsr_proxy(
        row_vecs, test[list(PROTECTED)], min_group=cfg.metrics.snsr_min_group, empty_rows=cfg.metrics.snsr_empty_rows
    )
    sample = sample_cfr_rows(test, cfg.metrics.cfr_rows, np.random.default_rng([int(cfg.seed), 5]))
    cfr_multi, cfr_single = _cfr_block(monitor, sample, attribute_values, cfg, mapper, postprocess)
    fairllm_block = _fairllm_block(monitor, test, attribute_values, cfg, postprocess) if fairllm else None
    gt = detector_summary(rec, cfg.facter.delta, cfg.facter.threshold)
    return MethodMetrics(
        ndcg_multi=_clean(multi["ndcg_mean"]),
        ndcg_single=_clean(single["ndcg_mean"]),
        recall_multi=_clean(multi["recall_mean"]),
        recall_single=_clean(single["recall_mean"]),
        valid=_clean(valid_at_k(ranked, k)),
        snsr_proxy={g: SnsrGroup.of_block(_clean(block)) for g, block in snsr.items()},
        cfr_multi=as_value(cfr_multi, "cfr_multi"),
        cfr_single={a: as_value(v, f"cfr_{a}") for a, v in cfr_single.items()},
        cfr_detail=_clean({"multi": cfr_multi, **cfr_single, "n_rows": int(len(sample))}),
        violations=violation_summary(rec),
        threshold_path=[_clean(float(q)) for q in result.threshold_path],
        parse_status=_parse_counts(last["parse_status"]),
        mean_S=[_clean(float(x)) for x in rec.groupby("pass")["S"].mean().tolist()],
        n_empty_rows=int(multi["n_empty_rows"]),
        rules_in_last_pass=sorted({r for rr in last["rules"] for r in rr}),
        n_repredicted=int(result.n_repredicted),
        n_recommender_calls=int(result.n_calls),
        n_twin_predictions=int(result.n_twin_predicted),
        snsr_fairllm=_clean(fairllm_block) if fairllm_block is not None else None,
        ground_truth=_clean({"detector": gt}) if gt else None,
    )


# ---------------------------------------------------------------------------------------------
# the experiment


def _load_data(cfg: RunConfig, data_dir, dataset):
    if dataset is None:
        resolved = resolve_dataset(cfg.data.dataset, data_dir)
        kw = {}
        if resolved == "amazon":
            kw = {"demographics_seed": cfg.data.demographics_seed, "max_reviews": cfg.data.max_reviews}
        dataset = load_dataset(resolved, data_dir, **kw)
    elif not isinstance(dataset, Dataset):
        raise TypeError("dataset must be a facterlab.data.Dataset (or None to load cfg.data.dataset)")
    inter = load_or_build_interactions(dataset, cfg.data, data_dir)
    return dataset, inter


def _twins_of(rows: pd.DataFrame, attribute_values: dict, cfg: RunConfig) -> list:
    """Each row's twin attributes: flipped (``facter.twin = "flip"``) or the row's own reworded
    (``"reword"``: the negative control, docs/FACTER.md §7.2)."""
    if cfg.facter.twin == "reword":
        return reworded_twins(rows)
    return twin_attributes(rows, attribute_values, cfg.metrics.flip_strategy, cfg.seed)


def _run_record(
    cfg: RunConfig, run_id, inter, fingerprints, mapper, state, scorer, calib_df, test_rows, methods, rows, fairllm
) -> RunRecord:
    """The run's record (config.json and metrics.json parts, docs/CONTRACTS.md), built as the record's
    dataclasses, degenerate outputs marked (:func:`facterlab.facter.runfolder.mark_degenerate`)."""
    k = cfg.metrics.k
    nb = calib_df["n_neighbours"].to_numpy()
    twin = cfg.facter.delta == "twin"
    no_search = MissingValue("facter.delta = 'twin': no neighbour search")
    placebo = "placebo_delta" in calib_df.columns
    calibration = Calibration(
        alpha=_clean(state.alpha),
        q0=_clean(state.q0),
        k_index=_clean(state.k_index),
        n=_clean(state.n),
        mean_neighbours=no_search if twin else (float(nb.mean()) if len(nb) else 0.0),
        share_no_neighbour=no_search if twin else (float((nb == 0).mean()) if len(nb) else 1.0),
        test_mean_neighbours=no_search if twin else _clean(float(scorer.index.counts.mean())),
        test_share_no_neighbour=no_search if twin else _clean(float((scorer.index.counts == 0).mean())),
        q_null=_clean(state.q_null) if state.q_null is not None else MissingValue("facter.threshold is not 'null'"),
        share_placebo_nonzero=float((calib_df["placebo_delta"] > 0).mean())
        if placebo
        else MissingValue("no placebo: facter.threshold is not 'null'"),
        n_twin_predictions=int(len(calib_df)) * int(cfg.facter.draws) if twin else 0,
        n_placebo_predictions=int(len(calib_df))
        * int(cfg.facter.draws)
        * (len(PLACEBO_EDITS) if cfg.facter.placebo == "family" else 1)
        if placebo
        else 0,
    )
    floor = None
    if cfg.protocol == "rank":
        fl = random_ranking_floor(
            [list(c) for c in test_rows["candidates"]], [list(r) for r in test_rows["relevant"]], k
        )
        floor = RandomFloor(ndcg_multi=_clean(fl["ndcg_mean"]), recall_multi=_clean(fl["recall_mean"]))
    metrics = RunMetrics(
        run_id=run_id,
        dataset=inter.dataset,
        is_synthetic=bool(inter.is_synthetic),
        protocol=cfg.protocol,
        preset=cfg.preset,
        model=fingerprints["llm"],
        encoder=fingerprints["encoder"],
        model_name=cfg.model.llm,
        encoder_name=cfg.model.encoder,
        n_calib=int(len(calib_df)),
        n_test=int(len(test_rows)),
        n_distinct_users={s: int(inter.n_distinct_users.get(s, 0)) for s in ("calib", "test")},
        variants=_clean(
            {
                "threshold_rule": cfg.facter.threshold_rule,
                "correction": cfg.facter.correction,
                "rule_keying": cfg.facter.rule_keying,
                "mapping": mapper.variant,
                "flip_strategy": cfg.metrics.flip_strategy,
                "snsr": "snsr_proxy",
                "calibration_prompt": cfg.facter.calibration_prompt,
                "ranker": cfg.model.ranker if cfg.protocol == "rank" else None,
                "announce_threshold": cfg.facter.announce_threshold,
                "snsr_fairllm": bool(fairllm),
                "delta": cfg.facter.delta,
                "threshold": cfg.facter.threshold,
                "rule_mining": cfg.facter.rule_mining,
                **protocol_variants(cfg),
            }
        ),
        calibration=calibration,
        methods=dict(methods),
        random_floor=floor,
    )
    mark_degenerate(metrics, rows, calib_df)  # degenerate outputs counted, never scored as 0
    config = RunConfigRecord(
        run_id=run_id,
        config=config_to_dict(cfg),
        config_hash=config_hash(cfg),
        dataset_requested=cfg.data.dataset,
        dataset=inter.dataset,
        is_synthetic=bool(inter.is_synthetic),
        domain=inter.domain,
        data_config=config_to_dict(inter.config),
        content_hash=inter.content_hash,
        fingerprints=Fingerprints(
            llm=fingerprints["llm"],
            encoder=fingerprints["encoder"],
            extra=_clean({k: v for k, v in fingerprints.items() if k not in ("llm", "encoder")}),
        ),
    )
    return RunRecord(config=config, metrics=metrics)


def run_experiment(
    cfg: RunConfig,
    recommender=None,
    encoder=None,
    data_dir=None,
    out_dir=None,
    progress: bool = True,
    dataset=None,
    fairllm: bool = False,
) -> RunResult:
    """Run Neutral, Fair and FACTER on one dataset and save everything (module docstring).

    ``fairllm=True`` adds the ``snsr_fairllm`` variant to each method's metrics (costly: for
    ``metrics.fairllm_users`` rows, one prediction per value of every attribute plus one without
    demographics).

    ``out_dir``: the results root (default :func:`facterlab.config.results_dir`); the run's files go to
    ``<out_dir>/runs/<run_id>/``.  ``dataset``: an already loaded :class:`facterlab.data.Dataset`
    (tests, notebooks); otherwise ``cfg.data.dataset`` is resolved and loaded from ``data_dir``.

    Parameters
    ----------
    cfg : RunConfig
        The run's configuration (validated first).
    recommender : Recommender or None, default None
        The model under audit; None builds it from ``cfg.model``.
    encoder : object or None, default None
        The text encoder; None builds it from ``cfg.model.encoder``.
    data_dir : path-like or None, default None
        Data directory; None means ``$FACTERLAB_DATA``.
    out_dir : path-like or None, default None
        Results root; None means :func:`facterlab.config.results_dir`.
    progress : bool, default True
        Show progress bars.
    dataset : Dataset or None, default None
        An already loaded dataset; None loads ``cfg.data.dataset``.
    fairllm : bool, default False
        Also compute ``snsr_fairllm`` (costly).

    Returns
    -------
    RunResult
        The record, the records of each method, the calibration table and the run folder
        ``<out_dir>/runs/<run_id>/``.
    """
    prompts = prompts_module.for_config(cfg.facter)  # the run's wording (gender_in_prompt) bound

    meta = RunMeta.start()  # run.json: start time, code version, command, host (not part of the run id)
    # every bound, the model names and the output folder, before any work
    validate_config(cfg, out_dir=results_dir(out_dir), llm=recommender is None, encoder=encoder is None)
    timings: dict = {}
    # counts the run's cached and new predictions (facterlab.progress), for the last log line
    overall = Progress("run", log=log, bar=False, every=None, summary=False)
    t0 = time.perf_counter()
    ds, inter = _load_data(cfg, data_dir, dataset)
    check_split(cfg, len(inter.calib), len(inter.test))  # the split actually built, before any model call
    timings["data_s"] = time.perf_counter() - t0
    log.info(
        "data: %s%s, %d calibration + %d test rows (%s)",
        inter.dataset,
        " (synthetic)" if inter.is_synthetic and "synthetic" not in inter.dataset else "",
        len(inter.calib),
        len(inter.test),
        format_seconds(timings["data_s"]),
    )

    t0 = time.perf_counter()
    recommender, encoder = _models(cfg, inter, recommender, encoder)
    timings["models_s"] = time.perf_counter() - t0
    fingerprints = {"llm": str(recommender.fingerprint), "encoder": str(encoder.fingerprint)}
    run_id = run_id_for(cfg, inter.content_hash, fingerprints)
    out = runs_dir(out_dir) / run_id
    lazy = not getattr(encoder, "loaded", True)  # the sentence encoder loads on its first uncached texts
    log.info(
        "models: %s + %s %s (%s); run %s, %s protocol",
        cfg.model.llm,
        cfg.model.encoder,
        "built (the encoder loads on its first texts, when not cached)" if lazy else "ready",
        format_seconds(timings["models_s"]),
        run_id,
        cfg.protocol,
    )

    items = inter.items if inter.items.index.name == "item_id" else inter.items.set_index("item_id")
    k = cfg.metrics.k
    mapper = CatalogueMapper(
        items.reset_index(), encoder, method=cfg.metrics.mapping, threshold=cfg.metrics.map_threshold
    )
    represent = ItemRepresenter(encoder, items)
    post = make_postprocess(cfg.protocol, mapper, items, k, top1=cfg.facter.top1)
    calib_rows, test_rows = inter.calib.reset_index(drop=True), inter.test.reset_index(drop=True)
    if len(test_rows) == 0:
        raise ValueError("the test split is empty: increase data.n_rows")
    if cfg.protocol == "rank" and any(len(c) == 0 for c in test_rows["candidates"]):
        raise ValueError("the re-ranking protocol needs candidates, but some rows have none")

    t0 = time.perf_counter()
    log.info("calibration: %d rows under the %s system prompt", len(calib_rows), cfg.facter.calibration_prompt)
    state, calib_df = calibrate(
        calib_rows, items, recommender, encoder, represent, post, cfg, inter.domain, prompts, progress,
        attribute_values=ds.attribute_values,
    )  # fmt: skip
    timings["calibration_s"] = time.perf_counter() - t0
    log.info("calibration: Q0 = %.4f from %d scores (%s)", state.q0, state.n, format_seconds(timings["calibration_s"]))

    t0 = time.perf_counter()
    target_emb = represent.items(test_rows["target"].tolist())
    twins = None
    scorer: OnlineScorer | TwinScorer
    if cfg.facter.delta == "twin":
        scorer = TwinScorer(state, target_emb, cfg.facter.lam)
        twins = _twins_of(test_rows, ds.attribute_values, cfg)
    else:
        test_ctx = context_embeddings(test_rows, items, encoder, prompts)
        scorer = OnlineScorer(
            state, test_ctx, _groups(test_rows), target_emb, cfg.facter.lam, cfg.facter.tau_rho, cfg.facter.tau_x
        )
    timings["test_neighbours_s"] = time.perf_counter() - t0

    settings = MonitorSettings(
        facter=cfg.facter,
        n_calib=state.n,
        protocol=cfg.protocol,
        k=k,
        domain=inter.domain,
        seed=cfg.seed,
        batch_size=max(1, cfg.model.batch_size),
        progress=progress,
    )
    parts = dict(
        rows=test_rows,
        items=items,
        recommender=recommender,
        scorer=scorer,
        postprocess=post,
        represent=represent.predictions,
        prompts=prompts,
        twins=twins,
    )
    results, monitors = _run_methods(settings, parts, cfg.facter.passes, timings)

    t0 = time.perf_counter()
    log.info("metrics and CFR: %d counterfactual rows per method%s", cfg.metrics.cfr_rows, " + snsr_fairllm" * fairllm)
    with Progress("metrics and CFR", log=log, bar=False):
        methods = {
            m: method_metrics(results[m], monitors[m], test_rows, cfg, mapper, post, ds.attribute_values, fairllm)
            for m in METHODS
        }
    timings["metrics_s"] = time.perf_counter() - t0

    rows = {m: results[m].records for m in METHODS}
    record = _run_record(
        cfg, run_id, inter, fingerprints, mapper, state, scorer, calib_df, test_rows, methods, rows, fairllm
    )
    record.timings, record.meta = _clean(timings), meta.finish()
    write_run_folder(out, record, calib_df, rows)  # temp folder, metrics.json last, rename
    overall.close()
    counts = (
        f" ({overall.new} new predictions, {overall.cached} from the cache)" if overall.new + overall.cached else ""
    )
    log.info("run %s done in %s%s: %s", run_id, format_seconds(overall.elapsed()), counts, out)
    return RunResult.of_record(record, rows=rows, calibration=calib_df, out_dir=out)


def _models(cfg: RunConfig, inter, recommender=None, encoder=None) -> tuple:
    """The run's recommender and encoder: those passed in, else built from ``cfg.model`` (the simulated
    and the fake recommender from the run's own interactions, any other name through the registry)."""
    if encoder is None:
        encoder = build_encoder(cfg)
    if recommender is None:
        if cfg.model.llm == SIMULATED_LLM:
            recommender = simulated_from_config(cfg, inter)
        elif cfg.model.llm == FAKE_LLM:
            recommender = fake_recommender(cfg, inter.items)
        else:
            recommender = make_recommender(cfg.model, cfg.protocol)
    return recommender, encoder


def _run_methods(settings: MonitorSettings, parts: dict, passes: int, timings: dict) -> tuple:
    """Neutral and Fair (one pass each, no rules) then FACTER (``passes`` passes of the repair loop) over
    the test rows; ``({method: result}, {method: monitor})``, with each method's seconds in ``timings``."""
    n_test = len(parts["rows"])
    results, monitors = {}, {}
    for kind in ("neutral", "fair"):
        t0 = time.perf_counter()
        log.info("passes: %s baseline, 1 pass over %d test rows", kind, n_test)
        res = run_baseline(kind, settings, **parts)
        results[kind], monitors[kind] = res, res.extra.pop("monitor")
        timings[f"{kind}_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    log.info("passes: FACTER, %d pass(es) over %d test rows", passes, n_test)
    fm = FacterMonitor(settings, **parts)  # system_kind "facter" is the default
    results["facter"] = fm.run(passes)
    monitors["facter"] = fm
    timings["facter_s"] = time.perf_counter() - t0
    return results, monitors
