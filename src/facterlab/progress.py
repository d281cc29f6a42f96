"""Feedback on long work: facterlab's log lines and progress bars.

Logging.  Every module logs on its own ``logging.getLogger(__name__)`` (``facterlab.*``).  Importing
facterlab never touches the root logger; :func:`enable_logging` puts one handler on the
``facterlab`` logger.  It is called

- by the ``facterlab`` command (INFO; ``-v`` DEBUG, ``-q`` warnings only),
- when facterlab is imported inside a Jupyter kernel (JupyterLab, papermill, ``facterlab reproduce``):
  INFO, on the cell's stdout,
- from the environment: ``FACTERLAB_LOG=DEBUG|INFO|WARNING|off`` (read at import; ``off`` or
  ``WARNING`` silences the INFO lines in notebooks too).

Tests (pytest, not a kernel) stay quiet unless they ask (``caplog`` still sees every record).

Progress.  :class:`Progress` is a ``tqdm.auto`` bar (a widget in JupyterLab, text in a terminal)
plus log lines: every ``FACTERLAB_LOG_EVERY`` seconds (default 15) one INFO line says how far the
phase is, how many predictions were answered from the cache and how many were generated, and an
estimate of the time left from the measured rate of new predictions.  The prediction cache reports
its hits and misses with :func:`record_predictions` to every open :class:`Progress`.

In a notebook a finished bar is replaced by its final text line (``calibration: 100%|...| 17/17``)
through the display's id, so an executed notebook (papermill, GitHub, nbconvert) shows where each
bar ended instead of the ``0%`` that the widget's text form had when it was first displayed.

>>> format_seconds(42.4), format_seconds(185), format_seconds(7300)
('42 s', '3 min 05 s', '2 h 01 min')
>>> p = Progress("demo", total=4, bar=False, every=None)
>>> p.update(2); record_predictions(cached=1, new=3, seconds=1.5); p.close()
>>> (p.n, p.cached, p.new)
(2, 1, 3)
"""

from __future__ import annotations

import logging
import math
import os
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "enable_logging",
    "auto_enable_logging",
    "Progress",
    "track",
    "loading",
    "record_predictions",
    "tqdm",
    "format_seconds",
    "in_kernel",
    "bar_mode",
    "ENV_BARS",
    "ENV_LOG",
    "ENV_LOG_EVERY",
]

ENV_LOG = "FACTERLAB_LOG"
ENV_LOG_EVERY = "FACTERLAB_LOG_EVERY"
DEFAULT_LOG_EVERY = 15.0
_OFF = ("off", "none", "0", "false", "no")

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------
# logging


class _StreamAtEmit(logging.StreamHandler):
    """Writes to whatever ``sys.stdout``/``sys.stderr`` is when a record comes (pytest and
    ipykernel replace them)."""

    def __init__(self, which: str):
        self.which = which
        super().__init__(getattr(sys, which))

    @property
    def stream(self):
        return getattr(sys, self.which)

    @stream.setter
    def stream(self, value):
        pass

    def emit(self, record: logging.LogRecord) -> None:
        std = sys.modules.get("tqdm.std")
        if std is not None and getattr(std.tqdm, "_instances", None):
            with std.tqdm.external_write_mode(file=self.stream):  # a text bar is cleared, then redrawn
                super().emit(record)
        else:
            super().emit(record)


