"""`facterlab data summary|build` on fixture files."""

from __future__ import annotations

import json

import pytest
from data_files import write_ml1m, write_ml100k

from facterlab.cli import main


def test_summary_json_ml1m_fixture(tmp_path, capsys):
    write_ml1m(tmp_path / "ml-1m")
    assert main(["data", "summary", "--dataset", "ml-1m", "--json", "--data-dir", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["n_users"], out["n_items"], out["n_ratings"]) == (3, 3, 4)
    assert out["n_positive_ratings"] == 2 and out["eligible_rows"] == 0
    assert out["attribute_distribution"]["gender"] == {"M": 2, "F": 1}
    assert out["attribute_distribution"]["age"]["Under 18"] == 1
    assert out["auto_resolves_to"] == "ml-1m" and out["is_synthetic"] is False


def test_summary_auto_resolution_reported(tmp_path, capsys):
    write_ml100k(tmp_path / "ml-100k")
    assert main(["data", "summary", "--dataset", "ml-100k", "--data-dir", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dataset"] == "ml-100k" and out["auto_resolves_to"] == "ml-100k"
    assert out["attribute_distribution"]["occupation"] == {"student": 1, "technician": 1, "writer": 1}


def test_summary_missing_file_is_an_error(tmp_path, capsys):
    assert main(["data", "summary", "--dataset", "ml-1m", "--data-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "missing file(s) ratings.dat" in err and "ml-1m.zip" in err


def test_build_too_few_rows_and_success(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FACTERLAB_CACHE", str(tmp_path / "cache"))
    write_ml100k(tmp_path / "ml-100k")
    assert main(["data", "build", "--dataset", "ml-100k", "--data-dir", str(tmp_path)]) == 1
    assert "fewer than the 2500 rows requested" in capsys.readouterr().err
    # the default synthetic dataset has enough rows
    assert main(["data", "build", "--dataset", "synthetic", "--n-rows", "100", "--seed", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_rows"] == 100 and out["n_calib"] == 70 and out["n_test"] == 30
    assert out["is_synthetic"] is True and out["cache_path"].startswith(str(tmp_path / "cache"))
    assert out["n_distinct_users"]["test"] <= 30


@pytest.mark.parametrize("argv", [["data", "summary", "--dataset", "Movie Lens"]])
def test_bad_dataset_name(argv, capsys):
    with pytest.raises(SystemExit):
        main(argv)
    assert "neither a built-in dataset" in capsys.readouterr().err


def test_dataset_not_imported(tmp_path, capsys):
    """A name of the right form that is neither built in nor imported: one line saying how to import it."""
    rc = main(["data", "summary", "--dataset", "movielens", "--data-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc != 0 and "unknown dataset 'movielens'" in err and "facterlab data import" in err
    assert "Traceback" not in err
