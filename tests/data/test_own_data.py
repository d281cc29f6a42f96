"""Your own data (issue 41, docs/OWN_DATA.md): datasets from tables and RecBole files, validation, imported
names wherever a dataset name goes, and the protected attributes being the dataset's everywhere."""

from __future__ import annotations

import json
import os
import runpy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from facterlab import preset
from facterlab.cli import main
from facterlab.data import load_dataset
from facterlab.data.imported import (
    DatasetError,
    export_recbole,
    from_tables,
    import_dataset,
    load_imported,
    read_recbole,
    read_table,
)
from facterlab.data.protocol import build_interactions
from facterlab.facter import run_experiment
from facterlab.facter.twins import placebo_request

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "jobs"
JOBS_BIAS = {"country": {"BR": ["finance"], "NG": {"health": 1.0}}, "language": {"hi": {"tech": 2.0}}}


def _tables():
    inter = pd.DataFrame({"user_id": [1, 1, 2, 2, 3], "item_id": [10, 11, 10, 12, 11], "rating": [5, 4, 3, 5, 4],
                          "timestamp": [1, 2, 3, 4, 5]})  # fmt: skip
    users = pd.DataFrame({"user_id": [1, 2, 3], "country": ["BR", "DE", "BR"], "language": ["pt", "en|pt", None]})
    items = pd.DataFrame({"item_id": [10, 11, 12], "title": ["A", "B", "C"], "sector": ["tech|retail", "health", ""]})
    return inter, users, items


def _jobs(tmp_path: Path):
    kw = read_recbole(EXAMPLE)
    wordings = json.loads((EXAMPLE / "wordings.json").read_text())
    return from_tables(protected=["country", "language"], name="jobs", domain="job", wordings=wordings, **kw)


# ------------------------------------------------------------------------------------------ from_tables


def test_from_tables_values_missing_and_multi():
    inter, users, items = _tables()
    ds = from_tables(inter, users, items, ["country", "language"], feature_cols=["sector"], multi_sep="|", min_group=1)
    assert ds.protected == ("country", "language")
    assert ds.users["language"].tolist() == ["pt", "en+pt", "unknown"]  # missing -> its own value; combos sorted
    assert ds.attribute_values["language"] == ["en+pt", "pt", "unknown"]  # sorted, the missing value last
    assert ds.items["features"].tolist() == [["tech", "retail"], ["health"], []]
    assert ds.items["text"].tolist() == ["A :: tech|retail", "B :: health", "C"]
    assert ds.info["missing_values"] == {"country": 0, "language": 1}
    dropped = from_tables(inter, users, items, ["country", "language"], missing="drop", min_group=1)
    assert dropped.users["user_id"].tolist() == [1, 2] and 3 not in set(dropped.ratings["user_id"])
    assert any("dropped" in w for w in dropped.info["warnings"])


