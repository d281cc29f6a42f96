"""One validation pass over a run's configuration, before any data is read or any model is called.

:func:`validate_config` checks every bound of a :class:`~facterlab.config.RunConfig` at once and
raises :class:`ConfigError` (a ``ValueError``) listing every problem, each naming the parameter, the
value given and a value that would work.  For the calibration set it names the smallest ``n_rows``
that gives a defined conformal quantile for the chosen ``alpha`` and ``calib_frac``.

:func:`check_split` repeats the calibration-size check on the split actually built (when ``n_rows``
is the dataset's default) and :func:`check_out_dir` checks that the results root can hold a run
folder; both run before any model call.

A value out of its bound is refused where it is given (:func:`~facterlab.config.preset` and
:func:`~facterlab.config.with_overrides` check each one); the command line builds its config unchecked
(``check_bounds=False``) so that this pass lists every problem at once:

>>> from facterlab.config import preset, with_overrides
>>> validate_config(preset())
>>> smallest_n_rows(0.10, 0.7)
13
>>> try:
...     validate_config(with_overrides(preset(), check_bounds=False, facter__passes=0, data__n_rows=10))
... except ConfigError as e:
...     print(e)
invalid run configuration (2 problems):
  - data.n_rows = 10 is too small for alpha = 0.1: the calibration split (calib_frac = 0.7) gets 7 rows, the conformal quantile needs at least 9; use data.n_rows >= 13 (or a larger alpha)
  - facter.passes = 0: must be an integer in [1, 100] (e.g. 3; the paper uses 3; each pass re-asks every test row)
"""

from __future__ import annotations

import errno
import numbers
import os
import shutil
import tempfile
from pathlib import Path

from facterlab.config import BOUNDS, FAKE_LLM, HASH_ENCODER, SIMULATED_LLM, bound_problems, field_default
from facterlab.facter.conformal import min_calibration_size
from facterlab.models.simulated import load_bias_table
from facterlab.paths import runs_dir

__all__ = [
    "ConfigError",
    "validate_config",
    "model_problems",
    "check_free_space",
    "estimated_run_bytes",
    "smallest_n_rows",
    "check_split",
    "check_out_dir",
]


class ConfigError(ValueError):
    """A run configuration that cannot work; ``problems`` lists one sentence per bad parameter."""

    def __init__(self, problems: list):
        self.problems = list(problems)
        head = f"invalid run configuration ({len(self.problems)} problem{'s' if len(self.problems) != 1 else ''}):"
        super().__init__("\n".join([head] + [f"  - {p}" for p in self.problems]))


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def smallest_n_rows(alpha: float, calib_frac: float) -> int:
    """Smallest ``n_rows`` whose calibration split (``round(calib_frac * n)`` rows) gives a defined
    conformal quantile at ``alpha`` and leaves at least one test row.

    Parameters
    ----------
    alpha : float
        Miscoverage level, in (0, 1).
    calib_frac : float
        Share of the rows that goes to calibration, in (0, 1).

    Returns
    -------
    int
        The smallest number of interaction rows that works.
    """
    need = min_calibration_size(alpha)
    n = 2
    while True:
        n_calib = int(round(calib_frac * n))
        if need <= n_calib < n:
            return n
        n += 1


def config_problems(cfg) -> list:
    """Every problem of ``cfg`` as one sentence each (empty list: the config is valid).

    Each numeric field is checked against its bound in :data:`facterlab.config.BOUNDS` (the one owner of
    bounds and defaults); then the checks that involve two fields (the calibration split for ``alpha``,
    the rank protocol's candidates) and the model names.

    Parameters
    ----------
    cfg : facterlab.config.RunConfig
        The run's configuration.

    Returns
    -------
    list of str
        One sentence per problem, sorted; empty when the configuration is valid.
    """
    p: list = []
    for section, obj in (
        ("", cfg),
        ("data", cfg.data),
        ("model", cfg.model),
        ("facter", cfg.facter),
        ("metrics", cfg.metrics),
        ("sim", cfg.sim),
    ):
        p.extend(bound_problems(section, obj))
    d, m, f, mt = cfg.data, cfg.model, cfg.facter, cfg.metrics
    calib_ok = BOUNDS["data"]["calib_frac"].contains(d.calib_frac)
    alpha_ok = BOUNDS["facter"]["alpha"].contains(f.alpha)
    if d.n_rows is not None and BOUNDS["data"]["n_rows"].contains(d.n_rows) and calib_ok and alpha_ok:
        p.extend(_split_problems(d.n_rows, int(round(d.calib_frac * d.n_rows)), f.alpha, d.calib_frac))
    if cfg.protocol == "rank" and _is_int(d.n_candidates) and _is_int(mt.k) and d.n_candidates < max(2, mt.k):
        p.append(
            f"data.n_candidates = {d.n_candidates!r}: the rank protocol ranks the candidates and needs at "
            f"least metrics.k = {mt.k} of them (e.g. {field_default('data', 'n_candidates')})"
        )
    for name in ("llm", "encoder"):
        v = getattr(m, name)
        if not isinstance(v, str) or not v.strip():
            p.append(f"model.{name} = {v!r}: must be a model name or path (e.g. {field_default('model', name)!r})")
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


