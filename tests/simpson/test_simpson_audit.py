"""The Simpson audit of an exposure log (facterlab.simpson.auditing, ``facterlab simpson audit``).

Cross-checks against the simulator's own computation (gaps from dense arrays vs the audit's reading of
a CSV it wrote), the toy example's own gaps, and ips.py's oracle estimator; every validation error; the
command line through ``facterlab.cli.main``.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from facterlab.cli import main
from facterlab.simpson import (
    SimpsonConfig,
    aggregate_gap,
    decompose,
    ips_estimand,
    ips_estimate,
    per_user_gap,
    random_experiment,
    simulate,
)
from facterlab.simpson.auditing import LogError, audit, log_from_simulation, read_log
from facterlab.simpson.toy import TOY_LISTS, grey_moved_down, toy_gaps, toy_table


def sim_log(sim, exp=None) -> pd.DataFrame:
    """Every (user, item) pair of a simulated world as a log, with the random experiment's flag."""
    n, m = sim.positions.shape
    u, i = np.repeat(np.arange(n), m), np.tile(np.arange(m), n)
    flag = np.zeros((n, m), dtype=int)
    if exp is not None:
        flag[np.arange(n), exp.shown] = 1
    return pd.DataFrame(
        {
            "user_id": u,
            "item_id": i,
            "group": sim.groups[i],
            "position": sim.positions.ravel(),
            "relevance": sim.relevant.ravel().astype(int),
            "shown_at_random": flag.ravel(),
        }
    )


@pytest.fixture(scope="module")
def world():
    sim = simulate(SimpsonConfig(n_users=800, seed=2, bias=0.03))
    exp = random_experiment(sim)
    return sim, exp, sim_log(sim, exp)


def toy_log(lists=TOY_LISTS, copies: int = 1) -> pd.DataFrame:
    t = toy_table(lists)
    parts = [t.assign(user=t["user"] + f"-{k}", item=t["item"] + f"-{k}") for k in range(copies)]
    return pd.concat(parts).rename(columns={"user": "user_id", "item": "item_id", "relevant": "relevance"})


def small_log(**changes) -> pd.DataFrame:
    base = {
        "user_id": ["a", "a", "b", "b"],
        "item_id": [1, 2, 1, 2],
        "group": ["x", "y", "x", "y"],
        "position": [1, 2, 2, 1],
        "relevance": [1, 1, 1, 0],
    }
    base.update(changes)
    return pd.DataFrame(base)


# ------------------------------------------------------------------------------ cross-checks
def test_simulated_log_through_csv_gives_the_simulators_gaps(world, tmp_path):
    sim, exp, log = world
    path = tmp_path / "log.csv"
    log.to_csv(path, index=False)
    res = audit(path, n_boot=50)
    pd.testing.assert_frame_equal(log_from_simulation(sim, exp), log, check_dtype=False)  # the public helper
    truth_pu, truth_agg, truth_dec = per_user_gap(sim.stats), aggregate_gap(sim.stats), decompose(sim.stats)
    assert res.per_user.value == pytest.approx(truth_pu.value, rel=1e-12, abs=1e-15)
    assert res.per_user.n_defined == truth_pu.n_defined
    assert res.aggregate.value == pytest.approx(truth_agg.value, rel=1e-12, abs=1e-15)
    assert res.decomposition.competition_performance == pytest.approx(truth_dec.competition_performance, rel=1e-9)
    assert res.decomposition.per_user_gap_term == pytest.approx(truth_dec.per_user_gap_term, rel=1e-9)
    users = res.per_user_table()  # ids are read as text: put them in the simulator's order
    users = users.assign(row=users["user"].astype(int)).sort_values("row")
    np.testing.assert_allclose(users["gap"].to_numpy() / 100, truth_pu.per_user, rtol=1e-12, equal_nan=True)
    assert res.n_rows == 800 * 100 and res.n_users == 800 and res.groups == ("0", "1")
    t = res.table()
    assert t.loc[0, "value"] == pytest.approx(100 * truth_pu.value)  # the table is in pp


