"""Glue between the notebooks and :func:`facterlab.facter.pipeline.run_experiment`.

The FACTER notebooks (00, 02-08, 20) describe a run by a few parameters (dataset, model, protocol,
preset, seed, sizes); :func:`run_config` turns them into a :class:`~facterlab.config.RunConfig`
the same way in every notebook, so notebooks that need the same run build the same config, get the
same run id (the config hash) and share ``results/runs/<run_id>/`` instead of redoing it.

``model="fake"`` selects the deterministic :class:`~facterlab.models.fake.FakeRecommender`
(biased mode, obeys repair rules) with the torch-free :class:`~facterlab.models.fake.HashEncoder`;
the config then records ``llm="fake"`` and ``encoder="hash-encoder"`` so that its run id never
collides with a real model's.

>>> cfg = run_config(dataset="synthetic", model="fake", n_rows=40, passes=2, cfr_rows=8, seed=1)
>>> cfg.model.llm, cfg.model.encoder, cfg.data.n_rows, cfg.facter.passes, cfg.seed, cfg.data.seed
('fake', 'hash-encoder', 40, 2, 1, 1)
>>> run_config(model="smollm2-135m").model.encoder
'all-MiniLM-L6-v2'
>>> run_config(ranker="likelihood").model.ranker, run_config(protocol="rank", ranker="likelihood").model.ranker
('generate', 'likelihood')
"""

from __future__ import annotations

import json
import logging
import os
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from facterlab.blas import fingerprint_extra as blas_fingerprint
from facterlab.config import FAKE_LLM, SIMULATED_LLM, RunConfig, cache_dir, config_hash, config_to_dict, preset
from facterlab.config import data_dir as config_data_dir
from facterlab.data import load_dataset
from facterlab.data.protocol import load_or_build_interactions
from facterlab.datatypes import MissingValue
from facterlab.facter.pipeline import HASH_ENCODER, fake_recommender, run_experiment, run_id_for
from facterlab.facter.record import METHODS, as_metrics, as_value, missing_json
from facterlab.facter.runfolder import find, read_run_folder
from facterlab.models.fake import HashEncoder
from facterlab.models.rankers import expected_fingerprint
from facterlab.models.registry import resolve_encoder
from facterlab.models.simulated import NAMED_BIAS_TABLES, simulated_fingerprint
from facterlab.paths import runs_dir
from facterlab.reporting.llm_simpson import popularity_groups
from facterlab.reporting.published import PUBLISHED_MODELS

log = logging.getLogger(__name__)


def run_config(
    dataset: str = "auto",
    model: str = "smollm2-135m",
    protocol: str = "open",
    preset_name: str = "repro",
    seed: int = 0,
    n_rows: int | None = None,
    passes: int = 3,
    cfr_rows: int = 200,
    max_new_tokens: int = 250,
    batch_size: int = 8,
    device: str = "auto",
    encoder: str = "all-MiniLM-L6-v2",
    ranker: str = "generate",
    **overrides: Any,
) -> RunConfig:
    """The run config of a notebook's parameters (``section__field`` keys in ``overrides``).

    ``seed`` seeds both the row sample (``data.seed``) and the run (``seed``: LLM sampling, CFR rows),
    so that seeds are independent repetitions as in REPRO's 3 seeds.  ``ranker`` applies to the
    rank protocol only (open-generation configs keep the default, so their run ids do not depend on it).
    """
    if model == FAKE_LLM:
        encoder = HASH_ENCODER  # the fake model goes with the torch-free encoder (as `facterlab run --model fake`)
    if protocol != "rank":
        ranker = "generate"
    kw = dict(
        protocol=protocol,
        seed=int(seed),
        data__dataset=dataset,
        data__n_rows=n_rows,
        data__seed=int(seed),
        facter__passes=int(passes),
        metrics__cfr_rows=int(cfr_rows),
        model__llm=model,
        model__encoder=encoder,
        model__max_new_tokens=int(max_new_tokens),
        model__batch_size=int(batch_size),
        model__device=device,
        model__ranker=ranker,
    )
    kw.update(overrides)
    return preset(preset_name, **kw)


