"""The prefetch of a run's known requests (facterlab.facter.prefetch): same run, fuller batches, no waste."""

from __future__ import annotations

import pandas as pd
import pytest
from facter_world import make_world

from facterlab.config import preset
from facterlab.facter import prefetch
from facterlab.facter.pipeline import run_experiment
from facterlab.models.cache import CachedRecommender, PredictionCache, request_key
from facterlab.models.fake import FakeRecommender, HashEncoder

FILES = ("calibration.parquet", "rows_neutral.parquet", "rows_fair.parquet", "rows_facter.parquet", "metrics.json")


@pytest.fixture(scope="module")
def ds():
    return make_world()


class _Recording(FakeRecommender):
    """The fake model, recording each call's request keys (the batches the model was asked)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.calls: list = []

    def predict(self, requests):
        self.calls.append([request_key(self.fingerprint, r) for r in requests])
        return super().predict(requests)


def _run(ds, cfg, tmp_path, name, monkeypatch, on: bool):
    monkeypatch.setenv(prefetch.ENV, "1" if on else "0")
    inner = _Recording(ds.items, mode="biased", obey_rules=True, bias_share=0.5, bias_features={"F": ("Romance",)})
    rec = CachedRecommender(inner, PredictionCache(tmp_path / f"{name}.sqlite"), batch_size=cfg.model.batch_size)
    asked: list = []
    predict = rec.predict

    def spy(requests):  # every request the phases ask the cached recommender (hits included)
        asked.append([request_key(rec.fingerprint, r) for r in requests])
        return predict(requests)

    rec.predict = spy
    res = run_experiment(
        cfg, recommender=rec, encoder=HashEncoder(), dataset=ds, out_dir=tmp_path / name, progress=False
    )
    return res, inner, asked


CONFIGS = {
    "faithful": dict(),
    "twin-null": dict(facter__delta="twin", facter__threshold="null", facter__draws=2),
    "final-rules CFR": dict(metrics__cfr_prompt="final_rules", protocol="rank"),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_prefetch_changes_no_record_and_wastes_no_request(ds, tmp_path, monkeypatch, name):
    cfg = preset(
        "repro",
        data__dataset="synthetic",
        data__n_rows=120,
        facter__tau_rho=0.8,
        metrics__cfr_rows=12,
        metrics__snsr_min_group=5,
        model__batch_size=8,
        **CONFIGS[name],
    )
    off, inner_off, _ = _run(ds, cfg, tmp_path, "off", monkeypatch, on=False)
    on, inner_on, asked = _run(ds, cfg, tmp_path, "on", monkeypatch, on=True)
    assert on.run_id == off.run_id
    for f in FILES:
        if f.endswith(".parquet"):
            pd.testing.assert_frame_equal(pd.read_parquet(on.out_dir / f), pd.read_parquet(off.out_dir / f))
        else:
            assert (on.out_dir / f).read_bytes() == (off.out_dir / f).read_bytes()
    generated_on = [k for call in inner_on.calls for k in call]
    generated_off = [k for call in inner_off.calls for k in call]
    # the same requests reach the model, each once: nothing prefetched goes unused, nothing is asked twice
    assert sorted(generated_on) == sorted(generated_off)
    assert len(set(generated_on)) == len(generated_on)
    # the first call to the cached recommender is the prefetch; the phases ask every one of its requests
    first, later = set(asked[0]), {k for call in asked[1:] for k in call}
    assert first and first <= later
    # and no more model calls than the phases made on their own; here fewer: the partial last batches of
    # calibration, Neutral, Fair and the baselines' CFR blocks are merged (with the twin configs here the
    # phases' remainders happen to fill whole batches of 8 either way)
    assert len(inner_on.calls) <= len(inner_off.calls)
    if name == "faithful":
        assert len(inner_on.calls) < len(inner_off.calls)


def test_prefetch_is_off_for_an_uncached_recommender_and_by_the_environment(ds, monkeypatch, tmp_path):
    inner = FakeRecommender(ds.items)
    assert not prefetch.enabled(inner)
    rec = CachedRecommender(inner, PredictionCache(tmp_path / "c.sqlite"))
    monkeypatch.setenv(prefetch.ENV, "0")
    assert not prefetch.enabled(rec)
    monkeypatch.setenv(prefetch.ENV, "1")
    assert prefetch.enabled(rec)


def test_facter_requests_are_never_prefetched(ds):
    from facterlab.config import FacterConfig
    from facterlab.facter.monitor import MonitorSettings, baseline_requests

    st = MonitorSettings(FacterConfig(), n_calib=10)
    with pytest.raises(ValueError, match="rules it mines"):
        baseline_requests(st, ds.items.head(0), ds.items)