def test_ips_with_the_random_flag_is_the_oracle_estimator_and_covers_the_per_user_gap(world):
    sim, exp, log = world
    res = audit(log, random_col="shown_at_random", n_boot=400)
    ips, naive = res.ips
    # the log lists every item, so the user's relevance rate of group s is n_s(u)/M_s: ips.py's oracle weights
    assert ips["value"] == pytest.approx(ips_estimate(exp, "oracle_both").value, rel=1e-9)
    assert naive["value"] == pytest.approx(_naive(exp), rel=1e-9)  # unweighted: an independent computation
    assert ips["estimand"] == "PerUserGap"
    truth = per_user_gap(sim.stats).value
    assert ips["interval"].lo < truth < ips["interval"].hi
    assert res.to_dict()["ips"][0]["interval"] == [100 * ips["interval"].lo, 100 * ips["interval"].hi]


def _naive(exp) -> float:
    e, rel, g = exp.exposure, exp.relevant, exp.group
    return float(e[rel & (g == 0)].mean() - e[rel & (g == 1)].mean())


def test_ips_from_a_propensity_column_on_a_log_of_random_rows_only(world):
    sim, exp, _ = world
    n = sim.positions.shape[0]
    rows = np.arange(n)
    m_s = np.bincount(sim.groups, minlength=2)
    n_s = np.where(exp.group == 0, sim.stats.n0, sim.stats.n1)
    log = pd.DataFrame(
        {
            "user_id": rows,
            "item_id": exp.shown,
            "group": exp.group,
            "position": sim.positions[rows, exp.shown],
            "relevance": exp.relevant.astype(int),
            "p": n_s / m_s[exp.group],  # the true P(Rel = 1 | u, S = s)
        }
    )
    res = audit(log, propensity_col="p", ips_users="all", n_boot=400)
    ips = res.ips[0]
    assert ips["value"] == pytest.approx(ips_estimate(exp, "oracle").value, rel=1e-9)
    assert ips["interval"].lo < ips_estimand(sim.stats) < ips["interval"].hi
    # one row per user: no user has both groups in the log, so the gaps and U*-restricted IPS are missing
    assert np.isnan(res.per_user.value) and "U* is empty" in res.per_user.missing_reason
    both = audit(log, propensity_col="p", n_boot=0).ips[0]
    assert both["value"] is None and "of users in U*: 0 / 0" in both["missing_reason"]
    assert "pass --ips-users all" in both["missing_reason"]
    assert res.reversal is None and res.to_dict()["per_user_gap"]["value"] is None


def test_the_toy_reversal_is_found_with_the_toy_modules_own_numbers(tmp_path):
    path = tmp_path / "toy.csv"
    toy_log().to_csv(path, index=False)
    res = audit(path, exposure="position", min_count=1, n_boot=100)
    gaps = toy_gaps()
    assert res.per_user.value == pytest.approx(gaps["per_user_gap"])
    assert res.aggregate.value == pytest.approx(gaps["aggregate_gap"])
    assert res.reversal is True and res.unit == "positions"
    assert "YES" in res.reversal_text()
    # the casual user's Grey items moved down: no reversal (the toy module's own counterfactual)
    fixed = audit(
        toy_log({"active": TOY_LISTS["active"], "casual": grey_moved_down(TOY_LISTS["casual"])}),
        exposure="position",
        min_count=1,
        n_boot=0,
    )
    assert fixed.reversal is False


