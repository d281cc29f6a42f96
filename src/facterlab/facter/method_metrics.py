"""The metrics of one method in a FACTER run (docs/FACTER.md §4; docs/CONTRACTS.md): :func:`method_metrics`.

From a method's monitor records (its last pass): NDCG/Recall@k single and multi, Valid@10, snsr_proxy,
violations per pass, threshold path, parse status and the ground-truth detector block; and, from new
predictions under the method's final system prompt, the metric blocks CFR multi and single and (on
request) snsr_fairllm.  The result is the method's part of the run record
(:class:`~facterlab.facter.record.MethodMetrics`).

:func:`method_metrics` is re-exported by :mod:`facterlab.facter.pipeline`, where it lived before issue 32.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from facterlab.config import RunConfig
from facterlab.data.dataset import PROTECTED
from facterlab.facter.monitor import FacterMonitor, request_seed
from facterlab.facter.monitor_result import violation_summary
from facterlab.facter.record import MethodMetrics, SnsrGroup, as_value
from facterlab.facter.truth import detector_summary
from facterlab.metrics import (
    cfr_summary,
    compact_ranking,
    flip_attributes,
    ranking_metrics,
    sample_cfr_rows,
    snsr_fairllm,
    snsr_proxy,
    valid_at_k,
)


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


def _parse_counts(statuses) -> dict:
    vc = pd.Series(list(statuses), dtype=object).value_counts()
    out = {"ok": 0, "fallback": 0, "empty": 0}
    out.update({str(k): int(v) for k, v in vc.items()})
    return out


def cfr_flips(attrs=PROTECTED) -> dict:
    """The counterfactual flips of CFR: every protected attribute at once (``"multi"``), then each alone.

    >>> cfr_flips(("country", "language"))
    {'multi': ('country', 'language'), 'country': ('country',), 'language': ('language',)}
    """
    return {"multi": tuple(attrs), **{a: (a,) for a in attrs}}


#: the built-in datasets' flips (:func:`cfr_flips` of gender, age, occupation)
CFR_FLIPS = cfr_flips(PROTECTED)


def cfr_sample(test_rows: pd.DataFrame, cfg: RunConfig) -> pd.DataFrame:
    """The test rows CFR is measured on (``metrics.cfr_rows`` of them, drawn with the run seed).

    Parameters
    ----------
    test_rows : pandas.DataFrame
        The test rows, in walk order.
    cfg : RunConfig
        The run's configuration.

    Returns
    -------
    pandas.DataFrame
        The sampled rows.
    """
    test = test_rows.reset_index(drop=True)
    return sample_cfr_rows(test, cfg.metrics.cfr_rows, np.random.default_rng([int(cfg.seed), 5]))


def cfr_requests(sample: pd.DataFrame, systems: list, attribute_values: dict, cfg: RunConfig, build) -> tuple:
    """The rows and requests of the CFR block: ``({name: row dicts}, {name: requests})`` for the
    original rows (``"orig"``) and each flip of :func:`cfr_flips` over the keys of ``attribute_values``,
    row i under ``systems[i]``.

    Parameters
    ----------
    sample : pandas.DataFrame
        The rows of :func:`cfr_sample`.
    systems : list of str
        Each row's audit system prompt.
    attribute_values : dict
        Every value of each protected attribute.
    cfg : RunConfig
        The run's configuration (``seed``, ``metrics.flip_strategy``).
    build : callable
        ``build(row, system) -> PromptRequest`` with the seeds of pass 0.

    Returns
    -------
    tuple of (dict, dict)
        Row dicts and requests per name, in the order the block asks them.
    """
    parts = {"orig": sample}
    for i, (name, attrs) in enumerate(cfr_flips(tuple(attribute_values)).items()):
        rng = np.random.default_rng([int(cfg.seed), 7, i])
        parts[name] = flip_attributes(sample, attribute_values, cfg.metrics.flip_strategy, attrs, rng)
    dicts = {name: rows.to_dict("records") for name, rows in parts.items()}
    reqs = {name: [build(r, s) for r, s in zip(ds, systems)] for name, ds in dicts.items()}
    return dicts, reqs


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
    dicts, reqs = cfr_requests(sample, systems, attribute_values, cfg, lambda r, s: monitor.request_for(r, s, 0))
    flips = [name for name in dicts if name != "orig"]
    # every request of the block in one call: full batches for an LLM instead of five of cfr_rows each
    # (an answer depends on its request alone: greedy decoding is batch-independent, the simulated and
    # fake models seed each request; tests/facter/test_facter_pipeline.py checks a run asked one request at a
    # time equals it, and docs/BENCHMARKS.md gives the run folders before and after)
    flat = monitor.rec.predict([q for name in reqs for q in reqs[name]])
    preds, at = {}, 0
    for name, qs in reqs.items():
        preds[name], at = flat[at : at + len(qs)], at + len(qs)

    def vecs_for(name: str) -> np.ndarray:
        post = postprocess(dicts[name], preds[name])
        return mapper.row_embeddings([list(p.titles)[:k] for p in preds[name]], [po[0][:k] for po in post], k=k)

    orig = vecs_for("orig")
    out = {}
    for name in flips:
        # the twin monitor's runs keep each pair's distance of CFR multi (paired comparisons of methods)
        out[name] = cfr_summary(orig, vecs_for(name), rows=name == "multi" and cfg.facter.delta == "twin")
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
    by_value = {a: {str(v): lists([{**r, a: v} for r in dicts]) for v in attribute_values[a]} for a in attribute_values}
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
        row_vecs,
        test[list(attribute_values)],
        attrs=tuple(attribute_values),
        min_group=cfg.metrics.snsr_min_group,
        empty_rows=cfg.metrics.snsr_empty_rows,
    )
    sample = cfr_sample(test, cfg)
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
