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
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional, Sequence

from facterlab.config import RunConfig, config_hash, preset, results_dir

FAKE_MODEL = "fake"
FAKE_ENCODER = "hash-encoder"


def run_config(dataset: str = "auto", model: str = "smollm2-135m", protocol: str = "open",
               preset_name: str = "repro", seed: int = 0, n_rows: Optional[int] = None, passes: int = 3,
               cfr_rows: int = 200, max_new_tokens: int = 250, batch_size: int = 8, device: str = "auto",
               encoder: str = "all-MiniLM-L6-v2", ranker: str = "generate", **overrides: Any) -> RunConfig:
    """The run config of a notebook's parameters (``section__field`` keys in ``overrides``).

    ``seed`` seeds both the row sample (``data.seed``) and the run (``seed``: LLM sampling, CFR rows),
    so that seeds are independent repetitions as in REPRO's 3 seeds.
    """
    if model == FAKE_MODEL:
        encoder = FAKE_ENCODER
    kw = dict(protocol=protocol, seed=int(seed), data__dataset=dataset, data__n_rows=n_rows,
              data__seed=int(seed), facter__passes=int(passes), metrics__cfr_rows=int(cfr_rows),
              model__llm=model, model__encoder=encoder, model__max_new_tokens=int(max_new_tokens),
              model__batch_size=int(batch_size), model__device=device, model__ranker=ranker)
    kw.update(overrides)
    return preset(preset_name, **kw)


def _fake_models(cfg: RunConfig, data_dir=None):
    from facterlab.data.protocol import load_or_build_interactions
    from facterlab.models.fake import FakeRecommender, HashEncoder

    inter = load_or_build_interactions(None, cfg.data, data_dir=data_dir)
    rec = FakeRecommender(inter.items, protocol=cfg.protocol, mode="biased", obey_rules=True, seed=cfg.seed)
    return rec, HashEncoder()


def run_dir(cfg: RunConfig, out_dir: Optional[os.PathLike | str] = None) -> Path:
    """``results/runs/<run_id>`` of a config (run id = config hash)."""
    base = Path(out_dir) if out_dir is not None else results_dir() / "runs"
    return base / config_hash(cfg)


def run(cfg: RunConfig, data_dir: Optional[os.PathLike | str] = None, progress: bool = True, **kw):
    """Run (or resume from the caches) one experiment; fake models are built here for ``llm="fake"``.

    Returns the :class:`RunResult` of ``run_experiment``.
    """
    from facterlab.facter.pipeline import run_experiment

    rec = enc = None
    if cfg.model.llm == FAKE_MODEL:
        rec, enc = _fake_models(cfg, data_dir)
    return run_experiment(cfg, recommender=rec, encoder=enc, data_dir=data_dir, progress=progress, **kw)


def run_many(configs: Sequence[RunConfig], data_dir=None, progress: bool = True) -> list:
    """:func:`run` for each config, in order (identical configs run once)."""
    done: dict = {}
    out = []
    for cfg in configs:
        key = config_hash(cfg)
        if key not in done:
            done[key] = run(cfg, data_dir=data_dir, progress=progress)
        out.append(done[key])
    return out


def model_label(model: str) -> str:
    """How a model is named in tables (published name for the REPRO backbones)."""
    from facterlab.reporting.published import PUBLISHED_MODELS

    return PUBLISHED_MODELS.get(model, model)


def provenance(results: Sequence[Any], profile: str, notebook: str) -> dict:
    """The block every notebook's metrics.json starts with: notebook, profile, dataset(s),
    is_synthetic, model(s), encoder(s), protocol(s), preset(s), run ids, seeds."""
    metrics = [r.metrics for r in results]
    cfgs = [r.config for r in results]

    def uniq(vals):
        vals = list(dict.fromkeys(vals))
        return vals[0] if len(vals) == 1 else vals

    return {
        "notebook": notebook,
        "profile": profile,
        "dataset": uniq([m.get("dataset") for m in metrics]),
        "is_synthetic": any(bool(m.get("is_synthetic")) for m in metrics),
        "model": uniq([m.get("model") for m in metrics]),
        "encoder": uniq([m.get("encoder") for m in metrics]),
        "protocol": uniq([m.get("protocol") for m in metrics]),
        "preset": uniq([m.get("preset") for m in metrics]),
        "run_ids": [r.run_id for r in results],
        "seeds": [c.get("seed") if isinstance(c, dict) else None for c in cfgs],
    }


def load_run_metrics(run_id: str, out_dir: Optional[os.PathLike | str] = None) -> dict:
    """The saved ``metrics.json`` of a run id (for tables built after the fact)."""
    base = Path(out_dir) if out_dir is not None else results_dir() / "runs"
    path = base / run_id / "metrics.json"
    if not path.is_file():
        raise FileNotFoundError(f"no metrics.json for run {run_id!r} at {path}")
    return json.loads(path.read_text())


def flat_json(metrics: dict, methods: Sequence[str] = ("neutral", "fair", "facter"),
              keys: Optional[Sequence[str]] = None) -> dict:
    """``method -> {flat key: number | {"value": None, "missing_reason": ...}}`` of one run's
    metrics (keys of :func:`facterlab.reporting.tables.flatten_method_metrics`; ``keys`` selects).

    >>> flat_json({"methods": {"facter": {"valid@10": 0.5, "cfr_multi": None}}}, ["facter"], ["valid@10", "cfr_multi"])
    {'facter': {'valid@10': 0.5, 'cfr_multi': {'value': None, 'missing_reason': 'cfr_multi not recorded in metrics.json'}}}
    """
    from facterlab.reporting.tables import MissingValue, flatten_method_metrics

    out = {}
    for method in methods:
        block = (metrics.get("methods") or {}).get(method)
        if not isinstance(block, dict):
            continue
        flat = flatten_method_metrics(block)
        sel = keys if keys is not None else list(flat)
        out[method] = {k: (flat[k].to_json() if isinstance(flat.get(k), MissingValue) else flat[k])
                       if k in flat else MissingValue(f"{k} not recorded in metrics.json").to_json()
                       for k in sel}
    return out