def test_a_reversal_over_many_users_is_clear_under_the_log_exposure():
    # Blue (group 1) is ahead of Orange inside every list; the casual users' relevant items sit low and
    # are mostly Blue, so pooled over users Orange gets more exposure
    lists = {"active": "BOOOOO", "casual": "G" * 20 + "BBBBBBBBBO"}
    assert toy_gaps(lists)["reversal"]  # the toy module's own verdict (average position)
    res = audit(toy_log(lists, copies=30), min_count=5, n_boot=300)
    assert (res.per_user_table()["gap"] < 0).all()  # every user: group 1 more exposed
    assert res.per_user.value < 0 < res.aggregate.value  # log exposure: higher is more visible
    assert res.reversal is True
    assert res.reversal_clear is True  # both intervals exclude 0
    assert audit(toy_log(copies=30), min_count=5, n_boot=300).reversal_clear is False  # Fig. 2's lists: not clear
    assert res.to_dict()["reversal"] == {"value": True, "clear": True, "text": res.reversal_text()}


# ------------------------------------------------------------------------------ formats
def test_tsv_parquet_and_recbole_read_like_csv(tmp_path):
    log = toy_log()
    log.to_csv(tmp_path / "log.csv", index=False)
    log.to_csv(tmp_path / "log.tsv", sep="\t", index=False)
    log.to_parquet(tmp_path / "log.parquet")
    types = {"user_id": "token", "item_id": "token", "group": "token", "position": "float", "relevance": "float"}
    rb = log[list(types)].rename(columns={c: f"{c}:{t}" for c, t in types.items()})
    rb.to_csv(tmp_path / "log.inter", sep="\t", index=False)
    results = [
        audit(tmp_path / f"log.{s}", exposure="position", min_count=1, n_boot=0)
        for s in ("csv", "tsv", "parquet", "inter")
    ]
    for r in results[1:]:
        assert r.per_user.value == results[0].per_user.value
        assert r.aggregate.value == results[0].aggregate.value
    assert [r.format for r in results] == ["csv", "tsv", "parquet", "recbole"]
    assert read_log(tmp_path / "log.inter")["group"].tolist()[:2] == ["0", "0"]  # token fields stay strings


def test_text_ids_stay_text_and_relevance_may_be_true_false(tmp_path):
    path = tmp_path / "ids.csv"
    path.write_text(
        "user_id,item_id,group,position,relevance\nu,007,x,1,True\nu,7,y,2,true\nv,007,x,2,1\nv,7,y,1,FALSE\n"
    )
    res = audit(path, min_count=1, n_boot=0)  # '007' and '7' are two items, not a duplicate pair
    assert res.n_items == 2 and res.per_user.n_defined == 1 and res.aggregate.n_pairs_0 == 2


# ------------------------------------------------------------------------------ validation
def test_a_misspelt_column_names_the_closest_match_and_the_flag():
    log = small_log().rename(columns={"position": "postion"})
    with pytest.raises(
        LogError,
        match=r"no column 'position' for the position \(closest: 'postion'; map it with --position-col postion\)",
    ):
        audit(log)
    assert audit(log, position_col="postion", min_count=1, n_boot=0).n_rows == 4
    with pytest.raises(LogError, match="no column 'score' for the propensity .*map it with --propensity-col NAME"):
        audit(small_log(), propensity_col="score")


def test_duplicate_pairs_name_the_first_pair_and_its_lines(tmp_path):
    log = small_log(item_id=[1, 2, 1, 1])
    log.to_csv(tmp_path / "d.csv", index=False)
    with pytest.raises(
        LogError, match=r"1 duplicate \(user, item\) row\(s\); first: user 'b', item '1' at line 4 and line 5"
    ):
        audit(tmp_path / "d.csv")


def test_non_numeric_positions_and_relevance(tmp_path):
    small_log(position=[1, "top", 2, 1]).to_csv(tmp_path / "p.csv", index=False)
    with pytest.raises(LogError, match="position column 'position' is not numeric: 'top' at line 3"):
        audit(tmp_path / "p.csv")
    with pytest.raises(LogError, match=r"relevance column 'relevance' is not numeric: 'yes' at row 0 \(and 1 more\)"):
        audit(small_log(relevance=["yes", 1, "no", 0]))
    with pytest.raises(LogError, match="positions count from 1 .*0-based ranks: add 1"):
        audit(small_log(position=[0, 1, 1, 0]))
    with pytest.raises(LogError, match="position column 'position' is empty in 1 row"):
        audit(small_log(position=[1, None, 2, 1]))