def test_implicit_feedback_string_ids_and_row_order():
    inter = pd.DataFrame({"u": ["a", "a", "b", "b"], "i": ["x", "y", "x", "y"]})
    users = pd.DataFrame({"u": ["b", "a"], "g": ["1", "2"]})
    items = pd.DataFrame({"i": ["y", "x"], "name": ["Y", "X"]})
    ds = from_tables(inter, users, items, ["g"], user_col="u", item_col="i", title_col="name", rating_col=None,
                     timestamp_col=None, min_group=1)  # fmt: skip
    assert ds.ratings["rating"].unique().tolist() == [5.0]  # implicit: every interaction a positive
    assert ds.ratings["timestamp"].tolist() == [0, 1, 2, 3]  # the rows' order
    # "a" -> 1, "b" -> 2 (sorted); the originals kept
    assert dict(zip(ds.users["source_id"], ds.users["user_id"])) == {"b": 2, "a": 1}
    assert ds.ratings["user_id"].tolist() == [1, 1, 2, 2] and ds.ratings["item_id"].tolist() == [1, 2, 1, 2]


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda i, u, it: (i.rename(columns={"user_id": "usr_id"}), u, it),
            "interactions: no column 'user_id' (did you mean 'usr_id'?)",
        ),
        (
            lambda i, u, it: (i, u.rename(columns={"country": "contry"}), it),
            "users: no column 'country' (did you mean 'contry'?)",
        ),
        (lambda i, u, it: (i, pd.concat([u, u.iloc[:1]]), it), "users: 1 duplicate user id(s) in 'user_id', first 1"),
        (lambda i, u, it: (i, u, pd.concat([it, it.iloc[:1]])), "items: 1 duplicate item id(s)"),
        (
            lambda i, u, it: (pd.concat([i, i.iloc[:1].assign(user_id=99)]), u, it),
            "interactions: 1 row(s) name users not in the users table (column 'user_id', first 99)",
        ),
        (
            lambda i, u, it: (pd.concat([i, i.iloc[:1].assign(item_id=77)]), u, it),
            "interactions: 1 row(s) name items not in the items table",
        ),
        (lambda i, u, it: (i, u.assign(country="BR"), it), "protected attribute 'country' has one value ('BR')"),
        (lambda i, u, it: (i.assign(rating="five"), u, it), "interactions: 5 non-numeric value(s) in 'rating'"),
        (lambda i, u, it: (i, u, it.assign(title=[None, "B", "C"])), "items: 1 item(s) without a title"),
    ],
)
def test_validation_errors(change, message):
    inter, users, items = change(*_tables())
    with pytest.raises(DatasetError) as exc:
        from_tables(inter, users, items, ["country"], min_group=1)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_validation_of_names_and_wordings():
    inter, users, items = _tables()
    with pytest.raises(DatasetError, match="collides with a column of the interaction rows"):
        from_tables(inter, users.rename(columns={"country": "target"}), items, ["target"])
    with pytest.raises(DatasetError, match="name at least one protected attribute"):
        from_tables(inter, users, items, [])
    with pytest.raises(DatasetError, match="dataset name 'My Data'"):
        from_tables(inter, users, items, ["country"], name="My Data")
    with pytest.raises(
        DatasetError, match=r"wordings\['country'\]: value 'BRA' is not a value of 'country' \(did you mean 'BR'"
    ):
        from_tables(inter, users, items, ["country"], wordings={"country": {"BRA": "Brazil"}}, min_group=1)
    with pytest.raises(DatasetError, match="holds value\\(s\\) \\['DE'\\] not in the values given"):
        from_tables(inter, users, items, ["country"], values={"country": ["BR"]}, min_group=1)


def test_small_groups_are_a_stated_warning():
    ds = from_tables(*_tables(), ["country"], min_group=2)
    assert ds.info["warnings"] == ["country: 1 group(s) with fewer than 2 users, too small for the group metrics "
                                   "(SNSR reports them missing): DE (1)"]  # fmt: skip


def test_non_utf8_byte_named(tmp_path):
    p = tmp_path / "users.csv"
    p.write_bytes("user_id,country\n1,BR\n2,S\xe3o Tom\xe9\n".encode("latin-1"))
    with pytest.raises(DatasetError, match=r"users.csv: byte 0xe3 at offset 24 \(line 3\) is not UTF-8"):
        read_table(p)


def test_a_byte_order_mark_is_dropped_and_a_ragged_row_named(tmp_path):
    """Excel's "CSV UTF-8" starts with a BOM: without dropping it the first column is '\\ufeffuser_id', and
    the import says the id column is missing."""
    p = tmp_path / "users.csv"
    p.write_bytes("user_id,country\n1,BR\n".encode("utf-8-sig"))
    assert list(read_table(p).columns) == ["user_id", "country"]
    p.write_text("user_id,country\n1,BR\n2,DE,extra,more\n")
    with pytest.raises(
        DatasetError, match=r"users.csv: not a readable CSV file \(.*Expected 2 fields in line 3, saw 4"
    ):
        read_table(p)


# ---------------------------------------------------------------------------------- RecBole round trip


def _roundtrip(ds, tmp_path, n_rows):
    export_recbole(ds, tmp_path / "rb", "rt")
    kw = read_recbole(tmp_path / "rb")
    assert kw["feature_cols"] == ["features"] and kw["rating_col"] == "rating" and kw["title_col"] == "title"
    back = from_tables(protected=list(ds.protected), name="roundtrip", domain=ds.domain, values=ds.attribute_values,
                       min_group=1, **kw)  # fmt: skip
    for col in ("user_id", "item_id", "rating", "timestamp"):
        np.testing.assert_array_equal(back.ratings[col].to_numpy(), ds.ratings[col].to_numpy())
    pd.testing.assert_frame_equal(back.users[["user_id", *ds.protected]], ds.users[["user_id", *ds.protected]])
    assert back.items["title"].tolist() == ds.items["title"].tolist()
    assert back.items["features"].tolist() == [list(f) for f in ds.items["features"]]
    assert back.items["text"].tolist() == ds.items["text"].tolist()
    assert back.attribute_values == ds.attribute_values
    cfg = preset("repro", data__n_rows=n_rows, model__llm="fake", model__encoder="hash-encoder", facter__passes=2)
    a, b = build_interactions(ds, cfg.data), build_interactions(back, cfg.data)
    pd.testing.assert_frame_equal(a.rows, b.rows)
    ra = run_experiment(cfg, dataset=ds, out_dir=tmp_path / "a")
    rb = run_experiment(cfg, dataset=back, out_dir=tmp_path / "b")
    assert ra.record.metrics.to_json()["methods"] == rb.record.metrics.to_json()["methods"]
    assert ra.run_id != rb.run_id  # another dataset name, another run


