"""Feedback on long work (facterlab.progress): quiet import, log lines with cached vs new predictions
and the time left, bars that move per generated batch, the CLI's levels, and (slow) a kernel run
through ``facterlab reproduce``'s runner: streamed log lines, finished bars saved at 100%."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time

import pytest
from nbgen import code, params, write_notebook

from facterlab import progress as pg
from facterlab.datatypes import PARSE_OK, Prediction, PromptRequest, Recommender
from facterlab.facter.pipeline import _predict_all
from facterlab.models.cache import CachedRecommender, PredictionCache


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


def test_eta_uses_the_measured_time_per_generated_batch():
    p = pg.Progress("x", total=100, bar=False, every=None)
    p.t0 -= 10.0  # 10 s elapsed
    p.update(50)
    for _ in range(5):
        p._predictions(cached=5, new=5, seconds=1.8)  # half the rows needed the model: 5 batches of 5 in 10 s
    eta = p.eta()
    p.close()
    assert eta == pytest.approx(5 * 10.0 / 5, rel=0.05)  # 25 more new predictions = 5 batches at 2 s each


def test_eta_counts_a_partial_last_batch_as_a_whole_one():
    """Measured in a smoke run before the fix: 16 rows generated in one batch in 27 s, then
    "about 2 s left" for the 17th row, which took 14 s (a batch of one costs about a batch)."""
    p = pg.Progress("calibration", total=17, bar=False, every=None)
    p.t0 -= 27.0
    p._predictions(new=16, seconds=26.0)
    p.update(16)
    assert p.eta() == pytest.approx(27.0, rel=0.05)  # one batch more, at the measured 27 s per batch
    assert "about 27 s left" in p.status()
    p.close()


def test_time_left_unknown_before_anything_is_measured_and_known_after():
    p = pg.Progress("pass", total=12, bar=False, every=None)
    assert p.eta() is None and p.status().endswith("; time left unknown")
    p.t0 -= 4.0
    p.update(3)  # rows without predictions: the rate of rows
    assert p.eta() == pytest.approx(9 * 4.0 / 3, rel=0.05)
    p.close()
    assert "left" not in p.status() and "unknown" not in p.status()  # a finished phase gives no estimate


def test_counts_agree_when_predictions_run_ahead_of_the_rows():
    """The monitor predicts a batch ahead of the row it processes: the line used to read
    "0/12 rows (0%) ... predictions 8 new"; now both counts carry their names."""
    p = pg.Progress("FACTER pass 1/3", total=12, bar=False, every=None)
    p.t0 -= 8.0
    p._predictions(new=8, seconds=8.0)
    line = p.status()
    assert line.startswith("FACTER pass 1/3: 0/12 rows processed, 8 predicted (67%), 8 s; predictions 8 new"), line
    assert p.eta() == pytest.approx(8.0, rel=0.05)  # 4 rows left: one more batch of up to 8
    p.update(8)
    assert p.status().startswith("FACTER pass 1/3: 8/12 rows (67%), 8 s"), p.status()
    p._predictions(new=4, seconds=4.0)
    p.update(4)
    p.close()
    assert p.status().startswith("FACTER pass 1/3: 12/12 rows (100%)")


def test_a_phase_answered_from_the_cache_is_logged(caplog):
    """Pass 1 of FACTER reusing cached predictions ends in a second; it is logged (INFO) all the same,
    so the first pass line a reader sees is pass 1, not pass 2."""
    with caplog.at_level(logging.INFO, logger="facterlab"):
        p = pg.Progress("FACTER pass 1/3", total=3, bar=False, every=None, log=logging.getLogger("facterlab.t"))
        p._predictions(cached=3)
        p.update(3)
        p.close()
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.INFO] == [
        "FACTER pass 1/3: 3/3 rows (100%), 0 s; predictions 0 new, 3 cached"
    ]


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
    # bars are text, never widgets (a widget makes JupyterLab read "Idle" while the cell runs); without
    # a browser each plain bar prints one final line when it closes, also for leave=False, and a
    # Progress phase draws none (its summary log line is the record)
    nb = json.loads((tmp_path / "build" / "notebooks" / "01_bars.ipynb").read_text())
    outputs = [o for c in nb["cells"] for o in c.get("outputs", [])]
    assert not any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs)
    text = "".join("".join(o.get("text", "")) for o in outputs if o["output_type"] == "stream")
    bars = [line for line in text.splitlines() if line.startswith(("loop:", "phase:", "gone:"))]
    assert [b.split(":")[0] for b in bars] == ["loop", "gone"], text
    assert all("100%" in b for b in bars) and "\r" not in text and " 0%|" not in text, bars
    assert sum(1 for line in streamed if "loop:" in line) == 1  # one line per bar in reproduce's output


def test_encoding_and_neighbour_search_log_rate_and_time_left(caplog, monkeypatch):
    """Issue 23: encoding and the neighbour search passed minutes in silence; now each logs a line every
    FACTERLAB_LOG_EVERY seconds with its count, rate and time left, and a summary when it took >= 1 s."""
    import numpy as np

    from facterlab.facter.neighbours import counterfactual_neighbours
    from facterlab.models.encoder import SentenceEncoder
    from facterlab.models.registry import ResolvedModel

    class SlowModel:
        def encode(self, chunk, **kw):
            time.sleep(0.05)
            return np.ones((len(chunk), 4), dtype=np.float32)

    monkeypatch.setenv(pg.ENV_LOG_EVERY, "0")
    enc = SentenceEncoder(ResolvedModel("toy", "/nowhere", None, "toy-fp", False), batch_size=2, cache=False)
    enc._model, enc._dim = SlowModel(), 4
    with caplog.at_level(logging.INFO, logger="facterlab"):
        enc.encode([f"text {i}" for i in range(20)])  # in several batches (the encoder plans them)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("encoding with toy:")]
    import re

    first = re.match(r"encoding with toy: (\d+)/20 texts \(\d+%\), ", lines[0])
    assert first and 0 < int(first.group(1)) < 20 and "texts/s" in lines[0], lines
    assert "left" in lines[0] and lines[-1].startswith("encoding with toy: 20/20 texts (100%)"), lines

    caplog.clear()
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(50, 8))
    with caplog.at_level(logging.INFO, logger="facterlab"):
        counterfactual_neighbours(emb, [i % 2 for i in range(50)], tau_rho=0.0, max_block_bytes=5 * 50 * 10)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("neighbour search:")]
    assert lines and lines[0].startswith("neighbour search: 10/50 rows (20%)") and "left" in lines[0], lines


def test_simpson_grid_reports_progress(caplog, monkeypatch):
    """Issue 25: notebook 14's grid printed nothing for 151 s; the grid now logs its count, rate and
    time left (every FACTERLAB_LOG_EVERY s; 0 here: at every simulation) and a summary."""
    import numpy as np

    from facterlab.simpson.simulate import SimConfig
    from facterlab.simpson.sweeping import grid

    monkeypatch.setenv(pg.ENV_LOG_EVERY, "0")
    with caplog.at_level(logging.INFO, logger="facterlab"):
        df = grid(np.array([0.0, 5.0]), np.array([1.5, 3.0]), base=SimConfig(n_users=400, bias=0.03), seed=0)
    assert len(df) == 4
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("grid seed 0:")]
    assert lines[0].startswith("grid seed 0: 1/4 simulations (25%)") and "left" in lines[0], lines
    assert lines[-1].startswith("grid seed 0: 4/4 simulations (100%)") and "left" not in lines[-1], lines
    assert all(r.name == "facterlab.simpson.simulate" for r in caplog.records if "grid seed" in r.getMessage())
