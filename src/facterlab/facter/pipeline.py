"""One FACTER experiment end to end (docs/FACTER.md §1-§4): data, calibration, Neutral, Fair, FACTER, metrics.

``run_experiment(cfg)``:

1. dataset (``"auto"`` resolved and recorded) and interaction rows (cached by content hash);
2. encoder and recommender (unless given; the recommender answers from the LLM cache on reruns);
   with a cached recommender, the requests known before any answer (calibration, the baselines and
   their CFR blocks) are asked together first, in full batches (:mod:`facterlab.facter.prefetch`;
   the phases then read them from the cache, and the records do not change);
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
import time
from dataclasses import replace

import pandas as pd

from facterlab.blas import blas_threads_setting, limit_blas
from facterlab.blas import fingerprint_extra as blas_fingerprint
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
from facterlab.config import data_dir as config_data_dir
from facterlab.data import Dataset, load_dataset, resolve_dataset
from facterlab.data.protocol import load_or_build_interactions
from facterlab.data.wording import REWORD_VOCABULARY
from facterlab.datatypes import MissingValue, takes_system_prompt
from facterlab.facter import prefetch
from facterlab.facter import prompts as prompts_module

# re-exported: these lived here before the pipeline was split along its seams (issue 32); old imports work
from facterlab.facter.answers import candidate_ids_for_titles, make_postprocess  # noqa: F401
from facterlab.facter.baselines import run_baseline
from facterlab.facter.calibration import (
    _groups,
    _predict_all,  # noqa: F401
    _twins_of,
    calibrate,
    context_embeddings,
)
from facterlab.facter.method_metrics import _clean, method_metrics
from facterlab.facter.monitor import FacterMonitor, MonitorSettings
from facterlab.facter.record import (
    METHODS,
    Calibration,
    Fingerprints,
    RandomFloor,
    RunConfigRecord,
    RunMeta,
    RunMetrics,
    RunRecord,
)
from facterlab.facter.runfolder import RunResult, mark_degenerate, write_run_folder
from facterlab.facter.scorers import OnlineScorer, TwinScorer
from facterlab.facter.scores import ItemRepresenter
from facterlab.facter.twins import PLACEBO_EDITS
from facterlab.facter.validation import check_split, validate_config
from facterlab.metrics import CatalogueMapper, random_ranking_floor
from facterlab.models import load_encoder, make_recommender
from facterlab.models.fake import FakeRecommender, HashEncoder
from facterlab.models.simulated import simulated_from_config
from facterlab.paths import runs_dir
from facterlab.progress import Progress, format_seconds

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------
# helpers


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


def _reads_reworded_text(cfg: RunConfig) -> bool:
    """Whether the run asks reword placebos of a model that may read their text (:func:`run_id_for`)."""
    fc = cfg.facter
    if fc.threshold != "null" or fc.placebo not in ("family", "reword"):
        return False
    return cfg.model.llm != SIMULATED_LLM or cfg.sim.reads == "text"


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

    A run whose answers the reword placebo's built-in vocabulary can change (the null threshold with the
    reword placebo, alone or in the family, asked of a model that reads the prompt text: any but the
    fields-reading simulator) also hashes that vocabulary's version
    (:data:`facterlab.data.wording.REWORD_VOCABULARY`), so a run saved under an older vocabulary is
    not read back as this one; every other run id is unchanged.
    """
    content: dict = {"content": content_hash, "models": fingerprints}
    if _reads_reworded_text(cfg):
        content["reword_vocabulary"] = REWORD_VOCABULARY
    blob = json.dumps(content, sort_keys=True)
    return f"{config_hash(cfg)}-{hashlib.sha256(blob.encode()).hexdigest()[:8]}"


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
    """Run Neutral, Fair and FACTER on one dataset: calibrate Q0, run the test passes, score every
    method and save the run folder ``<results>/runs/<run_id>/``.

    The steps and the files are listed in the docstring of :mod:`facterlab.facter.pipeline`; the
    configuration and the output folder are validated before any data or model is touched.  A rerun
    of the same config on the same data and models gets the same run id and answers from the cache.

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

    See Also
    --------
    facterlab.config.preset : the configuration of a run.
    facterlab.facter.RunResult : what this returns, and a saved run read back.
    facterlab.reporting.batch.run_many : many runs at once, finished ones read back.
    facterlab.reporting.sweep.run_sweep : a grid of runs on a process pool, Dask or Slurm.

    Examples
    --------
    A run in seconds with no data and no model: the seeded synthetic data, the simulated recommender
    with a known demographic bias (``sim__beta``; docs/SIMULATED.md) and the torch-free hash encoder, at
    a tiny size.  Its run folder and cache go to a scratch folder here (by default ``results/`` and
    ``build/cache/``, or ``$FACTERLAB_RESULTS`` and ``$FACTERLAB_CACHE``).

    >>> import os, tempfile
    >>> from unittest import mock
    >>> from facterlab import preset
    >>> from facterlab.facter import run_experiment
    >>> cfg = preset("repro", data__dataset="synthetic", data__n_rows=40, model__llm="simulated",
    ...              model__encoder="hash-encoder", sim__beta=2.0, facter__passes=2)
    >>> scratch = tempfile.mkdtemp()
    >>> with mock.patch.dict(os.environ, FACTERLAB_CACHE=scratch):
    ...     run = run_experiment(cfg, out_dir=scratch, progress=False)
    >>> m = run.record.metrics
    >>> m.dataset, m.is_synthetic, m.n_calib, m.n_test
    ('synthetic', True, 28, 12)
    >>> {name: round(m.methods[name].cfr_multi, 2) for name in ("neutral", "fair", "facter")}
    {'neutral': 0.63, 'fair': 0.54, 'facter': 0.54}
    >>> len(m.methods["facter"].violations["adaptive"])  # FACTER's violations: one count per pass
    2
    >>> run.out_dir.parent.name, run.out_dir.name == run.run_id
    ('runs', True)
    """
    # numpy's BLAS on one thread by default (facterlab.blas: FACTERLAB_BLAS_THREADS, in the fingerprints)
    with limit_blas(blas_threads_setting()):
        return _run_experiment(cfg, recommender, encoder, data_dir, out_dir, progress, dataset, fairllm)