def model_problems(cfg, llm: bool = True, encoder: bool = True) -> list:
    """The model names of ``cfg`` that cannot be loaded, one sentence each, found without reading data,
    hashing weights or loading anything (:func:`facterlab.models.registry.check_name`); the simulated and
    fake recommenders and the hash encoder are always there.

    Parameters
    ----------
    cfg : facterlab.config.RunConfig
        The run's configuration.
    llm, encoder : bool, default True
        Check the LLM name and the encoder name.

    Returns
    -------
    list of str
        One sentence per name that cannot be loaded.
    """
    from facterlab.models.registry import check_name

    out = []
    checks = []
    if llm and cfg.model.llm not in (SIMULATED_LLM, FAKE_LLM):
        checks.append(("model.llm", cfg.model.llm, "LLM"))
    if encoder and cfg.model.encoder != HASH_ENCODER:
        checks.append(("model.encoder", cfg.model.encoder, "encoder"))
    for label, name, kind in checks:
        if not isinstance(name, str) or not name.strip():
            continue  # config_problems names it
        try:
            check_name(name, kind)
        except (ValueError, FileNotFoundError) as exc:
            out.append(f"{label} = {name!r}: {exc}")
    return out


def validate_config(cfg, out_dir: os.PathLike | str | None = None, llm: bool = False, encoder: bool = False) -> None:
    """Raise :class:`ConfigError` listing every invalid bound of ``cfg`` (and a results root that cannot
    hold a run folder, when ``out_dir`` is given; the LLM and encoder names with ``llm`` / ``encoder``);
    return None when all is well.  Reads no data, loads no model and creates no folder.

    Parameters
    ----------
    cfg : facterlab.config.RunConfig
        The run's configuration.
    out_dir : path-like, optional
        The results root whose ``runs`` folder must be writable.
    llm, encoder : bool, default False
        Also check the LLM and encoder names (:func:`model_problems`).

    Returns
    -------
    None
        Raises :class:`ConfigError` listing every problem instead.
    """
    problems = config_problems(cfg)
    if cfg.model.llm == SIMULATED_LLM:
        try:
            load_bias_table(cfg.sim.bias_table)  # a missing or malformed --sim-bias-table file, before any work
        except ValueError as exc:
            problems.append(str(exc))
    if llm or encoder:
        problems.extend(model_problems(cfg, llm=llm, encoder=encoder))
    if out_dir is not None:
        try:
            check_out_dir(out_dir)
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        raise ConfigError(problems)


def check_split(cfg, n_calib: int, n_test: int) -> None:
    """The calibration-size check on the split actually built (the dataset's default ``n_rows`` or
    fewer eligible rows); raises :class:`ConfigError` before any model call.

    Parameters
    ----------
    cfg : facterlab.config.RunConfig
        The run's configuration.
    n_calib, n_test : int
        Sizes of the split actually built.

    Returns
    -------
    None
        Raises :class:`ConfigError` when the split cannot give a conformal quantile or has no test row.
    """
    problems = _split_problems(n_calib + n_test, n_calib, cfg.facter.alpha, cfg.data.calib_frac)
    if n_test < 1:
        problems.append(f"the test split is empty ({n_calib} calibration rows): increase data.n_rows")
    if problems:
        raise ConfigError(problems)


