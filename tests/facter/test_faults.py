"""Fault injection (docs/FAULTS.md): kills during every phase and during the run-folder write, then a
rerun compared byte for byte; every bad input gives its message before any model call; hostile model
output never aborts a run; degenerate outputs are counted and their fairness metrics are missing."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from facter_world import make_world

from facterlab.cli import main  # noqa: E402
from facterlab.config import preset, with_overrides  # noqa: E402
from facterlab.datatypes import PARSE_EMPTY, MissingValue, Prediction  # noqa: E402
from facterlab.facter.pipeline import run_experiment  # noqa: E402
from facterlab.facter.record import RunRecord  # noqa: E402
from facterlab.facter.runfolder import RUN_FILES, degenerate_summary, run_folder_problem  # noqa: E402
from facterlab.facter.validation import ConfigError, smallest_n_rows, validate_config  # noqa: E402
from facterlab.models.fake import FakeRecommender, HashEncoder  # noqa: E402
from facterlab.models.parsing import parse_titles, parse_with_reason  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).resolve().parents[1] / "helpers" / "fault_child.py"
COMPARED = list(RUN_FILES)  # timings.json and run.json hold wall-clock times: the only files allowed to differ


def _child(results: Path, fault: str, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "FACTERLAB_CACHE": str(cache), "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, str(CHILD), str(results), fault], env=env, capture_output=True, text=True, timeout=300
    )


def _folder_bytes(folder: Path) -> dict:
    return {f: (folder / f).read_bytes() for f in COMPARED}


def _run_folders(results: Path) -> list:
    runs = results / "runs"
    return sorted(p.name for p in runs.iterdir()) if runs.is_dir() else []


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """A complete run with no fault: its run id and file bytes."""
    base = tmp_path_factory.mktemp("ref")
    out = _child(base / "results", "none", base / "cache")
    assert out.returncode == 0, out.stderr
    run_id = out.stdout.strip().splitlines()[-1]
    return run_id, _folder_bytes(base / "results" / "runs" / run_id), base


@pytest.mark.parametrize("phase", ["prefetch", "calibration", "neutral", "fair", "facter", "metrics"])
def test_kill_during_a_phase_then_rerun_is_byte_identical(phase, reference, tmp_path):
    run_id, ref, _ = reference
    killed = _child(tmp_path / "results", f"phase:{phase}", tmp_path / "cache")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not (tmp_path / "results" / "runs" / run_id).exists()  # nothing half-saved
    again = _child(tmp_path / "results", "none", tmp_path / "cache")  # same LLM cache: answers reused
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip().splitlines()[-1] == run_id
    assert _folder_bytes(tmp_path / "results" / "runs" / run_id) == ref
    assert _run_folders(tmp_path / "results") == [run_id]  # no leftovers


@pytest.mark.parametrize("fault", ["write:rows_facter.parquet", "write:metrics.json", "write:rename"])
def test_kill_during_a_rewrite_keeps_or_drops_the_folder_never_half(fault, reference, tmp_path):
    run_id, ref, base = reference
    results = tmp_path / "results"
    shutil.copytree(base / "results", results)  # a finished run and its LLM cache
    shutil.copytree(base / "cache", tmp_path / "cache")
    folder = results / "runs" / run_id
    killed = _child(results, fault, tmp_path / "cache")  # a rerun that rewrites the folder is killed
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    if fault == "write:rename":  # the old folder was aside, the new one not in: the run counts as missing
        assert not folder.exists()
    else:  # the previous complete folder is untouched
        assert run_folder_problem(folder) is None and _folder_bytes(folder) == ref
    again = _child(results, "none", tmp_path / "cache")
    assert again.returncode == 0, again.stderr
    assert _folder_bytes(folder) == ref
    assert _run_folders(results) == [run_id]  # the dead writer's hidden folders were removed


def test_kill_during_a_first_write_leaves_no_folder(reference, tmp_path):
    run_id, ref, _ = reference
    killed = _child(tmp_path / "results", "write:rows_facter.parquet", tmp_path / "cache")
    assert killed.returncode == -signal.SIGKILL
    assert not (tmp_path / "results" / "runs" / run_id).exists()
    assert _child(tmp_path / "results", "none", tmp_path / "cache").returncode == 0
    assert _folder_bytes(tmp_path / "results" / "runs" / run_id) == ref


# ---------------------------------------------------------------------------------------------
# bad inputs: the message comes before any model call


class NeverCalled(FakeRecommender):
    def predict(self, requests):
        raise AssertionError("the recommender was called before the bad input was reported")


class NeverEncoder(HashEncoder):
    def encode(self, texts):
        raise AssertionError("the encoder was called before the bad input was reported")


def _cfg(**kw):
    base = dict(
        data__dataset="synthetic",
        data__n_rows=200,
        facter__tau_rho=0.8,
        metrics__cfr_rows=30,
        metrics__snsr_min_group=10,
    )
    base.update(kw)
    # unchecked, so a bad value reaches run_experiment / validate_config (preset() itself refuses it at once)
    return with_overrides(preset("repro"), check_bounds=False, **base)


@pytest.mark.parametrize(
    "overrides, expected",
    [
        ({"facter__passes": 0}, "facter.passes = 0: must be an integer in [1, 100]"),
        ({"facter__passes": 2.5}, "facter.passes = 2.5: must be an integer in [1, 100]"),
        ({"data__n_rows": 10}, "data.n_rows = 10 is too small for alpha = 0.1"),
        ({"data__n_rows": 10}, "use data.n_rows >= 13"),
        ({"metrics__snsr_min_group": 0}, "metrics.snsr_min_group = 0"),
        ({"metrics__cfr_rows": 0}, "metrics.cfr_rows = 0"),
        ({"seed": -1}, "seed = -1: must be an integer in [0, 4294967295]"),
        ({"model__max_new_tokens": 0}, "model.max_new_tokens = 0"),
        ({"model__batch_size": 0}, "model.batch_size = 0"),
        ({"facter__tau_rho": 1.5}, "facter.tau_rho = 1.5"),
    ],
)
def test_bad_config_is_reported_before_any_model_call(overrides, expected, tmp_path):
    ds = make_world(n_users=40)
    with pytest.raises(ConfigError) as ei:
        run_experiment(
            _cfg(**overrides),
            recommender=NeverCalled(ds.items),
            encoder=NeverEncoder(),
            dataset=ds,
            out_dir=tmp_path,
            progress=False,
        )
    assert expected in str(ei.value)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.parametrize(
    "overrides, expected",
    [
        ({"facter__passes": 0}, "facter.passes = 0: must be an integer in [1, 100]"),
        ({"model__batch_size": 0}, "model.batch_size = 0"),
        ({"seed": -1}, "seed = -1: must be an integer in [0, 4294967295]"),
    ],
)
def test_preset_and_with_overrides_refuse_a_value_out_of_its_bound_at_once(overrides, expected):
    """The Python API says what is wrong where the value is given, not when the run starts."""
    with pytest.raises(ValueError, match=re.escape(expected)):
        preset("repro", **overrides)
    with pytest.raises(ValueError, match=re.escape(expected)):
        with_overrides(preset("repro"), **overrides)
    assert with_overrides(preset("repro"), check_bounds=False, **overrides) is not None


def test_all_problems_at_once_and_smallest_n_rows():
    with pytest.raises(ConfigError) as ei:
        validate_config(_cfg(facter__passes=0, seed=-1, metrics__cfr_rows=0))
    assert len(ei.value.problems) == 3
    for alpha, frac in ((0.1, 0.7), (0.2, 0.7), (0.05, 0.5), (0.1, 0.9)):
        n = smallest_n_rows(alpha, frac)
        validate_config(_cfg(data__n_rows=n, data__calib_frac=frac, facter__alpha=alpha))
        with pytest.raises(ConfigError, match=f"use data.n_rows >= {n}"):
            validate_config(_cfg(data__n_rows=n - 1, data__calib_frac=frac, facter__alpha=alpha))


def test_split_built_from_the_data_is_checked_too():
    """With n_rows left to the dataset's default, the split actually built is checked (run_experiment
    calls check_split right after building the rows, before the models)."""
    from facterlab.facter.validation import check_split

    cfg = _cfg(data__n_rows=None)
    validate_config(cfg)
    with pytest.raises(
        ConfigError, match="gets 7 rows, the conformal quantile needs at least 9; use data.n_rows >= 13"
    ):
        check_split(cfg, 7, 3)
    with pytest.raises(ConfigError, match="test split is empty"):
        check_split(cfg, 50, 0)
    check_split(cfg, 9, 4)


def test_out_dir_that_is_a_file_is_reported_before_any_work(tmp_path):
    ds = make_world(n_users=40)
    f = tmp_path / "afile"
    f.write_text("x")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        run_experiment(
            _cfg(), recommender=NeverCalled(ds.items), encoder=NeverEncoder(), dataset=ds, out_dir=f, progress=False
        )


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--passes", "0"], "facter.passes = 0"),
        (["--seed", "-1"], "seed = -1"),
        (["--n-rows", "10"], "use data.n_rows >= 13"),
        (["--cfr-rows", "0"], "metrics.cfr_rows = 0"),
        (["--snsr-min-group", "0"], "metrics.snsr_min_group = 0"),
        (["--max-new-tokens", "0"], "model.max_new_tokens = 0"),
        (["--batch-size", "0"], "model.batch_size = 0"),
    ],
)
def test_cli_reports_bad_sizes_before_loading_anything(argv, expected, capsys, monkeypatch):
    import facterlab.facter.commands as cmds  # patched where the command looks it up, never in pipeline

    monkeypatch.setattr(cmds, "run_experiment", lambda *a, **k: pytest.fail("run_experiment was reached"))
    assert main(["run", "--dataset", "synthetic", "--no-progress", *argv]) == 1
    assert expected in capsys.readouterr().err


def test_cli_size_flags_reach_the_config():
    import argparse

    from facterlab.facter.commands import config_from_args, register

    p = argparse.ArgumentParser()
    register(p.add_subparsers())
    args = p.parse_args(
        ["run", "--max-new-tokens", "40", "--batch-size", "4", "--cfr-rows", "12", "--snsr-min-group", "5"]
    )
    cfg = config_from_args(args)
    assert (cfg.model.max_new_tokens, cfg.model.batch_size, cfg.metrics.cfr_rows, cfg.metrics.snsr_min_group) == (
        40,
        4,
        12,
        5,
    )
    with pytest.raises(SystemExit):
        p.parse_args(["run", "--passes", "2.5"])  # not silently 2


# ---------------------------------------------------------------------------------------------
# hostile model output


HOSTILE = [
    "[" * 1000,
    "[" * 100_000,
    "[1," * 50_000,
    "]" * 10_000,
    "```" * 5_000,
    '"' * 100_000,
    "\x00" * 1000,
    "{" * 5_000,
    '[{"title": ' * 3_000,
    "\ud800 lone surrogate",
    "x" * 1_000_000,
    "1. " * 10_000,
]


@pytest.mark.parametrize("text", HOSTILE, ids=lambda t: f"{t[:6]!r}x{len(t)}")
def test_parser_never_raises_and_stays_fast(text):
    t0 = time.perf_counter()
    titles, status, reason = parse_with_reason(text, 10)
    assert time.perf_counter() - t0 < 2.0
    assert isinstance(titles, tuple) and len(titles) <= 10 and reason
    assert parse_titles(text, 10) == (titles, status)


def test_parser_reasons():
    assert parse_with_reason(None, 5) == ((), PARSE_EMPTY, "no output")
    assert parse_with_reason("   ", 5)[2] == "no output"
    assert "nested too deeply" in parse_with_reason("[" * 5000, 5)[2]
    assert parse_with_reason("[" * 5000 + '] ["Heat"]', 5)[0] == ("Heat",)  # a list after the junk is found


class TextRecommender(FakeRecommender):
    """Answers every request with one raw text, parsed by the real parser (as the LLM recommender does)."""

    def __init__(self, items, text):
        super().__init__(items, protocol="open")
        self.text = text
        self.fingerprint = f"text-{len(text)}-{text[:20]}"

    def predict(self, requests):
        out = []
        for r in requests:
            titles, status = parse_titles(self.text, r.k)
            out.append(Prediction(titles=titles, parse_status=status, raw=self.text))
        return out


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "no row's answer gave a usable title"),
        ("[" * 1000, "no row's answer gave a usable title"),
        ('["Zzz qqq", "Blorp"]', "every row got the same list"),
    ],
)
def test_degenerate_output_is_counted_and_its_fairness_metrics_are_missing(text, reason, tmp_path):
    ds = make_world(n_users=80)
    cfg = _cfg(data__n_rows=80, facter__passes=2, metrics__cfr_rows=8, metrics__snsr_min_group=5)
    res = run_experiment(
        cfg,
        recommender=TextRecommender(ds.items, text),
        encoder=HashEncoder(),
        dataset=ds,
        out_dir=tmp_path,
        progress=False,
    )
    metrics = res.record.metrics
    for name, m in metrics.methods.items():
        assert m.degenerate is not None and m.n_degenerate == metrics.n_test and m.degenerate.all_degenerate, name
        assert isinstance(m.cfr_multi, MissingValue) and reason in m.cfr_multi.reason
        assert all(isinstance(v, MissingValue) for v in m.cfr_single.values())
        assert all(isinstance(v, MissingValue) for v in m.snsr_proxy.values())
        assert all(isinstance(x, MissingValue) for x in m.violations["fixed_q0"])
    saved = RunRecord.load(res.out_dir).metrics
    assert saved == metrics and saved.methods["facter"].n_degenerate == metrics.n_test
    from facterlab.reporting import tables as tb

    flat = saved.flat("neutral")
    assert flat["n_degenerate"] == metrics.n_test
    assert isinstance(flat["cfr_multi"], MissingValue) and isinstance(flat["violations_fixed_q0"], MissingValue)
    assert "Degenerate" in tb.method_table([saved], name="t", title="T", published=()).to_markdown()


def test_partly_degenerate_output_keeps_its_metrics_and_counts_the_rows():
    df = pd.DataFrame(
        {
            "pass": [1, 1, 1, 2, 2, 2],
            "titles": [["A"], ["B"], [], ["A"], [], []],
            "parse_status": ["ok", "ok", "empty", "ok", "empty", "empty"],
        }
    )
    s = degenerate_summary(df)  # last pass only
    assert (s["n_rows"], s["n_empty"], s["n_degenerate"], s["all_degenerate"]) == (3, 2, 2, False)


# ---------------------------------------------------------------------------------------------
# data


def _ml100k(d: Path) -> Path:
    from data_files import write_ml100k

    write_ml100k(d / "ml-100k")
    (d / "ml-100k" / "u.info").write_text("3 users\n2 items\n3 ratings\n")
    return d


def _summary(d: Path, capsys) -> tuple:
    rc = main(["data", "summary", "--dataset", "ml-100k", "--data-dir", str(d), "--json"])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


@pytest.mark.parametrize(
    "file, old, new, expected",
    [
        (
            "u.data",
            "1\t1\t5\t874965758\n1\t2\t3\t876893171\n2\t1\t4\t878542960\n",
            "",
            "no ratings (the file is empty)",
        ),
        ("u.data", "\t3\t", "\t4.5\t", "malformed line 2"),
        ("u.data", "\t3\t", "\t-3\t", "rating -3 is outside 1..5"),
        ("u.data", "\t3\t", "\t99\t", "rating 99 is outside 1..5"),
        ("u.user", "1|24|", "1|-24|", "age -24 is outside 1..120"),
    ],
)
def test_bad_data_values_are_errors_naming_file_and_line(file, old, new, expected, tmp_path, capsys):
    d = _ml100k(tmp_path)
    p = d / "ml-100k" / file
    p.write_text(p.read_text().replace(old, new, 1))
    rc, _, err = _summary(d, capsys)
    assert rc == 1 and expected in err and file in err


def test_utf8_resave_reads_correctly_and_checksums_warn(tmp_path, capsys, monkeypatch):
    from facterlab.data import download
    from facterlab.data.movielens import load_ml100k

    d = _ml100k(tmp_path)
    item = d / "ml-100k" / "u.item"
    original = load_ml100k(d / "ml-100k").items["title"].tolist()
    for f in ("u.data", "u.user", "u.item"):  # pin the fixture's files as the "originals"
        monkeypatch.setitem(download.KNOWN_FILE_SHA256, ("ml-100k", f), download.file_sha256(d / "ml-100k" / f))
    rc, out, err = _summary(d, capsys)
    assert rc == 0 and json.loads(out)["integrity"]["u.item"] == "original" and "WARNING" not in err
    item.write_bytes(item.read_bytes().decode("latin-1").encode("utf-8"))  # re-saved as UTF-8
    ds = load_ml100k(d / "ml-100k")
    assert ds.items["title"].tolist() == original and "Café Society (1995)" in original
    assert ds.info["encodings"]["u.item"] == "utf-8"
    rc, out, err = _summary(d, capsys)
    assert rc == 0 and json.loads(out)["integrity"]["u.item"] == "differs"
    assert "WARNING" in err and "u.item" in err and "differs from the pinned original" in err


def test_file_cut_at_a_line_boundary_is_reported(tmp_path, capsys):
    d = _ml100k(tmp_path)
    p = d / "ml-100k" / "u.data"
    p.write_text("".join(p.read_text().splitlines(keepends=True)[:2]))
    rc, out, err = _summary(d, capsys)
    assert rc == 0 and json.loads(out)["n_ratings"] == 2
    assert "says 3 ratings, the files hold 2" in err


def test_amazon_bad_rating_and_truncated_gzip(tmp_path):
    from data_files import write_amazon

    from facterlab.data.amazon import load_amazon

    d = write_amazon(
        tmp_path / "a", extra_review=json.dumps({"reviewerID": "UD", "asin": "A1", "overall": 9.0, "unixReviewTime": 5})
    )
    with pytest.raises(ValueError, match="overall 9.0 is outside 1..5"):
        load_amazon(d)
    d = write_amazon(tmp_path / "b")
    gz = d / "Movies_and_TV_5.json.gz"
    gz.write_bytes(gz.read_bytes()[:-12])
    with pytest.raises(ValueError, match="truncated or not the original"):
        load_amazon(d)
    d = write_amazon(tmp_path / "c")
    with gzip.open(d / "Movies_and_TV_5.json.gz", "wt") as fh:
        fh.write("")
    with pytest.raises(ValueError, match="no reviews"):
        load_amazon(d)


def test_offline_download_is_one_line_with_what_to_do(tmp_path, capsys, monkeypatch):
    import urllib.error
    import urllib.request

    def offline(*a, **k):
        raise urllib.error.URLError("[Errno -2] Name or service not known")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    assert main(["data", "download", "--dataset", "ml-100k", "--data-dir", str(tmp_path)]) == 1
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("facterlab data: error")]
    assert len(err) == 1 and "cannot download" in err[0] and "u.data" in err[0] and str(tmp_path) in err[0]
    assert not any(p.name.startswith(".part-") for p in (tmp_path / "ml-100k").iterdir())


def test_unpinned_download_records_its_checksum(tmp_path, monkeypatch):
    import io
    import urllib.request

    from facterlab.data import download

    payload = gzip.compress(b'{"x": 1}\n')
    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: io.BytesIO(payload))
    for dl in download.SOURCES["amazon"].downloads:
        download.fetch(dl, tmp_path / "amazon-movies-tv", log=io.StringIO())
    status = {r["file"]: r["status"] for r in download.file_integrity("amazon", tmp_path)}
    assert set(status.values()) == {"as downloaded"}
    (tmp_path / "amazon-movies-tv" / "Movies_and_TV_5.json.gz").write_bytes(payload[:-3])
    assert download.file_integrity("amazon", tmp_path)[0]["status"] == "changed since download"
    assert "recorded at download" in download.integrity_warnings("amazon", tmp_path)[0]


# ---------------------------------------------------------------------------------------------
# model fingerprints


def _model_dir(d: Path, fill: bytes) -> Path:
    d.mkdir(parents=True)
    (d / "config.json").write_text('{"model_type": "llama"}')
    (d / "model.safetensors").write_bytes(b"\0" * (1 << 17) + fill * (1 << 16))  # same head and size
    return d


def test_fingerprint_covers_the_full_weight_content(tmp_path):
    from facterlab.models.registry import resolve_llm

    a = resolve_llm(str(_model_dir(tmp_path / "a" / "model", b"\1")))
    b = resolve_llm(str(_model_dir(tmp_path / "b" / "model", b"\2")))
    assert a.fingerprint != b.fingerprint  # same folder name, same sizes, same first 128 KiB


def test_file_hashes_are_remembered_by_path_size_and_mtime(tmp_path, monkeypatch):
    from facterlab import filehash
    from facterlab.models import registry

    d = _model_dir(tmp_path / "m", b"\1")
    first = registry.resolve_llm(str(d)).fingerprint
    filehash._HASH_MEMO.clear()  # as in a new process: the on-disk record answers
    reads = []
    real_open = open

    def counting_open(path, *a, **k):
        if str(path).endswith("model.safetensors"):
            reads.append(path)
        return real_open(path, *a, **k)

    monkeypatch.setattr("builtins.open", counting_open)
    assert registry.resolve_llm(str(d)).fingerprint == first and reads == []
    w = d / "model.safetensors"
    data = w.read_bytes()
    w.write_bytes(data[:-1] + b"\3")  # same size, new content and mtime
    os.utime(w, ns=(time.time_ns(), time.time_ns() + 10_000_000))
    assert registry.resolve_llm(str(d)).fingerprint != first and len(reads) == 1


def test_hub_fingerprint_is_the_same_before_and_after_download(tmp_path, monkeypatch):
    from facterlab.models import registry

    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(registry, "_network_ok", lambda *a, **k: True)
    rev = "feedfacecafe0123456789abcdef0123456789ab"
    monkeypatch.setattr(registry, "_remote_revision", lambda repo: rev)
    before = registry.resolve_llm("acme/tiny").fingerprint
    repo = tmp_path / "hub" / "models--acme--tiny"
    (repo / "snapshots" / rev).mkdir(parents=True)
    (repo / "snapshots" / "0ld0ld").mkdir()  # an older snapshot beside it: refs/main decides
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(rev)
    monkeypatch.setattr(registry, "_remote_revision", lambda repo: pytest.fail("asked the hub again"))
    assert registry.resolve_llm("acme/tiny").fingerprint == before == "acme/tiny@feedfacecafe"


# ---------------------------------------------------------------------------------------------
# issue 24: bounds with one owner, names checked before data, races, full disk, strict data


def _one_error_line(err: str) -> str:
    """The error lines of a CLI call's stderr (INFO log lines aside); exactly one, never a traceback."""
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if "error" in ln.lower() and not ln.startswith("  - ")]
    assert len(lines) == 1, err
    return lines[0]