def test_empty_ids_are_errors():
    with pytest.raises(LogError, match="user column 'user_id' is empty in 1 row\\(s\\), first at row 2"):
        audit(small_log(user_id=["a", "a", None, "b"]))
    with pytest.raises(LogError, match="item column 'item_id' is empty in 2 row"):
        audit(small_log(item_id=[1, None, None, 2]))


def test_graded_relevance_needs_a_threshold():
    with pytest.raises(LogError, match="must be 0 or 1; got 4 at row 0 .*--relevant-min"):
        audit(small_log(relevance=[4, 5, 2, 1]))
    res = audit(small_log(relevance=[4, 5, 4, 1]), relevant_min=4, min_count=1, n_boot=0)
    assert res.per_user.n_defined == 1  # user b's group-y item (relevance 1) is not relevant


def test_group_column_with_one_value_or_more_than_two():
    with pytest.raises(LogError, match="has one value \\('x'\\) in every row"):
        audit(small_log(group=["x"] * 4))
    three = small_log(group=["x", "y", "x", "z"])
    with pytest.raises(LogError, match=r"has 3 values \('x', 'y', 'z'\); .*pass --groups A,B to pick the pair"):
        audit(three)
    res = audit(three, groups=("x", "y"), min_count=1, n_boot=0)
    assert res.n_left_out == 1 and res.groups == ("x", "y") and "1 row(s) of groups other" in res.warnings[0]
    floats = small_log(group=[0.0, 1.0, 0.0, np.nan])  # ints with a gap, as pandas holds them
    assert audit(floats, groups=("0", "1"), min_count=1, n_boot=0).n_left_out == 1
    with pytest.raises(LogError, match="has no value 'w'"):
        audit(three, groups=("x", "w"))
    with pytest.raises(LogError, match="group column 'group' is empty in 1 row"):
        audit(small_log(group=["x", None, "x", "y"]))


def test_a_non_utf8_byte_names_the_file_and_its_offset(tmp_path):
    data = b"user_id,item_id,group,position,relevance\na,1,x,1,1\n" + b"b\xe9,1,y,1,1\n"
    path = tmp_path / "latin.csv"
    path.write_bytes(data)
    offset = data.index(b"\xe9")
    with pytest.raises(LogError, match=rf"latin.csv: byte 0xe9 at offset {offset} \(line 3\) is not UTF-8"):
        audit(path)


def test_other_bad_files_and_flags(tmp_path):
    (tmp_path / "log.xlsx").write_text("x")
    with pytest.raises(LogError, match="unknown log format '.xlsx'"):
        audit(tmp_path / "log.xlsx")
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(LogError, match="empty.csv: the file is empty"):
        audit(tmp_path / "empty.csv")
    with pytest.raises(LogError, match="propensity column 'p' must be in \\(0, 1\\]"):
        audit(small_log(p=[0.5, 0.0, 0.5, 0.5]), propensity_col="p")
    with pytest.raises(LogError, match="random-item column 'r' must be 0/1 or true/false; got 'maybe'"):
        audit(small_log(r=[0, "maybe", 1, 0]), random_col="r")
    with pytest.raises(LogError, match="random-item column 'r' must be 0/1 or true/false; got 2 at row 3"):
        audit(small_log(r=[0, 0, 1, 2]), random_col="r")
    with pytest.raises(LogError, match="n_boot must be in 0..100000"):
        audit(small_log(), n_boot=-1)


