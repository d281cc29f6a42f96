"""Issue 44, case 9: one registry of every FACTERLAB_* variable; bad values refused in one line before
work, unknown names warned about, the docs table generated from the registry."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from facterlab import envvars

REPO = Path(__file__).resolve().parents[2]


def test_the_committed_table_is_the_generated_one():
    text = (REPO / "docs" / "PATHS.md").read_text()
    table = text.split("<!-- envvars:start -->\n", 1)[1].split("<!-- envvars:end -->", 1)[0]
    assert table == envvars.markdown_table()


def test_every_facterlab_variable_the_tree_names_is_registered():
    names: set = set()
    for folder in ("src", "tests", "notebooks", "benchmarks"):
        for p in (REPO / folder).rglob("*.py"):
            names |= set(re.findall(r"\bFACTERLAB_[A-Z][A-Z0-9_]*[A-Z0-9]\b", p.read_text(errors="replace")))
    names |= set(re.findall(r"\bFACTERLAB_[A-Z][A-Z0-9_]*[A-Z0-9]\b", (REPO / "Makefile").read_text()))
    unknown = sorted(n for n in names if n not in envvars.REGISTRY and not n.startswith(envvars.TEST_PREFIXES))
    unknown = [n for n in unknown if n not in ("FACTERLAB_STRICT_DAT", "FACTERLAB_RESULT")]  # this file's misspellings
    assert not unknown, f"register these in facterlab.envvars: {unknown}"


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("FACTERLAB_STRICT_DATA", "maybe", "expected a switch"),
        ("FACTERLAB_STRICT_DATA", "2", "expected a switch"),
        ("FACTERLAB_BLAS_THREADS", "99999", "'auto' or a whole number in [1, 1024]"),
        ("FACTERLAB_LOG_EVERY", "nan", "a number of seconds in [0, 86400]"),
        ("FACTERLAB_LOG_EVERY", "inf", "a number of seconds in [0, 86400]"),
        ("FACTERLAB_GGUF_CACHE", "maybe", "expected a switch"),
        ("FACTERLAB_REPORT", "maybe", "expected a switch"),
        ("FACTERLAB_WORKERS", "abc", "a whole number in [1, 1024]"),
        ("FACTERLAB_PREFETCH", "sometimes", "expected a switch"),
        ("FACTERLAB_LOG", "LOUD", "one of DEBUG, INFO"),
    ],
)
def test_a_bad_value_is_one_line_before_any_work(tmp_path, monkeypatch, capsys, name, value, says):
    from facterlab.cli import main

    monkeypatch.setenv("FACTERLAB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv(name, value)
    assert main(["runs", "list"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"facterlab: error: {name}={value!r}: expected {err[0].split(': expected ', 1)[1]}"]
    assert says in err[0] and "ignored" not in err[0]
    assert not (tmp_path / "results").exists()


def test_switches_take_words_both_ways(monkeypatch):
    from facterlab.data.loading import strict_data
    from facterlab.facter.prefetch import enabled
    from facterlab.models.cache import CachedRecommender

    rec = CachedRecommender.__new__(CachedRecommender)
    monkeypatch.setenv("FACTERLAB_PREFETCH", "off")  # was on: anything but 0 meant on
    assert enabled(rec) is False
    monkeypatch.setenv("FACTERLAB_PREFETCH", "Yes")
    assert enabled(rec) is True
    monkeypatch.setenv("FACTERLAB_STRICT_DATA", "off")
    assert strict_data() is False
    monkeypatch.setenv("FACTERLAB_STRICT_DATA", "ON")
    assert strict_data() is True


def test_an_unknown_name_is_one_warning_with_the_closest_name_and_never_its_value(tmp_path, monkeypatch, capsys):
    from facterlab.cli import main

    monkeypatch.setenv("FACTERLAB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("FACTERLAB_STRICT_DAT", "s3cret-value")
    monkeypatch.setenv("FACTERLAB_RESULT", "x")
    main(["runs", "list"])
    err = capsys.readouterr().err
    warned = [ln for ln in err.splitlines() if ln.startswith("facterlab: warning:")]
    assert warned == [
        "facterlab: warning: FACTERLAB_RESULT is not a facterlab variable (did you mean FACTERLAB_RESULTS?); ignored",
        "facterlab: warning: FACTERLAB_STRICT_DAT is not a facterlab variable (did you mean FACTERLAB_STRICT_DATA?); ignored",
    ]
    assert "s3cret" not in err
