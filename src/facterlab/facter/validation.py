"""One validation pass over a run's configuration, before any data is read or any model is called.

:func:`validate_config` checks every bound of a :class:`~facterlab.config.RunConfig` at once and
raises :class:`ConfigError` (a ``ValueError``) listing every problem, each naming the parameter, the
value given and a value that would work.  For the calibration set it names the smallest ``n_rows``
that gives a defined conformal quantile for the chosen ``alpha`` and ``calib_frac``.

:func:`check_split` repeats the calibration-size check on the split actually built (when ``n_rows``
is the dataset's default) and :func:`check_out_dir` checks that the results root can hold a run
folder; both run before any model call.

>>> from facterlab.config import preset
>>> validate_config(preset())
>>> smallest_n_rows(0.10, 0.7)
13
>>> try:
...     validate_config(preset(facter__passes=0, data__n_rows=10))
... except ConfigError as e:
...     print(e)
invalid run configuration (2 problems):
  - data.n_rows = 10 is too small for alpha = 0.1: the calibration split (calib_frac = 0.7) gets 7 rows, the conformal quantile needs at least 9; use data.n_rows >= 13 (or a larger alpha)
  - facter.passes = 0: must be an integer >= 1 (e.g. 3)
"""

from __future__ import annotations

import math
import numbers
import os
import tempfile
from pathlib import Path

from facterlab.facter.conformal import min_calibration_size

__all__ = ["ConfigError", "validate_config", "smallest_n_rows", "check_split", "check_out_dir"]