def expected_fingerprints(cfg: RunConfig, data_dir=None, inter=None) -> dict:
    """The model fingerprints a run of ``cfg`` would record, without loading the models (``inter``: the
    interactions when already loaded)."""
    if cfg.model.encoder == HASH_ENCODER:
        enc_fp = HashEncoder().fingerprint
    else:
        enc_fp = resolve_encoder(cfg.model.encoder).fingerprint
    blas = blas_fingerprint()  # numpy's BLAS threads (facterlab.blas), as run_experiment records them
    if cfg.model.llm in (SIMULATED_LLM, FAKE_LLM):  # built as the run builds them: cheap, from the interactions
        if inter is None:
            inter = load_or_build_interactions(None, cfg.data, data_dir=data_dir)
        if cfg.model.llm == FAKE_LLM:
            return {"llm": str(fake_recommender(cfg, inter.items).fingerprint), "encoder": str(enc_fp), **blas}
        # computed as the recommender computes it, without fitting its preferences; remembered per
        # (interactions, protocol, sim section) unless the bias table is a file, whose content may change
        key = (inter.content_hash, cfg.protocol, json.dumps(config_to_dict(cfg.sim), sort_keys=True, default=str))
        llm_fp = _SIM_FINGERPRINTS.get(key)
        if llm_fp is None:
            llm_fp = simulated_fingerprint(cfg, inter)
            if str(cfg.sim.bias_table) in NAMED_BIAS_TABLES:
                _SIM_FINGERPRINTS[key] = llm_fp
        return {"llm": llm_fp, "encoder": enc_fp, **blas}
    return {"llm": expected_fingerprint(cfg.model, cfg.protocol), "encoder": enc_fp, **blas}


#: simulated recommenders' fingerprints: (interactions hash, protocol, sim section) -> fingerprint
_SIM_FINGERPRINTS: dict = {}
#: interactions looked up by :func:`find_saved_run` in this process: key -> (data files' stamp, interactions)
_INTERACTIONS: OrderedDict = OrderedDict()
_INTERACTIONS_MAX = 16


def _data_stamp(root: Path) -> tuple:
    """``(path, mtime_ns, size)`` of the files in the data folder and its subfolders (one level)."""
    out = []
    try:
        with os.scandir(root) as top:
            entries = list(top)
    except OSError:
        return ()
    for e in entries:
        try:
            if e.is_dir():
                with os.scandir(e.path) as sub:
                    for f in sub:
                        if f.is_file():
                            st = f.stat()
                            out.append((f.path, st.st_mtime_ns, st.st_size))
            elif e.is_file():
                st = e.stat()
                out.append((e.path, st.st_mtime_ns, st.st_size))
        except OSError:
            continue
    return tuple(sorted(out))


def _interactions(cfg: RunConfig, data_dir=None):
    """:func:`load_or_build_interactions` of ``cfg.data``, remembered in this process while the data
    folder's files (their names, times and sizes), the cache folder and the data section are the same:
    a notebook's lookups section after section then read the dataset once, not once per run."""
    root = config_data_dir(data_dir)
    key = (
        json.dumps(config_to_dict(cfg.data), sort_keys=True, default=str),
        str(root),
        str(cache_dir()),
        os.environ.get("FACTERLAB_STRICT_DATA", ""),
    )
    stamp = _data_stamp(root)
    got = _INTERACTIONS.get(key)
    if got is not None and got[0] == stamp:
        _INTERACTIONS.move_to_end(key)
        return got[1]
    inter = load_or_build_interactions(None, cfg.data, data_dir=data_dir)
    _INTERACTIONS[key] = (stamp, inter)
    while len(_INTERACTIONS) > _INTERACTIONS_MAX:
        _INTERACTIONS.popitem(last=False)
    return inter


def find_saved_run(cfg: RunConfig, data_dir=None, out_dir: os.PathLike | str | None = None) -> Path | None:
    """The folder of a finished run of ``cfg`` on the current data with the current models:
    ``<results>/runs/<run_id>/`` where the run id hashes the config, the interactions' content hash and
    the model fingerprints (model files, dtype, decoding, parser version), with all its files; else None.
    A run made by other model files or an older parser is therefore not reused.

    A folder that does not load completely counts as missing (:func:`facterlab.facter.runfolder.find`:
    a warning names the file and the reason, and the run is redone).  In one process the interactions
    are read once per data section while the data files are unchanged, and a folder checked once is
    not read again while its files are unchanged (:mod:`facterlab.facter.runfolder`)."""
    base = runs_dir(out_dir)
    if not base.is_dir() or not any(base.glob(f"{config_hash(cfg)}-*")):
        return None
    inter = _interactions(cfg, data_dir)
    return find(base, run_id_for(cfg, inter.content_hash, expected_fingerprints(cfg, data_dir, inter)))