def test_recbole_roundtrip_synthetic(tmp_path):
    _roundtrip(load_dataset("synthetic"), tmp_path, 150)


@pytest.mark.realdata
def test_recbole_roundtrip_ml100k(tmp_path):
    if not (Path(os.environ.get("FACTERLAB_DATA", "/nonexistent")) / "ml-100k" / "u.data").is_file():
        pytest.skip("set FACTERLAB_DATA to a directory holding ml-100k/ to run the real-data round trip")
    _roundtrip(load_dataset("ml-100k"), tmp_path, 200)


def test_recbole_header_and_missing_file(tmp_path):
    (tmp_path / "x.inter").write_text("user_id\titem_id:token\n1\t2\n")
    with pytest.raises(DatasetError, match="missing"):
        read_recbole(tmp_path)
    (tmp_path / "x.user").write_text("user_id:token\tg:token\n1\ta\n")
    (tmp_path / "x.item").write_text("item_id:token\tname:token\n2\tN\n")
    with pytest.raises(DatasetError, match="header field 'user_id' is not 'name:type'"):
        read_recbole(tmp_path)
    (tmp_path / "x.inter").write_text("user_id:token\titem_id:token\n1\t2\n")
    with pytest.raises(DatasetError, match="no field named 'title' or ending in 'title'"):
        read_recbole(tmp_path)


# ------------------------------------------------------------------- the jobs example: any attributes, end to end


def test_example_files_are_what_the_script_writes(tmp_path):
    make = runpy.run_path(str(ROOT / "examples" / "make_jobs.py"))["make"]
    make(tmp_path)
    for f in sorted(EXAMPLE.iterdir()):
        assert (tmp_path / f.name).read_bytes() == f.read_bytes(), f"{f.name} differs: run python examples/make_jobs.py"


def test_jobs_twin_monitor_and_facter_use_the_datasets_attributes(tmp_path, caplog):
    ds = _jobs(tmp_path)
    assert ds.protected == ("country", "language") and len(ds.attribute_values["country"]) == 5
    assert "unknown" in ds.attribute_values["language"]  # the missing languages
    (tmp_path / "bias.json").write_text(json.dumps(JOBS_BIAS))
    cfg = preset(
        "repro", data__n_rows=600, model__llm="simulated", model__encoder="hash-encoder", sim__beta=3.0, sim__rho=1.0,
        sim__bias_table=str(tmp_path / "bias.json"), facter__delta="twin", facter__threshold="null",
        facter__rule_mining="confirmed",
    )  # fmt: skip
    run = run_experiment(cfg, dataset=ds, out_dir=tmp_path)
    m = run.record.metrics.to_json()["methods"]
    assert set(m["neutral"]["cfr_single"]) == {"country", "language"}
    assert set(run.calibration.columns) >= {"country", "language", "twin_country", "twin_language"}
    flips = run.calibration[["country", "twin_country"]]
    assert (flips["country"] != flips["twin_country"]).all()  # every twin flips every attribute
    assert set(run.calibration["twin_language"]) <= set(ds.attribute_values["language"])
    rules = {r for rs in run.rows["facter"]["rules"] for r in (rs if rs is not None else [])}
    assert all(r.startswith(("AVOID: (country=", "AVOID: (language=")) for r in rules)
    # the planted push is found by the monitor: Neutral flags far more than the null's alpha
    neutral_flags = float(run.rows["neutral"]["viol_fixed"].mean())
    assert neutral_flags > 2 * cfg.facter.alpha


def test_reword_placebo_uses_the_wording_map(tmp_path, caplog):
    ds = _jobs(tmp_path)
    inter = build_interactions(ds, preset("repro", data__n_rows=50).data)
    from facterlab.facter.prompts import PromptSet

    ps = PromptSet(attrs=ds.protected, wordings=ds.wordings, domain=ds.domain)
    row = inter.rows.iloc[0].to_dict()
    req = ps.build_request(row, {int(i): t for i, t in zip(ds.items["item_id"], ds.items["title"])}, "s")
    user = dict(req.messages)["user"]
    assert f"- Country: {row['country']}\n" in user and "Recommend the next 10 jobs" in user
    moved = dict(placebo_request(req, "reword", ds.wordings).messages)["user"]
    assert f"- Country: {ds.wordings['country'][row['country']]}\n" in moved
    bare = dict(placebo_request(req, "reword", None).messages)["user"]
    assert bare == user  # no wording, no built-in vocabulary: the lines stay (and the run says so)