class ConfigError(ValueError):
    """A run configuration that cannot work; ``problems`` lists one sentence per bad parameter."""

    def __init__(self, problems: list):
        self.problems = list(problems)
        head = f"invalid run configuration ({len(self.problems)} problem{'s' if len(self.problems) != 1 else ''}):"
        super().__init__("\n".join([head] + [f"  - {p}" for p in self.problems]))


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_real(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(float(v))


def smallest_n_rows(alpha: float, calib_frac: float) -> int:
    """Smallest ``n_rows`` whose calibration split (``round(calib_frac * n)`` rows) gives a defined
    conformal quantile at ``alpha`` and leaves at least one test row."""
    need = min_calibration_size(alpha)
    n = 2
    while True:
        n_calib = int(round(calib_frac * n))
        if need <= n_calib < n:
            return n
        n += 1


def _int_at_least(problems: list, name: str, value, low: int, example) -> None:
    if not _is_int(value) or value < low:
        problems.append(f"{name} = {value!r}: must be an integer >= {low} (e.g. {example})")


def _real_in(problems: list, name: str, value, lo: float, hi: float, lo_open: bool, hi_open: bool, example) -> None:
    ok = _is_real(value)
    if ok:
        v = float(value)
        ok = (v > lo if lo_open else v >= lo) and (v < hi if hi_open else v <= hi)
    if not ok:
        lb = "(" if lo_open else "["
        rb = ")" if hi_open else "]"
        hi_s = "inf" if math.isinf(hi) else f"{hi:g}"
        problems.append(f"{name} = {value!r}: must be a number in {lb}{lo:g}, {hi_s}{rb} (e.g. {example})")


def config_problems(cfg) -> list:
    """Every problem of ``cfg`` as one sentence each (empty list: the config is valid)."""
    p: list = []
    _int_at_least(p, "seed", cfg.seed, 0, 0)
    d, m, f, mt = cfg.data, cfg.model, cfg.facter, cfg.metrics
    # data
    _int_at_least(p, "data.seed", d.seed, 0, 0)
    _int_at_least(p, "data.demographics_seed", d.demographics_seed, 0, 0)
    _int_at_least(p, "data.history_len", d.history_len, 1, 10)
    _int_at_least(p, "data.future_window", d.future_window, 1, 10)
    _int_at_least(p, "data.n_candidates", d.n_candidates, 0, 40)
    if not (_is_real(d.min_rating) and 1 <= float(d.min_rating) <= 5):
        p.append(f"data.min_rating = {d.min_rating!r}: must be a rating in [1, 5] (e.g. 4)")
    if d.max_reviews is not None:
        _int_at_least(p, "data.max_reviews", d.max_reviews, 1, 1_000_000)
    calib_ok = _is_real(d.calib_frac) and 0 < float(d.calib_frac) < 1
    alpha_ok = _is_real(f.alpha) and 0 < float(f.alpha) < 1
    if d.n_rows is not None:
        if not _is_int(d.n_rows) or d.n_rows < 2:
            need = smallest_n_rows(f.alpha, d.calib_frac) if calib_ok and alpha_ok else 2
            p.append(f"data.n_rows = {d.n_rows!r}: must be an integer >= {need} (or None for the dataset's default)")
        elif calib_ok and alpha_ok:
            p.extend(_split_problems(d.n_rows, int(round(d.calib_frac * d.n_rows)), f.alpha, d.calib_frac))
    if cfg.protocol == "rank" and _is_int(d.n_candidates) and _is_int(mt.k) and d.n_candidates < max(2, mt.k):
        p.append(
            f"data.n_candidates = {d.n_candidates!r}: the rank protocol ranks the candidates and needs at "
            f"least metrics.k = {mt.k} of them (e.g. 40)"
        )
    # model
    _int_at_least(p, "model.batch_size", m.batch_size, 1, 8)
    _int_at_least(p, "model.max_new_tokens", m.max_new_tokens, 1, 250)
    _real_in(p, "model.temperature", m.temperature, 0, math.inf, False, True, 0.7)
    _real_in(p, "model.top_p", m.top_p, 0, 1, True, False, 0.95)
    _real_in(p, "model.repetition_penalty", m.repetition_penalty, 0, math.inf, True, True, 1.2)
    if m.max_prompt_tokens is not None:
        _int_at_least(p, "model.max_prompt_tokens", m.max_prompt_tokens, 1, 2048)
    for name in ("llm", "encoder"):
        v = getattr(m, name)
        if not isinstance(v, str) or not v.strip():
            p.append(f"model.{name} = {v!r}: must be a model name or path (e.g. 'smollm2-135m')")
    # facter
    _int_at_least(p, "facter.passes", f.passes, 1, 3)
    _real_in(p, "facter.lam", f.lam, 0, math.inf, False, True, 0.7)
    _real_in(p, "facter.tau_rho", f.tau_rho, -1, 1, False, False, 0.9)
    if f.tau_x is not None:
        _real_in(p, "facter.tau_x", f.tau_x, 0, math.inf, False, True, 0.5)
    _real_in(p, "facter.hoeffding_delta", f.hoeffding_delta, 0, 1, True, True, 0.05)
    _real_in(p, "facter.gamma", f.gamma, 0, 1, True, False, 0.95)
    _real_in(p, "facter.eta", f.eta, 0, math.inf, False, True, 0.05)
    _int_at_least(p, "facter.buffer_size", f.buffer_size, 1, 50)
    _int_at_least(p, "facter.rule_min_count", f.rule_min_count, 1, 3)
    _int_at_least(p, "facter.max_rules_per_attr", f.max_rules_per_attr, 1, 5)
    # metrics
    _int_at_least(p, "metrics.k", mt.k, 1, 10)
    _int_at_least(p, "metrics.snsr_min_group", mt.snsr_min_group, 1, 30)
    _int_at_least(p, "metrics.cfr_rows", mt.cfr_rows, 1, 200)
    _int_at_least(p, "metrics.fairllm_users", mt.fairllm_users, 1, 100)
    hi = 100.0 if mt.mapping == "rapidfuzz" else 1.0
    _real_in(p, "metrics.map_threshold", mt.map_threshold, 0, hi, False, False, 85 if hi == 100 else 0.65)
    return sorted(p)


def _split_problems(n_rows: int, n_calib: int, alpha: float, calib_frac: float) -> list:
    need = min_calibration_size(alpha)
    if need <= n_calib < n_rows:
        return []
    smallest = smallest_n_rows(alpha, calib_frac)
    if n_calib >= n_rows or n_calib < 1:
        return [
            f"data.n_rows = {n_rows} with data.calib_frac = {calib_frac:g} leaves an empty split; "
            f"use data.n_rows >= {smallest}"
        ]
    return [
        f"data.n_rows = {n_rows} is too small for alpha = {alpha:g}: the calibration split "
        f"(calib_frac = {calib_frac:g}) gets {n_calib} rows, the conformal quantile needs at least {need}; "
        f"use data.n_rows >= {smallest} (or a larger alpha)"
    ]


def validate_config(cfg, out_dir: os.PathLike | str | None = None) -> None:
    """Raise :class:`ConfigError` listing every invalid bound of ``cfg`` (and a results root that cannot
    hold a run folder, when ``out_dir`` is given); return None when all is well.  Reads no data and
    loads no model."""
    problems = config_problems(cfg)
    if out_dir is not None:
        try:
            check_out_dir(out_dir)
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        raise ConfigError(problems)


def check_split(cfg, n_calib: int, n_test: int) -> None:
    """The calibration-size check on the split actually built (the dataset's default ``n_rows`` or
    fewer eligible rows); raises :class:`ConfigError` before any model call."""
    problems = _split_problems(n_calib + n_test, n_calib, cfg.facter.alpha, cfg.data.calib_frac)
    if n_test < 1:
        problems.append(f"the test split is empty ({n_calib} calibration rows): increase data.n_rows")
    if problems:
        raise ConfigError(problems)


def check_out_dir(root: os.PathLike | str) -> Path:
    """Check that ``<root>/runs`` is (or can be made) a writable folder; return it.

    A ``root`` or ``root/runs`` that is a file, or a folder that cannot be written, is a ValueError
    naming the path and the parameter (``--out-dir`` / ``out_dir`` / ``FACTERLAB_RESULTS``).
    """
    root = Path(root).expanduser()
    runs = root / "runs"
    for p in (root, runs):
        if p.exists() and not p.is_dir():
            raise ValueError(
                f"out_dir {str(root)!r}: {str(p)!r} is a file, not a folder; pass a folder as "
                "--out-dir / out_dir (or FACTERLAB_RESULTS) for the run folders"
            )
    for anc in [runs, *runs.parents]:
        if anc.exists():
            if not anc.is_dir():
                raise ValueError(f"out_dir {str(root)!r}: {str(anc)!r} is a file, not a folder")
            break
    try:
        runs.mkdir(parents=True, exist_ok=True)
        probe = tempfile.mkdtemp(prefix=".probe-", dir=runs)
        os.rmdir(probe)
    except OSError as exc:
        raise ValueError(
            f"out_dir {str(root)!r}: cannot write run folders under {str(runs)!r} "
            f"({exc.strerror or exc}); pass a writable folder as --out-dir / out_dir"
        ) from None
    return runs