def load_saved_run(path: os.PathLike | str):
    """A :class:`RunResult` read back from a run folder (:func:`facterlab.facter.runfolder.read_run_folder`)."""
    return read_run_folder(path)


def run(cfg: RunConfig, data_dir: os.PathLike | str | None = None, progress: bool = True, reuse: bool = True, **kw):
    """Run one experiment, or read it back when a finished run of the same config, data and model
    fingerprints exists (``reuse``; said once through ``logging`` and ``print``: which run, from when,
    where).

    Returns the :class:`RunResult` of ``run_experiment``.
    """
    if reuse and not kw.get("out_dir"):
        saved = find_saved_run(cfg, data_dir)
        if saved is not None:
            result = load_saved_run(saved)
            _say_reused(result)
            return result
    return run_experiment(cfg, data_dir=data_dir, progress=progress, **kw)  # it builds fake and simulated models too


def _say_reused(result) -> None:
    meta = result.record.meta
    when = meta.started_at if meta is not None else "an unknown date (made before run.json was recorded)"
    msg = f"reusing run {result.run_id} from {when} ({result.out_dir})"
    log.info(msg)
    if not _logging_shows_info():  # said once: printed unless facterlab's own log handler shows it already
        print(msg)


def _logging_shows_info() -> bool:
    """Whether a handler on the ``facterlab`` logger (e.g. the notebooks' log lines) prints this module's INFO."""
    root = logging.getLogger("facterlab")
    return log.isEnabledFor(logging.INFO) and any(h.level <= logging.INFO for h in root.handlers)


def model_label(model: str) -> str:
    """How a model is named in tables (published name for the REPRO backbones)."""
    return PUBLISHED_MODELS.get(model, model)


def provenance(results: Sequence[Any], profile: str, notebook: str) -> dict:
    """The block every notebook's metrics.json starts with: notebook, profile, dataset(s),
    is_synthetic, model(s), encoder(s), protocol(s), preset(s), run ids, seeds."""
    metrics = [as_metrics(r) for r in results]

    def uniq(vals):
        vals = list(dict.fromkeys(vals))
        return vals[0] if len(vals) == 1 else vals

    return {
        "notebook": notebook,
        "profile": profile,
        "dataset": uniq([m.dataset for m in metrics]),
        "is_synthetic": any(bool(m.is_synthetic) for m in metrics),
        "model": uniq([m.field_value("model") for m in metrics]),
        "encoder": uniq([m.field_value("encoder") for m in metrics]),
        "model_fingerprint": uniq([m.model for m in metrics]),
        "protocol": uniq([m.protocol for m in metrics]),
        "preset": uniq([m.preset for m in metrics]),
        "run_ids": [r.run_id for r in results],
        "seeds": [r.record.config.setting("seed") for r in results],
    }


def flat_json(metrics: Any, methods: Sequence[str] = METHODS, keys: Sequence[str] | None = None) -> dict:
    """``method -> {flat key: number | {"value": None, "missing_reason": ...}}`` of one run's metrics
    (a record, run result or :class:`~facterlab.facter.record.RunMetrics`; keys of :meth:`facterlab.facter.record.MethodMetrics.flat`;
    ``keys`` selects).

    >>> from facterlab.facter.record import RunMetrics
    >>> flat_json(RunMetrics.partial({"methods": {"facter": {"valid@10": 0.5, "cfr_multi": None}}}), ["facter"], ["valid@10", "cfr_multi"])
    {'facter': {'valid@10': 0.5, 'cfr_multi': {'value': None, 'missing_reason': 'cfr_multi not recorded in metrics.json'}}}
    """
    m = as_metrics(metrics)
    out = {}
    for method in methods:
        block = m.methods.get(method)
        if block is None:
            continue
        flat = block.flat()
        sel = keys if keys is not None else list(flat)
        out[method] = {k: missing_json(flat.get(k, MissingValue(f"{k} not recorded in metrics.json"))) for k in sel}
    return out