class _Format(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        record.short = record.name.removeprefix("facterlab.")
        return super().format(record)


def _not_handled_below(record: logging.LogRecord) -> bool:
    """Skip records whose own logger already prints them (``facterlab.threads`` in the CLI)."""
    return not logging.getLogger(record.name).handlers or record.name == "facterlab"


def in_kernel() -> bool:
    """Whether this process is a Jupyter kernel (without importing IPython)."""
    ipython = sys.modules.get("IPython")
    if ipython is None or "ipykernel" not in sys.modules:
        return False
    shell = ipython.get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _level(level: int | str | None) -> int | None:
    if level is None:
        return None
    if isinstance(level, int) and not isinstance(level, bool):
        return level
    text = str(level).strip()
    if text.lower() in _OFF:
        return None
    value = logging.getLevelName(text.upper())
    if not isinstance(value, int):
        raise ValueError(f"unknown log level {level!r}; choose DEBUG, INFO, WARNING, ERROR or off")
    return value


def enable_logging(level: int | str | None = "INFO", stream: str | None = None) -> logging.Logger:
    """Show facterlab's log records at ``level`` and above (``"off"``/``None``: remove the handler).

    One handler on the ``facterlab`` logger (never the root logger), replaced on each call; lines
    look like ``11:34:17 facter.pipeline: calibration: 17 rows under the neutral system prompt``.  ``stream``: ``"stdout"`` or
    ``"stderr"`` (default: stdout inside a Jupyter kernel, else stderr).  Returns the logger.
    """
    logger = logging.getLogger("facterlab")
    for h in [h for h in logger.handlers if getattr(h, "_facterlab_handler", False)]:
        logger.removeHandler(h)
    value = _level(level)
    if value is None:
        logger.setLevel(logging.NOTSET)
        return logger
    which = stream or ("stdout" if in_kernel() else "stderr")
    if which not in ("stdout", "stderr"):
        raise ValueError(f"stream must be 'stdout' or 'stderr', got {stream!r}")
    handler = _StreamAtEmit(which)
    handler._facterlab_handler = True  # type: ignore[attr-defined]
    handler.setFormatter(_Format("%(asctime)s %(short)s: %(message)s", datefmt="%H:%M:%S"))
    handler.addFilter(_not_handled_below)
    logger.addHandler(handler)
    logger.setLevel(value)
    return logger


def auto_enable_logging(environ=None) -> bool:
    """Called when facterlab is imported: ``FACTERLAB_LOG`` if set, else INFO inside a Jupyter kernel,
    else nothing.  Returns whether a handler was installed."""
    environ = os.environ if environ is None else environ
    wanted = environ.get(ENV_LOG)
    if wanted is not None and wanted.strip():
        try:
            value = _level(wanted)
        except ValueError:  # the command line refuses it in one line (facterlab.envvars); a kernel goes on
            if in_kernel():
                log.warning("%s=%r is not a log level (DEBUG, INFO, WARNING, off); ignored", ENV_LOG, wanted)
            return False
        if value is None:
            return False
        enable_logging(value)
        return True
    if in_kernel():
        enable_logging("INFO", stream="stdout")
        return True
    return False


def format_seconds(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``2 h 01 min``."""
    s = int(round(max(0.0, float(seconds))))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {(s % 3600) // 60:02d} min"


def _log_every() -> float:
    from facterlab import envvars

    value = envvars.get(ENV_LOG_EVERY)  # finite seconds in [0, 86400]; nan, inf or words: one line
    return DEFAULT_LOG_EVERY if value is None else float(value)


# ---------------------------------------------------------------------------------------------
# bars


ENV_BARS = "FACTERLAB_BARS"
BAR_MODES = ("live", "final", "off")
LIVE_MININTERVAL = 1.0  # seconds between redraws of a live text bar in a notebook


_warned_bars: set = set()


def bar_mode(environ=None) -> str:
    """How bars are drawn: ``FACTERLAB_BARS`` if set (``live``, ``final`` or ``off``), else ``live``
    (a text bar redrawn in place) in a terminal and in a JupyterLab kernel, and ``final`` (one text
    line when the bar closes) in a kernel without a browser (papermill, ``facterlab reproduce``,
    nbconvert), where every redraw would stay in the executed notebook and in reproduce's output.

    >>> bar_mode({"FACTERLAB_BARS": "off"}), bar_mode({}), bar_mode({"FACTERLAB_BARS": "fast"})
    ('off', 'live', 'live')
    """
    environ = os.environ if environ is None else environ
    wanted = environ.get(ENV_BARS, "").strip().lower()
    if wanted in BAR_MODES:
        return wanted
    if wanted and wanted not in _warned_bars:  # a typo costs the choice, not the run
        _warned_bars.add(wanted)
        log.warning("%s=%r is not one of %s; ignored", ENV_BARS, wanted, ", ".join(BAR_MODES))
    if in_kernel() and not environ.get("JPY_SESSION_NAME"):  # JupyterLab's kernels have it; papermill's not
        return "final"
    return "live"


class _Discard:
    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


_FINAL_CLASS: Any = None


def _final_line_class():
    """A text bar that draws nothing while it runs and prints its final line when it closes."""
    global _FINAL_CLASS
    if _FINAL_CLASS is None:
        from tqdm.std import tqdm as std

        class FinalLineBar(std):
            def __init__(self, *args, **kwargs):
                self._out = kwargs.pop("file", None)
                kwargs.pop("mininterval", None)
                super().__init__(*args, file=_Discard(), mininterval=float("inf"), **kwargs)

            def close(self):
                if self.disable:
                    return
                line = self.format_meter(**self.format_dict)
                super().close()
                print(line, file=self._out or sys.stdout, flush=True)

        _FINAL_CLASS = FinalLineBar
    return _FINAL_CLASS


def tqdm(*args, **kwargs):
    """A text progress bar (``tqdm.std``, same arguments), drawn as :func:`bar_mode` says.

    Never the ipywidgets bar of ``tqdm.auto``: while a cell with widget bars runs, JupyterLab's status
    bar reads "Idle" (ipykernel 7 answers the widgets' comm traffic on a subshell, concurrently with
    the cell, and each answer ends with an ``idle`` status that JupyterLab shows; docs/PROGRESS.md).
    In a notebook the text bar goes to the cell's stdout, redrawn at most once a second."""
    from tqdm.std import tqdm as std

    mode = bar_mode()
    if mode == "off":
        kwargs["disable"] = True
        return std(*args, **kwargs)
    if in_kernel():
        kwargs.setdefault("file", sys.stdout)
        if mode == "final":
            return _final_line_class()(*args, **kwargs)
        kwargs["mininterval"] = max(float(kwargs.get("mininterval", 0.1)), LIVE_MININTERVAL)
        kwargs.setdefault("ncols", 100)
    elif mode == "final":
        return _final_line_class()(*args, **kwargs)
    return std(*args, **kwargs)


@contextmanager
def loading(what: str, log: logging.Logger | None = None) -> Iterator[None]:
    """Log ``loading <what>`` and ``<what> loaded in N s`` around a model load, with transformers' own
    progress bars ("Loading weights") off meanwhile: their widget's text form would stay at ``0%`` in
    an executed notebook, and the load is one step for the reader."""
    logger = log or logging.getLogger(__name__)
    logger.info("loading %s", what)
    t0 = time.monotonic()
    restore = None
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # no transformers: nothing to silence
        pass
    else:
        if hf_logging.is_progress_bar_enabled():
            hf_logging.disable_progress_bar()
            restore = hf_logging.enable_progress_bar
    try:
        yield
    finally:
        if restore is not None:
            restore()
    logger.info("%s loaded in %s", what, format_seconds(time.monotonic() - t0))


# ---------------------------------------------------------------------------------------------
# progress of a phase


_open = threading.local()


def _open_progress() -> list:
    refs = getattr(_open, "refs", None)
    if refs is None:
        refs = _open.refs = []
    return refs


def record_predictions(cached: int = 0, new: int = 0, seconds: float = 0.0) -> None:
    """Count predictions answered from the cache (``cached``) and generated (``new``, in ``seconds``)
    in every open :class:`Progress` of this thread (the prediction cache calls this)."""
    for ref in list(_open_progress()):
        p = ref()
        if p is not None:
            p._predictions(int(cached), int(new), float(seconds))


class Progress:
    """A phase of work with an optional bar and periodic log lines (module docstring).

    ``total``: units of work (rows) or None; ``bar``: show a tqdm bar; ``leave``: keep the finished
    bar; ``advance_on_predictions``: each generated prediction moves the bar by one (for phases
    whose bar counts requests answered inside one long ``predict`` call); ``every``: seconds between
    log lines (default ``FACTERLAB_LOG_EVERY`` or 15; None: no periodic lines); ``summary``: log a
    line when closed (INFO when the phase took ``summary_after`` seconds or more, made or reused
    predictions, or logged on the way; DEBUG otherwise).  Use as a context manager or call :meth:`close`.
    """

    def __init__(
        self,
        what: str,
        total: int | None = None,
        unit: str = "rows",
        log: logging.Logger | None = None,
        bar: bool = True,
        leave: bool = True,
        advance_on_predictions: bool = False,
        every: float | None | str = "default",
        summary: bool = True,
        summary_after: float = 1.0,
    ):
        self.what, self.total, self.unit = what, (None if total is None else int(total)), unit
        self.log = log or logging.getLogger(__name__)
        self.n = self.new = self.cached = 0
        self.n_batches = self.largest_batch = 0  # generated batches (one record_predictions(new=...) each)
        self.gen_seconds = 0.0
        self.advance_on_predictions, self.summary = advance_on_predictions, summary
        self.summary_after = float(summary_after)
        self.every = _log_every() if every == "default" else (None if every is None else float(every))
        self.t0 = time.monotonic()
        self._last_log = self.t0
        self.n_logged = 0
        self.closed = False
        # without a browser (bar mode "final") the summary line below is the record: no second, bar-shaped one
        self._bar = tqdm(total=self.total, desc=what, unit=unit, leave=leave) if bar and bar_mode() != "final" else None
        self._ref = weakref.ref(self)
        _open_progress().append(self._ref)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(failed=exc_type is not None)

    # -- counting
    def update(self, n: int = 1) -> None:
        """Count ``n`` more units done (nothing for ``n <= 0``), move the bar and log when a log line is due.

        Parameters
        ----------
        n : int, default 1
            Units done since the last update.
        """
        if n <= 0:
            return
        self.n += int(n)
        if self._bar is not None:
            self._bar.update(int(n))
        self._maybe_log()

    def update_to(self, n: int) -> None:
        """Move to ``n`` units done (never backwards)."""
        self.update(int(n) - self.n)

    def _predictions(self, cached: int = 0, new: int = 0, seconds: float = 0.0) -> None:
        self.cached += cached
        self.new += new
        self.gen_seconds += seconds
        if new:
            self.n_batches += 1
            self.largest_batch = max(self.largest_batch, new)
        if self.advance_on_predictions and new:
            room = new if self.total is None else max(0, min(new, self.total - self.n))
            self.update(room)
        else:
            self._maybe_log()

    # -- reporting
    def elapsed(self) -> float:
        """Seconds since the progress started (monotonic clock)."""
        return time.monotonic() - self.t0

    def predicted(self) -> int:
        """Units with a prediction: at least the units processed; more when predictions run ahead of
        the rows (the monitor predicts a batch ahead of the row it processes).  Capped at ``total``."""
        ahead = self.new + self.cached
        return self.n if self.total is None else min(self.total, max(self.n, ahead))

    def eta(self) -> float | None:
        """Seconds left from measured rates, or None ("unknown") before anything was measured.

        With generated predictions: the rows without a prediction yet (:meth:`predicted`), times the
        share of rows that needed a new prediction so far, in batches of the largest batch seen (a
        last, partial batch costs a whole one: generation pays per batch, not per prediction), at the
        measured wall time per generated batch.  Without predictions: the rows left at the measured
        rate of rows."""
        if self.total is None:
            return None
        elapsed = self.elapsed()
        left = max(0, self.total - self.predicted())
        if left == 0:
            return 0.0
        if self.new > 0 and self.n_batches > 0:
            share_new = self.new / (self.new + self.cached)
            batches_left = math.ceil(left * share_new / self.largest_batch)
            return batches_left * elapsed / self.n_batches
        if self.n <= 0:
            return None
        return left * elapsed / self.n

    def status(self) -> str:
        """One line: ``calibration: 8/17 rows (47%), 40 s; predictions 8 new (0.20/s), 0 cached; about 46 s left``.

        When predictions run ahead of the rows processed: ``pass 1/3: 0/12 rows processed, 8 predicted
        (67%), 27 s; ...``; before any rate is measured: ``time left unknown``."""
        elapsed = self.elapsed()
        predicted = self.predicted()
        if self.total is not None and predicted > self.n:
            done = f"{self.n}/{self.total} {self.unit} processed, {predicted} predicted"
            if self.total:
                done += f" ({100 * predicted / self.total:.0f}%)"
        else:
            done = f"{self.n}/{self.total} {self.unit}" if self.total is not None else f"{self.n} {self.unit}"
            if self.total:
                done += f" ({100 * self.n / self.total:.0f}%)"
        head = f"{done}, " if self.total is not None or self.n else ""
        parts = [f"{self.what}: {head}{format_seconds(elapsed)}"]
        if self.new or self.cached:
            rate = f" ({self.new / elapsed:.2f}/s)" if self.new and elapsed > 0 else ""
            parts.append(f"predictions {self.new} new{rate}, {self.cached} cached")
        elif self.n and elapsed > 0 and not self.closed:
            parts.append(f"{self.n / elapsed:.3g} {self.unit}/s")
        finished = self.closed or (self.total is not None and self.n >= self.total)
        if not finished and self.total is not None:
            eta = self.eta()
            parts.append("time left unknown" if eta is None else f"about {format_seconds(eta)} left")
        return "; ".join(parts)

    def _maybe_log(self) -> None:
        if self.every is None or self.closed or (self.total is not None and self.n >= self.total):
            return  # finished: close() says so
        now = time.monotonic()
        if now - self._last_log >= self.every:
            self._last_log = now
            self.n_logged += 1
            self.log.info(self.status())

    def close(self, failed: bool = False) -> None:
        """Close the bar and log the summary (INFO when the phase took ``summary_after`` seconds or more,
        made or reused predictions, or logged on the way; DEBUG otherwise)."""
        if self.closed:
            return
        self.closed = True
        refs = _open_progress()
        if self._ref in refs:
            refs.remove(self._ref)
        if self._bar is not None:
            self._bar.close()
        # a phase answered from the cache is logged too: pass 1 of a run that reuses predictions is
        # still pass 1 for the reader (otherwise the first line seen would say pass 2)
        slow = self.elapsed() >= self.summary_after
        level = logging.INFO if (slow or self.new or self.cached or self.n_logged) else logging.DEBUG
        if not self.summary and not failed:
            return
        self.log.log(logging.WARNING if failed else level, self.status() + (" (stopped by an error)" if failed else ""))


def track(
    iterable,
    what: str,
    total: int | None = None,
    unit: str = "runs",
    log: logging.Logger | str | None = None,
    show: bool = True,
):
    """Iterate over ``iterable`` as a :class:`Progress` phase: a text bar, a log line every
    ``FACTERLAB_LOG_EVERY`` seconds with the count, rate and time left, and a summary line (phases of
    a second or more).  ``show=False``: silent (no bar, no lines).  ``total`` defaults to ``len(iterable)``;
    ``log``: a logger or its name (default ``facterlab.progress``).

    >>> list(track(range(3), "demo", show=False))
    [0, 1, 2]
    """
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)
    logger = logging.getLogger(log) if isinstance(log, str) else log
    phase = Progress(
        what, total=total, unit=unit, log=logger, bar=show, every="default" if show else None, summary=show
    )
    try:
        for item in iterable:
            yield item
            phase.update(1)
    except GeneratorExit:  # the caller stopped early: not an error
        phase.close()
        raise
    except BaseException:
        phase.close(failed=show)
        raise
    phase.close()