def test_bias_table_checked_against_the_dataset(tmp_path):
    ds = _jobs(tmp_path)
    base = dict(data__n_rows=200, model__llm="simulated", model__encoder="hash-encoder")
    cases = [
        ({"contry": {"BR": ["tech"]}}, "no protected attribute 'contry' (did you mean 'country'?)"),
        ({"country": {"BRA": ["tech"]}}, "country has no value 'BRA' (did you mean 'BR'?)"),
        ({"country": {"BR": ["fintech"]}}, "no item has the feature 'fintech'"),
    ]
    for table, message in cases:
        (tmp_path / "t.json").write_text(json.dumps(table))
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
            run_experiment(
                preset("repro", sim__bias_table=str(tmp_path / "t.json"), **base), dataset=ds, out_dir=tmp_path
            )
    (tmp_path / "t.json").write_text('{"country": {"BR": ["tech"], "BR": ["health"]}}')
    with pytest.raises(ValueError, match="the key 'BR' appears twice"):
        run_experiment(preset("repro", sim__bias_table=str(tmp_path / "t.json"), **base), dataset=ds, out_dir=tmp_path)
    (tmp_path / "t.json").write_text(json.dumps({"country": {"BR": ["tech"] * 50_000 + ["health"]}}))  # ~0.4 MB
    with pytest.raises(ValueError, match=r"country=BR: the feature\(s\) \['tech'\] appear more than once in one list"):
        run_experiment(preset("repro", sim__bias_table=str(tmp_path / "t.json"), **base), dataset=ds, out_dir=tmp_path)
    with pytest.raises(ValueError, match="is written for MovieLens's attributes"):
        run_experiment(preset("repro", **base), dataset=ds, out_dir=tmp_path)


def test_cli_import_list_and_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FACTERLAB_CACHE", str(tmp_path / "cache"))
    data = str(tmp_path / "data")
    rc = main(["data", "import", str(EXAMPLE), "--name", "jobs", "--protected", "country,language", "--domain", "job",
               "--wordings", str(EXAMPLE / "wordings.json"), "--data-dir", data])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0 and "300 users, 240 jobs, 6,000 interactions" in out and "language: de 26, en 190" in out
    assert main(["data", "import", str(EXAMPLE), "--name", "jobs", "--protected", "country", "--data-dir", data]) == 2
    assert "already imported" in capsys.readouterr().err
    assert (
        main(["data", "import", str(EXAMPLE), "--name", "ml-100k", "--protected", "country", "--data-dir", data]) == 2
    )
    assert main(["data", "list", "--data-dir", data]) == 0 and "imported: jobs" in capsys.readouterr().out
    assert load_imported("jobs", data).fingerprint() == _jobs(tmp_path).fingerprint()
    monkeypatch.setenv("FACTERLAB_DATA", data)
    (tmp_path / "bias.json").write_text(json.dumps(JOBS_BIAS))
    rc = main(["run", "--dataset", "jobs", "--model", "simulated", "--encoder", "hash-encoder", "--n-rows", "200",
               "--sim-bias-table", str(tmp_path / "bias.json"), "--passes", "1", "--out-dir", str(tmp_path / "res")])  # fmt: skip
    assert rc == 0 and "dataset=jobs" in capsys.readouterr().out


def test_imported_files_changed_are_refused(tmp_path):
    ds = from_tables(*_tables(), ["country"], name="tiny", min_group=1)
    d = import_dataset(ds, tmp_path)
    users = pd.read_parquet(d / "users.parquet")
    users.loc[0, "country"] = "DE"
    users.to_parquet(d / "users.parquet", index=False)
    with pytest.raises(DatasetError, match="the tables differ from what was imported"):
        load_imported("tiny", tmp_path)


def test_reproduce_refuses_an_unknown_dataset_before_any_kernel(tmp_path, capsys, monkeypatch):
    """``reproduce --set DATASET=ml-10m``: one line before any notebook starts (issue 44, case 10)."""
    monkeypatch.setenv("FACTERLAB_DATA", str(tmp_path))
    monkeypatch.chdir(ROOT)
    rc = main(["reproduce", "--profile", "smoke", "--only", "03", "--set", "DATASET=ml-10m", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc != 0 and "parameter DATASET: unknown dataset 'ml-10m'" in err and "Traceback" not in err
    assert not list(tmp_path.glob("*.ipynb"))  # no notebook ran
