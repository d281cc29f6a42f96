"""Feedback on long work (facterlab.progress): quiet import, log lines with cached vs new predictions
and the time left, bars that move per generated batch, the CLI's levels, and (slow) a kernel run
through ``facterlab reproduce``'s runner: streamed log lines, finished bars saved at 100%."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest

from facterlab import progress as pg
from facterlab.datatypes import PARSE_OK, Prediction, PromptRequest, Recommender
from facterlab.facter.pipeline import _predict_all
from facterlab.models.cache import CachedRecommender, PredictionCache

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nbgen import code, params, write_notebook  # noqa: E402


@pytest.fixture
def no_handler():
    """Leave the facterlab logger as it was found."""
    logger = logging.getLogger("facterlab")
    saved = (list(logger.handlers), logger.level)
    yield logger
    logger.handlers[:] = saved[0]
    logger.setLevel(saved[1])


class SlowRec(Recommender):
    """Counts calls; each call takes ``delay`` seconds."""

    fingerprint = "slow-v1"

    def __init__(self, delay: float = 0.01):
        self.calls: list = []
        self.delay = delay

    def predict(self, requests):
        self.calls.append(len(requests))
        time.sleep(self.delay)
        return [Prediction(titles=(r.messages[-1][1],), parse_status=PARSE_OK) for r in requests]


def _reqs(n: int) -> list:
    return [PromptRequest.from_messages([{"role": "user", "content": f"q{i}"}], seed=0) for i in range(n)]


def test_import_configures_no_logging():
    env = {k: v for k, v in __import__("os").environ.items() if k != pg.ENV_LOG}
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import logging, facterlab; print(len(logging.getLogger('facterlab').handlers), len(logging.root.handlers))",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert out.stdout.split() == ["0", "0"]


def test_enable_logging_one_handler_never_root(no_handler, capsys):
    root_handlers = list(logging.root.handlers)
    pg.enable_logging("INFO")
    pg.enable_logging("DEBUG", stream="stdout")
    assert len([h for h in no_handler.handlers if getattr(h, "_facterlab_handler", False)]) == 1
    assert no_handler.level == logging.DEBUG and logging.root.handlers == root_handlers
    logging.getLogger("facterlab.facter.pipeline").info("calibration: 3 rows")
    assert "facter.pipeline: calibration: 3 rows" in capsys.readouterr().out
    pg.enable_logging("off")
    assert not [h for h in no_handler.handlers if getattr(h, "_facterlab_handler", False)]
    with pytest.raises(ValueError, match="unknown log level 'loud'"):
        pg.enable_logging("loud")
    with pytest.raises(ValueError, match="stream must be"):
        pg.enable_logging("INFO", stream="file")


def test_cached_vs_new_counts_eta_and_bar_moving_per_batch(tmp_path, caplog, monkeypatch):
    monkeypatch.setenv(pg.ENV_LOG_EVERY, "0")  # a log line at every step
    inner = SlowRec()
    rec = CachedRecommender(inner, PredictionCache(tmp_path / "c.sqlite"), batch_size=2)
    reqs = _reqs(8)
    with caplog.at_level(logging.INFO, logger="facterlab"):
        _predict_all(rec, reqs[:4], batch=8, progress=False, desc="calibration")  # warms half the cache
        caplog.clear()
        out = _predict_all(rec, reqs, batch=8, progress=False, desc="calibration")  # one chunk of 8
    assert [p.titles[0] for p in out] == [f"q{i}" for i in range(8)]
    assert inner.calls == [2, 2, 2, 2]  # 4 new requests in 2 batches, then 4 cached + 2 batches
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("calibration:")]
    # one predict() call for the whole chunk, yet the count moves with each generated batch
    assert any(line.startswith("calibration: 2/8 rows") for line in lines), lines
    assert any(line.startswith("calibration: 4/8 rows") for line in lines), lines
    assert any("about" in line and "left" in line for line in lines), lines
    assert "predictions 4 new" in lines[-1] and "4 cached" in lines[-1] and lines[-1].startswith("calibration: 8/8")
    assert rec.n_cached == 4 and rec.n_generated == 8


def test_eta_uses_the_rate_of_new_predictions():
    p = pg.Progress("x", total=100, bar=False, every=None)
    p.t0 -= 10.0  # 10 s elapsed
    p.update(50)
    p._predictions(cached=25, new=25, seconds=9.0)  # half the rows needed the model, 2.5 new/s
    eta = p.eta()
    p.close()
    assert eta == pytest.approx(50 * 0.5 / 2.5, rel=0.05)  # 25 more new predictions at 2.5/s


def test_cli_levels(no_handler, monkeypatch):
    from facterlab.cli import _configure_logging

    monkeypatch.delenv(pg.ENV_LOG, raising=False)
    assert _configure_logging(["data", "summary"]) == ["data", "summary"]
    assert no_handler.level == logging.INFO
    assert _configure_logging(["reproduce", "-v", "--only", "06"]) == ["reproduce", "--only", "06"]
    assert no_handler.level == logging.DEBUG
    import os

    assert os.environ[pg.ENV_LOG] == "DEBUG"  # notebook kernels follow the flag
    monkeypatch.setenv(pg.ENV_LOG, "WARNING")
    _configure_logging(["run"])
    assert no_handler.level == logging.WARNING


@pytest.mark.slow
def test_reproduce_streams_kernel_lines_and_saves_finished_bars(tmp_path, monkeypatch):
    from facterlab.reporting import reproduce as rp

    write_notebook(
        tmp_path / "notebooks" / "01_bars.ipynb",
        [
            params('PROFILE = "default"\nSMOKE = False\nN = 5'),
            code(
                "import logging\n"
                "from facterlab.progress import Progress, tqdm\n"
                "for _ in tqdm(range(N), desc='loop'):\n"
                "    pass\n"
                "logging.getLogger('facterlab.demo').info('phase of %d rows', N)\n"
                "with Progress('phase', total=N, every=0, log=logging.getLogger('facterlab.demo')) as p:\n"
                "    p.update(N)\n"
                "gone = tqdm(total=3, desc='gone', leave=False)\n"
                "gone.update(3)\n"
                "gone.close()\n"
                "print('plain print')"
            ),
        ],
    )
    monkeypatch.delenv(pg.ENV_LOG, raising=False)
    got: list = []
    runs = rp.run_notebooks("smoke", cwd=tmp_path, log=got.append)
    assert [r.status for r in runs] == ["ok"], runs[0].error
    streamed = [line for line in got if line.startswith("[01_bars] ")]
    assert any("demo: phase of 5 rows" in line for line in streamed), got  # INFO in a kernel by default
    assert "[01_bars] plain print" in streamed
    start = next(i for i, line in enumerate(got) if line.startswith("[reproduce] 01_bars.ipynb ("))
    end = next(i for i, line in enumerate(got) if line.startswith("[reproduce] 01_bars.ipynb: ok in "))
    assert start < got.index(streamed[0]) < end  # as they came, between the notebook's start and end lines
    nb = json.loads((tmp_path / "build" / "notebooks" / "01_bars.ipynb").read_text())
    texts = [
        "".join(o.get("data", {}).get("text/plain", ""))
        for c in nb["cells"]
        for o in c.get("outputs", [])
        if o["output_type"] == "display_data"
    ]
    bars = [t for t in texts if t.startswith(("loop:", "phase:", "gone:"))]
    assert len(bars) == 3 and all("100%" in t for t in bars), texts
    assert not any("0%|" in t and "100%" not in t for t in texts), texts
