"""Fault injection (docs/FAULTS.md): kills during every phase and during the run-folder write, then a
rerun compared byte for byte; every bad input gives its message before any model call; hostile model
output never aborts a run; degenerate outputs are counted and their fairness metrics are missing."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from facter_world import make_world  # noqa: E402

from facterlab.cli import main  # noqa: E402
from facterlab.config import preset  # noqa: E402
from facterlab.datatypes import PARSE_EMPTY, MissingValue, Prediction  # noqa: E402
from facterlab.facter.pipeline import run_experiment  # noqa: E402
from facterlab.facter.record import RunRecord  # noqa: E402
from facterlab.facter.runfolder import RUN_FILES, degenerate_summary, run_folder_problem  # noqa: E402
from facterlab.facter.validation import ConfigError, smallest_n_rows, validate_config  # noqa: E402
from facterlab.models.fake import FakeRecommender, HashEncoder  # noqa: E402
from facterlab.models.parsing import parse_titles, parse_with_reason  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CHILD = Path(__file__).parent / "fault_child.py"
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


@pytest.mark.parametrize("phase", ["calibration", "neutral", "fair", "facter", "metrics"])
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
    return preset("repro", **base)


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
    import facterlab.facter.pipeline as pl

    monkeypatch.setattr(pl, "run_experiment", lambda *a, **k: pytest.fail("run_experiment was reached"))
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
    from test_data_loaders import write_ml100k

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
    from test_data_loaders import write_amazon

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