def test_every_numeric_config_field_has_a_bound_that_holds_its_default():
    import dataclasses

    from facterlab.config import BOUNDS, SECTIONS, bound_problems

    for section, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            numeric = any(t in str(f.type) for t in ("int", "float")) and "str" not in str(f.type)
            if numeric:
                assert f.name in BOUNDS[section], f"{section}.{f.name} has no bound in config.BOUNDS"
        for name in BOUNDS[section]:
            assert name in {f.name for f in dataclasses.fields(cls)}, f"BOUNDS names no field {section}.{name}"
        assert bound_problems(section, cls()) == []  # every default lies inside its bound
        for name, b in BOUNDS[section].items():
            assert b.hi < float("inf") and b.lo > -float("inf"), f"{section}.{name} needs both ends"


HUGE = [
    (["--passes", "99999999999999999999"], "facter.passes = 99999999999999999999: must be an integer in [1, 100]"),
    (["--max-new-tokens", "100000"], "model.max_new_tokens = 100000"),
    (["--batch-size", "5000"], "model.batch_size = 5000"),
    (["--snsr-min-group", "10000000"], "metrics.snsr_min_group = 10000000"),
    (["--cfr-rows", "10000000"], "metrics.cfr_rows = 10000000"),
    (["--seed", str(10**20)], f"seed = {10**20}: must be an integer in [0, 4294967295]"),
    (["--n-rows", "2000000"], "data.n_rows = 2000000"),
    (["--model", "simulated", "--sim-sigma", "1e308"], "sim.sigma = 1e+308: must be a number in [0, 10]"),
    (["--model", "simulated", "--sim-beta", "1e308"], "sim.beta = 1e+308"),
    (["--model", "simulated", "--sim-demote", "1e308"], "sim.demote = 1e+308"),
    (["--model", "simulated", "--sim-sigma", "nan"], "sim.sigma = nan"),
]