def flat_random_floor(metrics: Any) -> dict:
    """The rank protocol's random-ranking floor as numbers (or explicit missing values)."""
    rf = as_metrics(metrics).random_floor
    if rf is None:
        return {"ndcg@10_multi": MissingValue("no random floor recorded (open protocol?)").to_json()}
    return missing_json(rf.flat())


CALIBRATION_COLUMNS = {"score_col": "S", "d_col": "d", "delta_col": "delta", "neigh_col": "n_neighbours"}


def calibration_columns(cal) -> dict:
    """Column names of the calibration table for :func:`facter_figures.calibration_panels`."""
    missing = [c for c in CALIBRATION_COLUMNS.values() if c not in cal.columns]
    if missing:
        raise ValueError(f"calibration table lacks column(s) {missing}; has {list(cal.columns)}")
    return dict(CALIBRATION_COLUMNS)


def calibration_summary(cal, metrics: Any) -> dict:
    """Calibration read-outs (docs/FACTER.md §2): alpha, Q0, k, n, score quantiles, mean d and Delta,
    neighbour counts, share of rows without counterfactual neighbour, corr(d, Delta).  ``metrics``: the
    run's record (or result, or :class:`RunMetrics`); a value that cannot be computed is a MissingValue."""
    import numpy as np

    c = as_metrics(metrics).calibration
    S = cal["S"].to_numpy(dtype=float)
    d = cal["d"].to_numpy(dtype=float)
    delta = cal["delta"].to_numpy(dtype=float)
    nb = cal["n_neighbours"].to_numpy(dtype=float)
    out: dict[str, Any] = {
        k: getattr(c, k)
        for k in (
            "alpha",
            "q0",
            "k_index",
            "n",
            "mean_neighbours",
            "share_no_neighbour",
            "test_mean_neighbours",
            "test_share_no_neighbour",
        )
    }
    for q in (0.1, 0.5, 0.9):
        out[f"score_q{int(q * 100)}"] = float(np.quantile(S, q)) if len(S) else None
    out["mean_d"] = float(d.mean()) if len(d) else None
    out["mean_delta"] = float(delta.mean()) if len(delta) else None
    out["max_neighbours"] = int(nb.max()) if len(nb) else 0
    with_nb = delta[nb > 0]
    out["mean_delta_with_neighbours"] = (
        float(with_nb.mean()) if len(with_nb) else MissingValue("no calibration row has a counterfactual neighbour")
    )
    if len(d) > 2 and np.std(d) > 0 and np.std(delta) > 0:
        out["corr_d_delta"] = float(np.corrcoef(d, delta)[0, 1])
    else:
        out["corr_d_delta"] = MissingValue("d or Delta is constant")
    q0 = c.q0
    out["share_above_q0"] = (
        float((S > q0).mean()) if len(S) and isinstance(q0, (int, float)) else MissingValue("no Q0 recorded")
    )
    return out


def summary_frame(summary: dict):
    """A two-column (quantity, value) DataFrame of a flat summary dict (for :func:`tables.frame_table`)."""
    import pandas as pd

    vals = [(k, as_value(v, k) if isinstance(v, dict) else v) for k, v in summary.items()]
    return pd.DataFrame(vals, columns=["quantity", "value"])


def rank_rows_with_groups(result, cfg: RunConfig, head_share: float = 0.2, data_dir=None) -> tuple:
    """The last-pass rows of each method of a rank-protocol run, merged with their interaction rows
    (history, candidates, relevance set, demographics), and the popular/long-tail item groups from
    the dataset's rating counts.  Returns ``({method: rows}, item_group)``."""
    if result.record.metrics.protocol != "rank":
        raise ValueError("the Simpson check needs a rank-protocol run (each row ranks its 40 candidates)")
    ds = load_dataset(result.record.metrics.dataset, data_dir)
    inter = load_or_build_interactions(ds, cfg.data, data_dir=data_dir)
    test = inter.test[["row_id", "history", "candidates", "relevant", "gender", "age", "occupation"]]
    groups = popularity_groups(ds.ratings, ds.items["item_id"], head_share)
    out = {}
    for method, rec in result.rows.items():
        last = rec[rec["pass"] == rec["pass"].max()][["row_id", "mapped_ids"]].rename(
            columns={"mapped_ids": "ranked_ids"}
        )
        out[method] = last.merge(test, on="row_id", how="inner", validate="one_to_one")
    return out, groups