def _run_experiment(cfg, recommender, encoder, data_dir, out_dir, progress, dataset, fairllm) -> RunResult:
    """:func:`run_experiment` inside its BLAS limit."""
    meta = RunMeta.start()  # run.json: start time, code version, command, host (not part of the run id)
    # every bound, the model names and the output folder, before any work
    validate_config(cfg, out_dir=results_dir(out_dir), llm=recommender is None, encoder=encoder is None)
    timings: dict = {}
    # counts the run's cached and new predictions (facterlab.progress), for the last log line
    overall = Progress("run", log=log, bar=False, every=None, summary=False)
    t0 = time.perf_counter()
    ds, inter = _load_data(cfg, data_dir, dataset)
    # the run's prompts: its wording (gender_in_prompt) and the dataset's attributes, wordings and item noun
    prompts = prompts_module.for_config(cfg.facter, inter)
    check_split(cfg, len(inter.calib), len(inter.test))  # the split actually built, before any model call
    timings["data_s"] = time.perf_counter() - t0
    if dataset is None and cfg.data.dataset == "auto" and inter.is_synthetic:  # said as the command line says it
        log.info(
            "data: dataset auto found no MovieLens-1M or MovieLens-100K under %s (FACTERLAB_DATA): "
            "the seeded SYNTHETIC stand-in, not a published dataset",
            config_data_dir(data_dir),
        )
    log.info(
        "data: %s%s, %d calibration + %d test rows (%s)",
        inter.dataset,
        " (synthetic)" if inter.is_synthetic and "synthetic" not in inter.dataset else "",
        len(inter.calib),
        len(inter.test),
        format_seconds(timings["data_s"]),
    )

    t0 = time.perf_counter()
    given = recommender is not None  # a recommender passed in (a function, your own model): named by its fingerprint
    recommender, encoder = _models(cfg, inter, recommender, encoder)
    timings["models_s"] = time.perf_counter() - t0
    fingerprints = {"llm": str(recommender.fingerprint), "encoder": str(encoder.fingerprint), **blas_fingerprint()}
    run_id = run_id_for(cfg, inter.content_hash, fingerprints)
    out = runs_dir(out_dir) / run_id
    lazy = not getattr(encoder, "loaded", True)  # the sentence encoder loads on its first uncached texts
    log.info(
        "models: %s + %s %s (%s); run %s, %s protocol",
        recommender.fingerprint if given else cfg.model.llm,
        cfg.model.encoder,
        "built (the encoder loads on its first texts, when not cached)" if lazy else "ready",
        format_seconds(timings["models_s"]),
        run_id,
        cfg.protocol,
    )

    if not takes_system_prompt(recommender):  # a function or REST recommender (docs/OWN_DATA.md)
        log.warning(
            "models: %s takes no system prompt, so FACTER's prompt repair cannot reach it: the monitor, the "
            "metrics and CFR apply; FACTER's rows are what the model answers whatever rules are mined, and the "
            "Fair baseline equals Neutral",
            recommender.fingerprint,
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

    settings = MonitorSettings(
        facter=cfg.facter,
        n_calib=len(calib_rows),  # the calibration's own count (state.n) once it has run
        protocol=cfg.protocol,
        k=k,
        domain=inter.domain,
        seed=cfg.seed,
        batch_size=max(1, cfg.model.batch_size),
        progress=progress,
    )
    twins = _twins_of(test_rows, ds.attribute_values, cfg, ds.wordings) if cfg.facter.delta == "twin" else None
    if prefetch.enabled(recommender):  # the requests known before any answer, in full batches
        t0 = time.perf_counter()
        known = prefetch.known_requests(
            cfg, settings, calib_rows, test_rows, items, inter.domain, prompts, ds.attribute_values, twins
        )
        prefetch.prefetch(recommender, known, progress)
        timings["prefetch_s"] = time.perf_counter() - t0

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
    scorer: OnlineScorer | TwinScorer
    if cfg.facter.delta == "twin":
        scorer = TwinScorer(state, target_emb, cfg.facter.lam, cfg.facter.twin_distance)
    else:
        test_ctx = context_embeddings(test_rows, items, encoder, prompts)
        scorer = OnlineScorer(
            state,
            test_ctx,
            _groups(test_rows, inter.protected),
            target_emb,
            cfg.facter.lam,
            cfg.facter.tau_rho,
            cfg.facter.tau_x,
        )
    timings["test_neighbours_s"] = time.perf_counter() - t0

    settings = replace(settings, n_calib=state.n)
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
            recommender = make_recommender(cfg.model, cfg.protocol, items=inter.items)
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
