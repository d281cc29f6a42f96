"""Exact optimistic batching with the bundled SmolLM2 (greedy): batch B gives the records of batch 1."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from facter_world import make_world

from facterlab.config import ModelConfig, preset  # noqa: E402
from facterlab.data.protocol import build_interactions  # noqa: E402
from facterlab.facter import prompts  # noqa: E402
from facterlab.facter.monitor import CalibrationState, FacterMonitor, OnlineScorer  # noqa: E402
from facterlab.facter.pipeline import _groups, context_embeddings, make_postprocess  # noqa: E402
from facterlab.facter.scores import ItemRepresenter  # noqa: E402
from facterlab.metrics import CatalogueMapper  # noqa: E402
from facterlab.models.fake import HashEncoder  # noqa: E402

pytestmark = pytest.mark.llm


def _make_recommender(cfg: ModelConfig, protocol: str):
    models = pytest.importorskip("facterlab.models")
    if not hasattr(models, "make_recommender"):
        pytest.skip("facterlab.models.make_recommender is not available in this checkout")
    try:
        return models.make_recommender(cfg, protocol, cache=False)
    except (FileNotFoundError, ImportError) as exc:  # bundled model not installed
        pytest.skip(f"bundled SmolLM2 not available: {exc}")


def test_smollm2_optimistic_batching_is_exact():
    # open generation only: the re-ranking prompts (40 candidates) are too slow for CI on CPU; the
    # monitor's batching logic is protocol-independent and is tested for "rank" with the fake
    protocol = "open"
    ds = make_world(n_users=40)
    cfg = preset(
        "repro",
        data__dataset="synthetic",
        data__n_rows=30,
        protocol=protocol,
        facter__announce_threshold=True,
        facter__tau_rho=0.8,
    )
    mcfg = replace(cfg.model, temperature=0.0, max_new_tokens=12, batch_size=4)
    rec = _make_recommender(mcfg, protocol)
    inter = build_interactions(ds, cfg.data)
    items = inter.items
    enc = HashEncoder()
    rep = ItemRepresenter(enc, items)
    post = make_postprocess(protocol, CatalogueMapper(items.reset_index(), enc), items, 10)
    calib = inter.calib.reset_index(drop=True)
    test = inter.test.reset_index(drop=True).iloc[:4]
    # Q0 = 0: every row violates, so with the announced threshold every later prompt of a batch changes
    state = CalibrationState(
        q0=0.0,
        context_emb=context_embeddings(calib, items, enc, prompts),
        groups=_groups(calib),
        pred_emb=rep.items(calib["target"].tolist()),
        alpha=0.1,
        k_index=1,
        n=len(calib),
    )
    scorer = OnlineScorer(
        state,
        context_embeddings(test, items, enc, prompts),
        _groups(test),
        rep.items(test["target"].tolist()),
        0.7,
        0.8,
    )
    kw = dict(
        rows=test,
        items=items,
        recommender=rec,
        scorer=scorer,
        postprocess=post,
        represent=rep.predictions,
        cfg=cfg.facter,
        n_calib=state.n,
        protocol=protocol,
        k=10,
        domain="movie",
        seed=0,
        prompts=prompts,
    )
    one = FacterMonitor.from_keywords(system_kind="facter", batch_size=1, **kw).run(1)
    many = FacterMonitor.from_keywords(system_kind="facter", batch_size=4, **kw).run(1)
    assert one.records["viol_adaptive"].all()
    assert many.n_repredicted == 3 + 2 + 1  # each violation re-predicts the rest of the batch
    pd.testing.assert_frame_equal(one.records, many.records)
    assert np.isfinite(one.records["S"]).all()
