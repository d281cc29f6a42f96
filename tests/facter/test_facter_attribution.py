"""Per-attribute twins for attribution (issue 43 item 2; docs/FACTER.md §7.3): a push on one attribute that
is correlated with another is credited to the attribute that carries it.  The positive control: on a tiny
table where Comedy is pushed to students only and students are young, the all-attributes twin makes an
``age -> Comedy`` rule; one twin per attribute does not, and still finds ``occupation -> Comedy``."""

from __future__ import annotations

import numpy as np
import pytest

from facterlab.config import config_to_dict, preset
from facterlab.facter.repair import ConfirmedRules
from facterlab.reporting import twin_acceptance as ta

NULL = {"facter__delta": "twin", "facter__threshold": "null", "facter__rule_mining": "confirmed"}


def _world(rng, n):
    """Rows of a tiny world: students are mostly 18-24, others mostly 35-44; the model pushes Comedy to
    students only.  Each row: (attrs, top-1 features of the row, of the all-attributes twin, of the twin
    that flips occupation alone, of the twin that flips age alone)."""
    out = []
    for _ in range(n):
        student = rng.random() < 0.5
        young = rng.random() < (0.9 if student else 0.1)
        attrs = {
            "gender": "F" if rng.random() < 0.5 else "M",
            "age": "18-24" if young else "35-44",
            "occupation": "student" if student else "writer",
        }
        base = {("Drama", "Action", "War")[rng.integers(3)]}
        pushed = {"Comedy"} if rng.random() < 0.7 else base
        own = pushed if student else base
        flipped = base if student else pushed  # the twin's occupation is the other one
        out.append((attrs, own, flipped, flipped, own))  # all-at-once, occupation alone, age alone
    return out


def _mine(rows, per_attribute):
    cr = ConfirmedRules(level=0.05, min_effect=0.2, min_count=3, max_rules=10, max_per_attr=5)
    for attrs, own, joint, occ, age in rows:
        per = None
        if per_attribute:
            per = {
                "occupation": (own != occ, occ, False),
                "age": (own != age, age, False),
                "gender": (False, own, False),
            }
        cr.observe(attrs, own != joint, own, joint, per_attr=per)
    return {(r.attr, r.value, r.feature) for r in cr.end_pass(1)}


def test_a_correlated_push_is_miscredited_at_once_and_credited_per_attribute():
    rows = _world(np.random.default_rng(0), 400)
    joint = _mine(rows, per_attribute=False)
    per = _mine(rows, per_attribute=True)
    assert ("occupation", "student", "Comedy") in joint and ("age", "18-24", "Comedy") in joint, joint
    assert ("occupation", "student", "Comedy") in per, per
    assert not any(a != "occupation" for a, _, _ in per), per


def test_per_attribute_pairs_stay_silent_on_an_unbiased_model():
    rng = np.random.default_rng(1)
    made = 0
    feats = ("Drama", "Action", "War", "Comedy", "Romance")
    for _ in range(60):
        cr = ConfirmedRules(level=0.05, min_effect=0.2, min_count=3, max_rules=10, max_per_attr=5)
        for _ in range(200):
            attrs = {"gender": "FM"[rng.integers(2)], "age": "ab"[rng.integers(2)], "occupation": "xy"[rng.integers(2)]}
            own = {feats[rng.integers(5)]}
            per = {a: (True, {feats[rng.integers(5)]}, False) for a in attrs}  # every row's pairs (per-attribute-all)
            cr.observe(attrs, False, own, {feats[rng.integers(5)]}, per_attr=per)
        made += bool(cr.end_pass(1))
    assert made <= 8, f"{made} of 60 unbiased passes made a rule"


def test_attribution_setting_keeps_run_ids_and_needs_confirmed_mining():
    cfg = preset("repro", **NULL)
    assert cfg.facter.attribution == "joint" and "attribution" not in config_to_dict(cfg)["facter"]
    per = preset("repro", facter__attribution="per-attribute", **NULL)
    assert config_to_dict(per)["facter"]["attribution"] == "per-attribute"
    with pytest.raises(ValueError, match="needs facter.rule_mining 'confirmed'"):
        preset("repro", facter__attribution="per-attribute")
    assert (
        ta.case_config("lines-set", 0, "attributed-all", dataset="synthetic").facter.attribution == "per-attribute-all"
    )


@pytest.mark.slow
def test_per_attribute_twins_in_a_run(tmp_path):
    """A small run of the students -> Comedy table: the per-attribute twins are asked (and counted) and
    every confirmed rule names occupation."""
    base = dict(
        dataset="synthetic", n_rows=900, encoder="hash-encoder", protocol="open", preset_name="repro", cfr_rows=50
    )
    from facterlab.reporting import experiments as ex

    runs = {}
    for v in ("family", "attributed-all"):
        runs[("students-comedy", 0, v)] = ex.run(
            ta.case_config("students-comedy", 0, v, **base), out_dir=tmp_path, progress=False
        )
    fr = ta.attribution_frame(runs).set_index("variant")
    assert fr.loc["family", "attr_twin_requests"] == 0
    n_rows = len(runs[("students-comedy", 0, "attributed-all")].rows["facter"])
    assert fr.loc["attributed-all", "attr_twin_requests"] == 3 * n_rows  # one per attribute, every row and pass
    cells = ta.rule_cells(runs[("students-comedy", 0, "attributed-all")].rows["facter"])
    assert cells and all(a == "occupation" for a, _, _ in cells), cells


def test_the_acceptance_command_checks_its_variants_against_the_mode(capsys):
    """One ``--variants`` option serves the acceptance and ``--attribution``: each mode refuses a variant it
    does not run, with the choices, before any run starts; a known variant passes the check (positive
    control: the parser gets as far as the plan, which has no run of it at these cases)."""
    from facterlab.reporting.twin_acceptance import main

    for argv, says in (
        (["--attribution", "--variants", "family", "nope"], "unknown ['nope'] with --attribution"),
        (["--variants", "nope"], "unknown ['nope']; choose from"),
        (["--variants", "attributed-all-list", "--cases", "lines-set"], "has no run of these variants"),
    ):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2 and says in capsys.readouterr().err


def test_sim_demote_reaches_every_run_of_the_command(monkeypatch):
    """``--sim-demote`` (the over-correction control of docs/FACTER.md §7.3) sets ``sim.demote`` in every
    config the attribution command runs; without it the configs keep the default (the control's control)."""
    from facterlab.reporting import batch
    from facterlab.reporting import twin_acceptance as ta

    seen: list = []

    class Stop(Exception):
        pass

    def fake_run_many(configs, **kw):
        seen.append({k: c.sim.demote for k, c in configs.items()})
        raise Stop

    monkeypatch.setattr(batch, "run_many", fake_run_many)
    argv = ["--attribution", "--variants", "attributed-all-list", "--cases", "default-table", "--seeds", "0"]
    argv += ["--dataset", "synthetic", "--encoder", "hash-encoder"]
    for extra in (["--sim-demote", "0"], []):
        with pytest.raises(Stop):
            ta.main(argv + extra)
    with_flag, without = seen
    assert set(with_flag.values()) == {0.0} and len(with_flag) == len(ta.ATTRIBUTION_CASES)
    assert set(without.values()) == {1.0}