def check_out_dir(root: os.PathLike | str) -> Path:
    """Check that ``<root>/runs`` is a writable folder or can be made one; return it.  Creates nothing:
    the nearest existing folder on the way is probed with a temporary folder that is removed at once.

    A ``root`` or ``root/runs`` that is a file, or a folder that cannot be written, is a ValueError
    naming the path and the parameter (``--out-dir`` / ``out_dir`` / ``FACTERLAB_RESULTS``).

    Parameters
    ----------
    root : path-like
        The results root (``--out-dir`` / ``out_dir`` / ``FACTERLAB_RESULTS``).

    Returns
    -------
    pathlib.Path
        ``<root>/runs`` (not created).
    """
    root = Path(root).expanduser()
    runs = runs_dir(root)
    for p in (root, runs):
        if p.is_symlink() and not p.exists():  # a link to itself, or to nothing: found now, not after the run
            raise ValueError(
                f"out_dir {str(root)!r}: {str(p)!r} is a symbolic link that leads nowhere (a loop, or a "
                "missing target); remove it or point it at a folder"
            )
        if p.exists() and not p.is_dir():
            raise ValueError(
                f"out_dir {str(root)!r}: {str(p)!r} is a file, not a folder; pass a folder as "
                "--out-dir / out_dir (or FACTERLAB_RESULTS) for the run folders"
            )
    existing = next((a for a in [runs, *runs.parents] if a.exists()), None)
    if existing is None or not existing.is_dir():
        raise ValueError(f"out_dir {str(root)!r}: {str(existing)!r} is a file, not a folder")
    try:
        probe = tempfile.mkdtemp(prefix=".probe-", dir=existing)
        os.rmdir(probe)
    except OSError as exc:
        raise ValueError(
            f"out_dir {str(root)!r}: cannot write run folders under {str(runs)!r} "
            f"({exc.strerror or exc}); pass a writable folder as --out-dir / out_dir"
        ) from None
    return runs


#: bytes a run writes per interaction row and per pass of a method, from sizes on disk: a cached answer
#: (0.25 KB on average in the project's cache, at most about 1 KB with 250 new tokens), the embeddings of
#: the row's context and of its counterfactual (2.1 KB each in the SQLite cache: 28,033,024 bytes for
#: 13,193 vectors of 384 floats) and its line in a rows parquet file (0.15 KB: 55,156 bytes for 360
#: row-passes of a ``--model fake`` run), about 5.6 KB in all, rounded up to 8 KiB
BYTES_PER_ROW_PASS = 8192
#: fixed part of a run: the embeddings of the catalogue's titles (ML-1M's 3,883 titles at 2.1 KB: 8 MB),
#: the calibration table, JSON files and SQLite pages
BYTES_PER_RUN = 16 * 2**20


def estimated_run_bytes(cfg, n_rows: int | None = None) -> int:
    """A generous estimate of what a run of ``cfg`` writes (run folder and caches together):
    :data:`BYTES_PER_ROW_PASS` per row and pass (calibration, Neutral, Fair, FACTER's passes, CFR).

    Parameters
    ----------
    cfg : facterlab.config.RunConfig
        The run's configuration.
    n_rows : int, optional
        Interaction rows (default: ``cfg.data.n_rows``, else the largest dataset default, 3,750).

    Returns
    -------
    int
        Bytes, rounded up generously.
    """
    if n_rows is None:
        n_rows = cfg.data.n_rows if cfg.data.n_rows is not None else 3750  # the largest dataset default
    passes = 1 + 1 + 1 + int(cfg.facter.passes) + 1
    return BYTES_PER_RUN + int(n_rows) * passes * BYTES_PER_ROW_PASS


def _free_bytes(path: Path) -> int | None:
    for anc in [path, *path.parents]:
        if anc.exists():
            try:
                return shutil.disk_usage(anc).free
            except OSError:
                return None
    return None


def check_free_space(cfg, results_root: os.PathLike | str, cache: os.PathLike | str | None = None) -> None:
    """Raise OSError(ENOSPC) naming the folder when the results root or the cache has less free space than
    :func:`estimated_run_bytes`: a long run that could not be saved is refused before it starts.

    Parameters
    ----------
    cfg : facterlab.config.RunConfig
        The run's configuration.
    results_root : path-like
        The results root of the run.
    cache : path-like, optional
        The cache folder (default :func:`facterlab.paths.cache_dir`).

    Returns
    -------
    None
        Raises ``OSError(ENOSPC)`` naming the folder that is too full.
    """
    from facterlab.paths import cache_dir

    need = estimated_run_bytes(cfg)
    for label, folder in (("results", Path(results_root).expanduser()), ("cache", cache_dir(cache))):
        anc = next((a for a in [folder, *folder.parents] if a.exists()), None)
        if anc is not None and not os.access(anc, os.W_OK | os.X_OK):  # a read-only folder reports 0 bytes free
            raise PermissionError(
                errno.EACCES,
                f"Permission denied: the {label} folder cannot be written here ({str(anc)!r} is read-only for "
                f"this user); point {'FACTERLAB_CACHE' if label == 'cache' else '--out-dir / FACTERLAB_RESULTS'} "
                "at a writable folder",
                str(folder),
            )
        free = _free_bytes(folder)
        if free is not None and free < need:
            raise OSError(
                errno.ENOSPC,
                f"No space left on device: the {label} folder has {free / 2**20:.2f} MiB free, a run of "
                f"this size writes up to about {need / 2**20:.1f} MiB",
                str(folder),
            )