def test_groups_too_small_give_missing_values_with_reasons():
    res = audit(small_log(), n_boot=100)  # 1 user with both groups, min_count 10
    assert res.per_user.value == pytest.approx(1 / np.log2(2) - 1 / np.log2(3))  # user a only: x at 1, y at 2
    ci = res.intervals["per_user_gap"]
    assert (
        np.isnan(ci.lo) and "1 user(s) with relevant items of both groups, fewer than min_count 10" in ci.missing_reason
    )
    assert "only 1 user(s)" in res.warnings[0]
    d = res.to_dict()
    assert d["per_user_gap"]["interval"] == {"value": None, "missing_reason": ci.missing_reason}
    assert d["ips"][0]["value"] is None and "--random-col" in d["ips"][0]["missing_reason"]
    flagged = audit(small_log(r=[1, 0, 1, 0]), random_col="r", n_boot=10, ips_users="all")
    assert "observed relevant rows of group 0 / 1 in the random-item rows: 2 / 0" in flagged.ips[0]["missing_reason"]


def test_given_exposures_skip_the_decomposition_with_a_reason():
    log = small_log(exposure=[0.9, 0.2, 0.0, 0.5])
    res = audit(log.drop(columns="position"), exposure_col="exposure", min_count=1, n_boot=0)
    assert res.per_user.value == pytest.approx(0.7) and res.exposure == "given"
    assert res.decomposition is None and "needs f(position)" in res.decomposition_missing
    assert "needs f(position)" in res.to_dict()["decomposition"]["missing_reason"]


# ------------------------------------------------------------------------------ command line and figure
def test_cli_end_to_end(tmp_path, capsys):
    sim = simulate(SimpsonConfig(n_users=200, seed=5, bias=0.03))
    log = sim_log(sim, random_experiment(sim))
    path = tmp_path / "log.csv"
    log.rename(columns={"user_id": "uid", "shown_at_random": "rnd"}).to_csv(path, index=False)
    out = tmp_path / "out"
    argv = ["simpson", "audit", str(path), "--user-col", "uid", "--random-col", "rnd", "--n-boot", "100"]
    assert main([*argv, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    res = audit(path, user_col="uid", random_col="rnd", n_boot=100)
    assert f"{100 * res.per_user.value:+.3f}" in text and f"{100 * res.aggregate.value:+.3f}" in text
    assert "IPS (1/log relevance rate), users in U*" in text and "reversal:" in text
    saved = json.loads((out / "simpson_audit.json").read_text())
    assert saved == json.loads(res.to_json())
    users = pd.read_csv(out / "simpson_audit_users.csv").sort_values("user")  # the simulator's order
    np.testing.assert_allclose(users["gap"] / 100, per_user_gap(sim.stats).per_user, rtol=1e-9, equal_nan=True)
    pytest.importorskip("matplotlib")
    assert (out / "simpson_audit.png").stat().st_size > 10_000
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["per_user_gap"]["value"] == pytest.approx(100 * res.per_user.value)


def test_cli_errors_are_one_line(tmp_path, capsys):
    small_log(group=["x", "y", "x", "z"]).to_csv(tmp_path / "g.csv", index=False)
    assert main(["simpson", "audit", str(tmp_path / "g.csv")]) == 1
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if "error" in ln]  # the other stderr lines: the INFO log (threads)
    assert len(lines) == 1 and lines[0].startswith("facterlab simpson: error: ") and "--groups A,B" in lines[0]
    assert "Traceback" not in err
    assert main(["simpson", "audit", str(tmp_path / "g.csv"), "--groups", "x,y", "--min-count", "1"]) == 0
    assert "group 0 ('x') minus group 1 ('y')" in capsys.readouterr().out
    assert main(["simpson", "audit", str(tmp_path / "g.csv"), "--groups", "x"]) == 1
    assert "--groups needs two values" in capsys.readouterr().err
    assert main(["simpson", "audit", str(tmp_path / "missing.csv")]) == 1
    assert "no such log file" in capsys.readouterr().err


def test_figure_has_three_panels():
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    fig = audit(toy_log(copies=10), min_count=5, n_boot=50).figure()
    assert len(fig.axes) == 3 and "Reversal: YES" in fig._facterlab_caption
    plt.close(fig)