@pytest.mark.parametrize("argv, expected", HUGE, ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_values_past_the_upper_bound_are_refused_before_any_work(argv, expected, capsys, monkeypatch, tmp_path):
    import facterlab.facter.commands as cmds

    monkeypatch.setattr(cmds, "run_experiment", lambda *a, **k: pytest.fail("run_experiment was reached"))
    rc = main(["run", "--dataset", "synthetic", "--no-progress", "--out-dir", str(tmp_path / "r"), *argv])
    err = capsys.readouterr().err
    assert rc == 1 and expected in err
    assert not (tmp_path / "r").exists()  # a failed validation creates no folder


def test_threads_past_the_bound_and_nan_for_an_integer_flag_are_one_line(capsys):
    assert main(["--threads", "99999", "run", "--dataset", "synthetic"]) == 2
    assert "--threads 99999: must be an integer in [1, 1024]" in _one_error_line(capsys.readouterr().err)
    with pytest.raises(SystemExit) as ei:
        main(["run", "--passes", "nan"])
    assert ei.value.code == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "argument --passes: invalid int value: 'nan'" in line and "usage:" not in line


def test_help_shows_the_bounds_and_defaults_of_config(capsys):
    from facterlab.config import bound_hint

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for section, name in (("facter", "passes"), ("model", "max_new_tokens"), ("sim", "sigma"), ("", "seed")):
        assert bound_hint(section, name) in out


def test_notebook_parameters_have_the_config_bounds():
    from facterlab.params import ParameterError, validate

    declared = {"PASSES": 3, "SEEDS": [0], "LAMBDAS": [0.7], "N_USERS": 10_000}
    assert validate({"PASSES": "100", "SEEDS": "[0, 1]"}, declared) == {"PASSES": 100, "SEEDS": [0, 1]}
    for values, expected in (
        ({"PASSES": "99999999999999999999"}, "parameter PASSES: 99999999999999999999 is outside its bound"),
        ({"SEEDS": "[0, -1]"}, "parameter SEEDS: -1 is outside its bound"),
        ({"LAMBDAS": "[1e308]"}, "parameter LAMBDAS: 1e+308 is outside its bound"),
        ({"N_USERS": "100000000000"}, "parameter N_USERS: 100000000000 is outside its bound"),
    ):
        with pytest.raises(ParameterError, match=re.escape(expected)):
            validate(values, declared)


def test_set_given_twice_is_an_error_before_any_notebook(capsys, monkeypatch):
    import facterlab.reporting.reproduce as rep

    monkeypatch.setattr(rep, "run_notebooks", lambda **k: pytest.fail("notebooks were run"))
    assert main(["reproduce", "--set", "PASSES=3", "--set", "PASSES=4"]) == 2
    assert "--set PASSES is given twice ('3' and '4')" in _one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--model", "nope"], "model.llm = 'nope'"),
        (["--model", "smollm2"], "Did you mean 'smollm2-135m'?"),
        (["--encoder", "nope"], "model.encoder = 'nope'"),
        (["--model", "./no/such model"], "it is not a valid hub id"),
    ],
)
def test_unknown_model_names_are_refused_before_data_is_read_or_anything_written(
    argv, expected, capsys, monkeypatch, tmp_path
):
    import facterlab.data.loading as loading

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("FACTERLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(loading, "load_synthetic", lambda **k: pytest.fail("data was read"))
    rc = main(["run", "--dataset", "synthetic", "--no-progress", "--out-dir", str(tmp_path / "r"), *argv])
    assert rc == 1 and expected in capsys.readouterr().err
    assert not (tmp_path / "r").exists() and not (tmp_path / "cache").exists()


def test_any_os_error_is_one_line_naming_path_and_cause(capsys, monkeypatch):
    import errno

    import facterlab.facter.commands as cmds

    def boom(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied", "/some/where/runs/x")

    monkeypatch.setattr(cmds, "run_experiment", boom)
    assert main(["run", "--dataset", "synthetic", "--model", "fake", "--no-progress"]) == 1
    line = _one_error_line(capsys.readouterr().err)
    assert "permission denied: '/some/where/runs/x'" in line


def _barrier_pool(fn, args: list):
    """Run ``fn(*a)`` for every ``a`` in processes forked together, each released at the same instant."""
    import multiprocessing as mp

    t0 = time.time() + 3.0
    with mp.get_context("fork").Pool(len(args)) as pool:
        return pool.starmap(fn, [(t0, *a) for a in args])


def _build_interactions(t0, cache):
    from facterlab.config import DataConfig
    from facterlab.data.protocol import load_or_build_interactions

    ds = make_world(n_users=40)
    while time.time() < t0:
        pass
    try:
        inter = load_or_build_interactions(ds, DataConfig(dataset="synthetic", n_rows=60), cache=cache)
        return "ok", inter.content_hash, len(inter.rows)
    except Exception as exc:  # noqa: BLE001 - reported to the test
        return f"{type(exc).__name__}: {exc}", None, None


def test_concurrent_builds_of_one_interactions_entry_all_succeed(tmp_path):
    out = _barrier_pool(_build_interactions, [(str(tmp_path),)] * 12)
    assert [o[0] for o in out] == ["ok"] * 12, out
    assert len({(o[1], o[2]) for o in out}) == 1
    entries = sorted(p.name for p in (tmp_path / "interactions").iterdir())
    assert entries == [out[0][1]]  # one complete entry, no temporary folder left


def test_dead_builders_temporary_folders_are_removed(tmp_path):
    from facterlab.config import DataConfig
    from facterlab.data.protocol import load_or_build_interactions

    ds, cfg = make_world(n_users=40), DataConfig(dataset="synthetic", n_rows=60)
    h = load_or_build_interactions(ds, cfg, cache=tmp_path).content_hash
    folder = tmp_path / "interactions"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (folder / f".tmp-{h}-{dead.stdout.strip()}-abc").mkdir()  # a killed builder's folder
    legacy = folder / ".tmp-k3j4h5g6"  # the naming of older versions, untouched for two hours
    legacy.mkdir()
    os.utime(legacy, (time.time() - 7200, time.time() - 7200))
    alive = folder / f".tmp-{h}-{os.getpid()}-xyz"  # a live writer's: kept
    alive.mkdir()
    shutil.rmtree(folder / h)
    load_or_build_interactions(ds, cfg, cache=tmp_path)
    assert sorted(p.name for p in folder.iterdir()) == sorted([h, alive.name])


def _write_run(t0, src, runs):
    from facterlab.facter.runfolder import read_run_folder, write_run_folder

    res = read_run_folder(src)
    real_replace = os.replace

    def slow_replace(a, b):  # widen the window between "old folder aside" and "new folder in" (this child only)
        real_replace(a, b)
        time.sleep(0.05)

    os.replace = slow_replace
    while time.time() < t0:
        pass
    try:
        write_run_folder(Path(runs) / Path(src).name, res.record, res.calibration, res.rows)
        return "ok"
    except Exception as exc:  # noqa: BLE001 - reported to the test
        return f"{type(exc).__name__}: {exc}"


def test_concurrent_writers_of_one_run_id_all_succeed_with_one_complete_folder(reference, tmp_path):
    run_id, ref, base = reference
    src = base / "results" / "runs" / run_id
    out = _barrier_pool(_write_run, [(str(src), str(tmp_path / "runs"))] * 24)
    assert out == ["ok"] * 24, out
    assert _run_folders(tmp_path) == [run_id]  # no .tmp- or .old- folder left
    assert _folder_bytes(tmp_path / "runs" / run_id) == ref
    assert run_folder_problem(tmp_path / "runs" / run_id) is None


# a disk filled by a small tmpfs


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs (needs root and a kernel that allows the mount); skipped with the reason otherwise."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command: cannot make a small tmpfs to fill")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a 1 MiB tmpfs here ({(r.stderr or r.stdout).strip() or 'not permitted'})")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _fill(disk: Path, leave: int) -> None:
    free = shutil.disk_usage(disk).free
    with open(disk / "fill", "wb") as fh:
        fh.write(b"\0" * max(0, free - leave))


def test_full_disk_is_refused_before_a_run_when_the_size_is_known(small_disk, capsys, monkeypatch, tmp_path):
    import facterlab.facter.commands as cmds

    monkeypatch.setattr(cmds, "run_experiment", lambda *a, **k: pytest.fail("the run started"))
    rc = main(["run", "--dataset", "synthetic", "--model", "fake", "--no-progress", "--out-dir", str(small_disk)])
    line = _one_error_line(capsys.readouterr().err)
    assert rc == 1 and "no space left on device: the results folder has" in line and str(small_disk) in line


def test_full_disk_during_the_write_is_one_line_and_leaves_no_partial_run(small_disk, capsys, monkeypatch, tmp_path):
    import facterlab.facter.commands as cmds

    monkeypatch.setattr(cmds, "check_free_space", lambda *a, **k: None)  # past the estimate: the disk fills mid-run
    monkeypatch.setenv("FACTERLAB_CACHE", str(tmp_path / "cache"))
    _fill(small_disk, 20_000)
    argv = ["run", "--dataset", "synthetic", "--model", "fake", "--n-rows", "40", "--no-progress"]
    rc = main([*argv, "--out-dir", str(small_disk / "r")])
    line = _one_error_line(capsys.readouterr().err)
    assert rc == 1 and "No space left on device" in line and str(small_disk / "r" / "runs") in line
    assert sorted(p.name for p in (small_disk / "r" / "runs").iterdir()) == []  # partial run discarded


def test_sqlite_cache_on_a_full_disk_reports_the_real_error(small_disk):
    import errno

    from facterlab.models.cache import PredictionCache

    cache = PredictionCache(small_disk / "llm.sqlite")
    _fill(small_disk, 50_000)
    with pytest.raises(OSError) as ei:
        for i in range(200):
            cache.put_predictions([(f"k{i}-{j}", Prediction(titles=("A",), raw="x" * 4000)) for j in range(10)])
    assert ei.value.errno == errno.ENOSPC and "database or disk is full" in str(ei.value)
    assert "cannot rollback" not in str(ei.value)


# checksums in every command that reads the data, --strict-data


def _pinned_ml100k(tmp_path, monkeypatch) -> Path:
    from facterlab.data import download

    d = _ml100k(tmp_path)
    for f in ("u.data", "u.user", "u.item"):
        monkeypatch.setitem(download.KNOWN_FILE_SHA256, ("ml-100k", f), download.file_sha256(d / "ml-100k" / f))
    p = d / "ml-100k" / "u.data"
    p.write_text(p.read_text().rstrip("\n")[:-3] + "\n")  # the last line cut, still four integers
    return d


def test_a_changed_data_file_warns_in_every_load_and_strict_data_refuses_it(tmp_path, monkeypatch, caplog, capsys):
    from facterlab.data import load_dataset
    from facterlab.data.loading import DataIntegrityError

    d = _pinned_ml100k(tmp_path, monkeypatch)
    monkeypatch.setenv("FACTERLAB_STRICT_DATA", "")
    with caplog.at_level("WARNING", logger="facterlab.data.loading"):
        ds = load_dataset("ml-100k", d)
    assert any("u.data: SHA-256" in r.getMessage() for r in caplog.records)
    assert any("u.data: SHA-256" in w for w in ds.info["warnings"])
    with pytest.raises(DataIntegrityError, match="strict data checking is on"):
        load_dataset("ml-100k", d, strict_data=True)
    monkeypatch.setenv("FACTERLAB_CACHE", str(tmp_path / "cache"))
    rc = main(["--strict-data", "data", "build", "--dataset", "ml-100k", "--n-rows", "2", "--data-dir", str(d)])
    assert rc == 1 and "u.data: SHA-256" in _one_error_line(capsys.readouterr().err)
    assert os.environ["FACTERLAB_STRICT_DATA"] == "1"  # exported for notebook kernels


#: config fields whose default belongs to the method (not generic names such as k, seed or batch_size):
#: a function or dataclass elsewhere that writes its own number for one of them is a second owner
OWNED_DEFAULTS = ("lam", "tau_rho", "beta", "sigma", "rho", "h", "phi", "demote", "n_factors", "passes")


def test_a_default_is_written_in_one_place_only():
    """No function parameter or dataclass field named after a config field of :data:`OWNED_DEFAULTS`
    has a number literal as default outside config.py (it must read the config, e.g.
    ``lam: float = FacterConfig.lam``), and no CLI help text spells out a default or bound by hand.
    ``simpson/`` has its own, unrelated SimConfig and is left out."""
    import ast

    src = REPO / "src" / "facterlab"
    second_owners = []
    for p in sorted(src.rglob("*.py")):
        rel = p.relative_to(src).as_posix()
        if rel == "config.py" or rel.startswith("simpson/"):
            continue
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            pairs = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                pos = a.posonlyargs + a.args
                pairs = list(zip(pos[len(pos) - len(a.defaults) :], a.defaults))
                pairs += [(k, d) for k, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
                pairs = [(arg.arg, d) for arg, d in pairs]
            elif isinstance(node, ast.ClassDef):
                pairs = [
                    (st.target.id, st.value)
                    for st in node.body
                    if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None
                ]
            for name, d in pairs:
                if name in OWNED_DEFAULTS and isinstance(d, ast.Constant) and isinstance(d.value, (int, float)):
                    second_owners.append(f"{rel}:{d.lineno} {name}={d.value!r}")
    # reporting/ belongs to another owner (issue 24's helper may not edit it): its run_config(passes=3) is
    # the one known second owner left, named here so that any new one fails
    known = {"reporting/experiments.py passes=3"}
    second_owners = [s for s in second_owners if s.split(":")[0] + " " + s.split(" ", 1)[1] not in known]
    assert not second_owners, "defaults written outside config.py: " + ", ".join(second_owners)
    for cmd in ("facter/commands.py", "data/commands.py", "cli.py"):
        text = (src / cmd).read_text(encoding="utf-8")
        assert not re.search(r"\(default -?\d", text), f"{cmd} writes a default in a help text by hand"
    tree = ast.parse((src / "facter" / "validation.py").read_text(encoding="utf-8"))
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    texts = [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
    ]
    assert not [t for t in texts if re.search(r"e\.g\. -?\d", t)], "validation.py writes an example by hand"


# ---------------------------------------------------------------------------------------------
# issue 33: hostile JSON and TOML files (one reader, facterlab.safeio), the process pool's queued runs,
# one owner of the method names

DEEP = 100_000  # deeper than any interpreter's recursion limit


def _deep_json(kind: str) -> str:
    return "[" * DEEP + "]" * DEEP if kind == "array" else '{"gender": ' + '{"a": ' * DEEP + "1" + "}" * DEEP + "}"


@pytest.mark.parametrize("kind", ["array", "object"])
def test_a_deeply_nested_bias_table_is_one_line_before_any_work(kind, capsys, monkeypatch, tmp_path):
    import facterlab.facter.commands as cmds

    monkeypatch.setattr(cmds, "run_experiment", lambda *a, **k: pytest.fail("run_experiment was reached"))
    table = tmp_path / f"deep_{kind}.json"
    table.write_text(_deep_json(kind))
    argv = ["run", "--dataset", "synthetic", "--model", "simulated", "--sim-bias-table", str(table)]
    rc = main([*argv, "--no-progress", "--out-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err
    _one_error_line(err)
    assert rc == 1 and f"bias table {table}: nests deeper than 64 levels" in err, err
    assert not (tmp_path / "r").exists()


def test_a_10_mb_bias_table_is_refused_by_the_size_limit_before_any_work(capsys, monkeypatch, tmp_path):
    """Chosen over "allowed, with a line saying why it is slow": a real table names at most a few dozen
    values and features (the built-in ones are under 1 KiB); 10 MB only makes a run slow (the trial:
    still running after 153 s on 200 rows)."""
    import facterlab.facter.commands as cmds
    from facterlab.models.simulated import BIAS_TABLE, load_bias_table

    monkeypatch.setattr(cmds, "run_experiment", lambda *a, **k: pytest.fail("run_experiment was reached"))
    table = tmp_path / "big.json"
    table.write_text('{"gender": {"F": ["' + "x" * 10_000_000 + '"]}}')
    argv = ["run", "--dataset", "synthetic", "--model", "simulated", "--sim-bias-table", str(table)]
    rc = main([*argv, "--no-progress", "--out-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err
    _one_error_line(err)
    assert rc == 1 and f"bias table {table}: 9.5 MiB, more than the 1.0 MiB limit" in err, err
    # a valid table under the limit reads exactly as before
    ok = tmp_path / "ok.json"
    ok.write_text(json.dumps({a: {v: list(f) for v, f in vals.items()} for a, vals in BIAS_TABLE.items()}))
    assert load_bias_table(str(ok)) == load_bias_table("default")


def _hostile_run_folder(runs: Path, run_id: str) -> Path:
    folder = runs / run_id
    folder.mkdir(parents=True)
    for f in RUN_FILES:
        (folder / f).write_text(_deep_json("array") if f.endswith(".json") else "")
    return folder


def test_runs_compare_and_list_over_nested_run_json_are_one_line_each(capsys, tmp_path):
    results = tmp_path / "results"
    a = _hostile_run_folder(results / "runs", "aaaa00000000-1")
    _hostile_run_folder(results / "runs", "bbbb00000000-1")
    notebook = results / "09_notebook"
    notebook.mkdir()
    (notebook / "metrics.json").write_text('{"run_ids": ' + _deep_json("array") + "}")
    assert main(["runs", "compare", "aaaa", "bbbb", "--results", str(results)]) == 1
    line = _one_error_line(capsys.readouterr().err)
    assert f"run record file {a / 'config.json'}: nests deeper than 64 levels" in line, line
    assert main(["runs", "list", "--results", str(results)]) == 0  # the list shows why each does not load
    out, err = capsys.readouterr()
    assert "Traceback" not in err and out.count("nests deeper than 64 levels") == 2, out


SWEEP_FILES = {
    "deep.json": '{"grid": ' + "[" * DEEP + "]" * DEEP + "}",
    "deep.toml": "grid = " + "[" * DEEP + "]" * DEEP + "\n",
    "dotted.toml": "[set]\n" + ".".join(["a"] * DEEP) + " = 1\n",  # nests without brackets; tomllib is slow on it
}


@pytest.mark.parametrize("name", list(SWEEP_FILES))
def test_a_nested_sweep_file_is_one_line_before_any_work(name, capsys, tmp_path):
    p = tmp_path / name
    p.write_text(SWEEP_FILES[name])
    started = time.perf_counter()
    assert main(["sweep", "--file", str(p), "--dry-run", "--out-dir", str(tmp_path / "r")]) == 1
    line = _one_error_line(capsys.readouterr().err)
    assert f"sweep file {p}: nests deeper than 64 levels" in line, line
    assert time.perf_counter() - started < 30  # the dotted key ran past 60 s in tomllib before


def test_the_reader_checks_depth_outside_strings_and_keeps_valid_files_identical(tmp_path):
    from facterlab.safeio import FileLimitError, depth_problem, read_json, read_toml

    limit = 64
    assert depth_problem("[" * limit + "]" * limit, limit) == ""
    assert depth_problem("[" * (limit + 1) + "]" * (limit + 1), limit).startswith("nests deeper than 64")
    inside = '["' + "[" * 500 + '", "\\"' + "{" * 500 + '"]'  # brackets in strings, an escaped quote
    assert depth_problem(inside, limit) == "" and json.loads(inside)[0] == "[" * 500
    assert depth_problem('x = "[[[[" # [[[[\ny = [[1]]\n', 2, toml=True) == ""
    for text in ('{"a": [1, {"b": "c\\u00e9"}], "d": null}', "[1.5, -2e3, true]", '"x"'):
        p = tmp_path / "v.json"
        p.write_text(text)
        assert read_json(p) == json.loads(text)
    p = tmp_path / "v.toml"
    p.write_text('preset = "repro"\n[grid]\nfacter__alpha = [0.1, 0.2]\n[set.data]\nn_rows = 60\n')
    import tomllib

    assert read_toml(p) == tomllib.loads(p.read_text())
    p.write_text("[" * 65 + "]" * 65)
    with pytest.raises(FileLimitError, match=r"^run record file .*v\.toml: nests deeper"):
        read_json(p, what="run record file")


def _die_once(arg: tuple):
    """Kill this worker the first time (the process just ends), then answer; other tasks just answer."""
    marker, value = arg
    if marker and not Path(marker).exists():
        Path(marker).write_text("x")
        os._exit(1)
    return value


def test_a_dead_pool_worker_charges_no_attempt_to_runs_that_had_not_started(tmp_path):
    from facterlab.executors import ProcessExecutor

    events: dict = {}
    tasks = {"a": (str(tmp_path / "died"), 1), "b": ("", 2), "c": ("", 3)}
    out = ProcessExecutor(workers=1).run(
        _die_once, tasks, retries=1, on_event=lambda kind, key, info: events.setdefault(key, []).append(kind)
    )
    assert {k: (o.ok, o.value, o.attempts) for k, o in out.items()} == {
        "a": (True, 1, 2),  # it ran when the worker died: one attempt counted, then done
        "b": (True, 2, 1),  # queued behind it: requeued, no attempt counted (the trial: each was charged)
        "c": (True, 3, 1),
    }
    assert events["b"] == ["start", "requeued", "start", "done"], events
    # with retries=0 the queued runs would have failed before ("a worker process died") and now do not
    again = ProcessExecutor(workers=1).run(_die_once, {**tasks, "a": (str(tmp_path / "died2"), 1)}, retries=0)
    assert [(o.ok, o.attempts) for o in again.values()] == [(False, 1), (True, 1), (True, 1)]


def test_a_pool_that_breaks_before_any_run_starts_still_ends_within_its_retries():
    """No task started (the workers die at start-up): nothing says which tasks were innocent, so every
    one counts an attempt and the retries end the loop."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from facterlab.executors import ProcessExecutor

    class DiesAtStart(ProcessExecutor):
        def _pool(self):
            ctx = multiprocessing.get_context("spawn")
            return ProcessPoolExecutor(max_workers=1, mp_context=ctx, initializer=os._exit, initargs=(3,))

    out = DiesAtStart(1).run(abs, {"x": -1, "y": -2}, retries=1)
    assert [(o.ok, o.attempts) for o in out.values()] == [(False, 2), (False, 2)]


def test_the_method_names_have_one_owner():
    """``record.METHODS`` is the one tuple of the three methods' names; no other module spells it."""
    import ast

    from facterlab.facter.record import METHODS

    src = REPO / "src" / "facterlab"
    copies = []
    for p in sorted(src.rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Constant) for e in node.elts):
                if tuple(e.value for e in node.elts) == METHODS:
                    copies.append(f"{p.relative_to(src)}:{node.lineno}")
    assert [c.split(":")[0] for c in copies] == ["facter/record.py"], copies


# ------------------------------------------------------------------------------------------ served models
# (issues 31 and 33; docs/FAULTS.md "Served models: hung, dripping, endless and non-HTTP servers, bad URLs")


def _served_run(url: str, tmp_path, monkeypatch, *flags, quiet: bool = True) -> tuple:
    """``facterlab run`` against ``url``: (exit status, seconds, the error lines, the log lines)."""
    from facterlab.models import served

    for probe in (served.probe_server, served.supports_prompt_logprobs, served.supports_sampling):
        probe.cache_clear()
    monkeypatch.setenv("FACTERLAB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("FACTERLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FACTERLAB_LOG", "WARNING" if quiet else "INFO")  # -q exports it: restored after the test
    args = ["-q"] * quiet + ["run", "--model", "openai:test-model", "--server-url", url, "--encoder", "hash-encoder"]
    args += ["--dataset", "synthetic", "--n-rows", "40", "--passes", "1", "--cfr-rows", "4", "--no-progress"]
    t0 = time.monotonic()
    rc = main([*args, "--temperature", "0", "--repetition-penalty", "1", *flags])
    return rc, time.monotonic() - t0


def _error_lines(capsys) -> list:
    return [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("facterlab run: error:")]


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://127.0.0.1:8000 /v1", "whitespace or a control character (' ')"),
        ("http://127.0.0.1:8000/\r\nX: 1", "whitespace or a control character ('\\r')"),
        ("http://127.0.0.1:8000/v1/completions", "give the server root, e.g. 'http://127.0.0.1:8000'"),
    ],
)
def test_a_bad_server_url_is_one_line_before_any_request(url, says, tmp_path, monkeypatch, capsys):
    rc, _ = _served_run(url, tmp_path, monkeypatch)
    [line] = _error_lines(capsys)
    assert rc == 1 and says in line and not (tmp_path / "results").exists()


@pytest.mark.parametrize("how", ["hang", "drip", "garbage", "truncated", "huge"])
def test_a_misbehaving_server_ends_the_run_within_its_timeout_in_one_line(how, tmp_path, monkeypatch, capsys):
    from facterlab.models import served_http
    from facterlab.testing.server import OpenAIServer

    # the endless body meets the cap sooner; the cap lives with the HTTP exchange that reads it (served_http)
    monkeypatch.setattr(served_http, "MAX_RESPONSE_BYTES", 2**20)
    says = {
        "hang": "within the 10 s deadline (it sent no status line)",
        "drip": "within the 10 s deadline (it sent HTTP 200 and",
        "garbage": "it did not answer in HTTP (its first line:",
        "truncated": 'HTTP 200: a body that is not JSON (20 bytes: b\'{"choices"',
        "huge": "more than the 1,048,576-byte cap",
    }[how]
    with OpenAIServer(misbehave=how) as srv:
        rc, took = _served_run(srv.url, tmp_path, monkeypatch, "--timeout", "10", "--retries", "3")
    lines = _error_lines(capsys)
    assert rc == 1 and len(lines) == 1 and says in lines[0], lines
    # one deadline covers the request's retries: 10 s, not 4 x 10 s (the margin is for a loaded machine)
    assert took < 10 + 20, took
    assert not (tmp_path / "results" / "runs").exists()


def test_a_server_that_hangs_mid_run_ends_it_within_one_timeout_with_progress_lines(tmp_path, monkeypatch, capsys):
    """The server answers the probes, then stops answering: the run ends within one deadline of the
    first hung request, and progress lines come while it waits."""

    from facterlab.models import served
    from facterlab.testing.server import OpenAIServer

    monkeypatch.setattr(served, "PROGRESS_EVERY", 1.0)
    with OpenAIServer() as srv:
        real = served.check_served

        def then_hang(*a, **k):
            info = real(*a, **k)
            srv.misbehave = "hang"
            return info

        monkeypatch.setattr(served, "check_served", then_hang)
        rc, took = _served_run(srv.url, tmp_path, monkeypatch, "--timeout", "8", "--retries", "3", quiet=False)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("facterlab run: error:")]
    assert rc == 1 and len(lines) == 1 and "within the 8 s deadline (it sent no status line)" in lines[0], err
    assert "requests answered" in err and "waiting for" in err
    assert took < 8 + 16, took  # one deadline (8 s), not 4 x 8 s; the margin is for a loaded machine
