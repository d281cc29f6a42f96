"""The protocol switches of docs/PROTOCOL.md (REPRO's choice vs facterlab's) and the duplicate-title fix."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from facter_world import make_world

from facterlab.config import PROTOCOL_SWITCHES, config_hash, preset  # noqa: E402
from facterlab.data.protocol import build_interactions  # noqa: E402
from facterlab.datatypes import Prediction, Recommender  # noqa: E402
from facterlab.facter import prompts  # noqa: E402
from facterlab.facter.monitor import UNKNOWN_GENERATION, CalibrationState, FacterMonitor, MonitorSettings, OnlineScorer  # noqa: E402
from facterlab.facter.pipeline import _groups, context_embeddings, make_postprocess, protocol_variants, run_experiment  # noqa: E402
from facterlab.facter.repair import ViolationBuffer, mine_rules  # noqa: E402
from facterlab.facter.scores import ItemRepresenter  # noqa: E402
from facterlab.metrics import CatalogueMapper, ranking_metrics  # noqa: E402
from facterlab.models.fake import FakeRecommender, HashEncoder  # noqa: E402

# ------------------------------------------------------------------ duplicate titles in re-ranking


def _dup_items():
    return pd.DataFrame(
        {
            "item_id": [1, 2, 3, 4],
            "title": ["Hamlet (1996)", "Hamlet (1996)", "Heat (1995)", "Babe (1995)"],
            "features": [["Drama"]] * 4,
        }
    ).set_index("item_id")


def test_rank_duplicate_titles_keep_their_ids_by_position():
    items = _dup_items()
    post = make_postprocess("rank", None, items, 10)
    row = {"candidates": [3, 1, 4, 2]}
    # a full permutation of the candidate titles: "Hamlet (1996)" appears twice, as it does in the list
    pred = Prediction(titles=("Hamlet (1996)", "Heat (1995)", "Hamlet (1996)", "Babe (1995)"))
    ((mapped, top1, raw),) = post([row], [pred])
    assert mapped == [1, 3, 2, 4]  # the first Hamlet is the first Hamlet of the list (id 1), the second id 2
    assert sorted(mapped) == sorted(row["candidates"]) and top1 == 1 and raw == "Hamlet (1996)"
    # the second Hamlet is relevant: it is hit at rank 3 (the old exact-title map gave [1, 3, 1, 4]: never hit)
    m = ranking_metrics([mapped], [[2]], k=10)
    assert m["recall"][0] == 1.0 and m["ndcg"][0] == pytest.approx(0.5)
    # a title that is not (or no longer) a candidate maps to nothing
    ((mapped, _, _),) = post([row], [Prediction(titles=("Hamlet (1996)", "Hamlet (1996)", "Hamlet (1996)", "Alien"))])
    assert mapped == [1, 2, -1, -1]


# ------------------------------------------------------------------ presets and run record


def test_presets_take_each_sides_choice():
    repro, ours = preset("repro"), preset("facterlab")
    for key, (theirs, mine) in PROTOCOL_SWITCHES.items():
        sec, fld = key.split("__")
        assert getattr(getattr(repro, sec), fld) == theirs, key
        assert getattr(getattr(ours, sec), fld) == mine, key
        assert getattr(getattr(preset("icml"), sec), fld) == theirs, key
    assert ours.facter.alpha == repro.facter.alpha and config_hash(ours) != config_hash(repro)
    assert protocol_variants(ours) == {k.split("__")[1]: v[1] for k, v in PROTOCOL_SWITCHES.items()}
    with pytest.raises(ValueError, match="top1"):
        preset("repro", facter__top1="first")


def test_run_records_every_switch(tmp_path):
    ds = make_world()
    out = {}
    for name in ("repro", "facterlab"):
        cfg = preset(
            name,
            data__dataset="synthetic",
            data__n_rows=160,
            facter__tau_rho=0.8,
            facter__passes=2,
            metrics__cfr_rows=20,
            metrics__snsr_min_group=10,
        )
        rec = FakeRecommender(
            ds.items, protocol="open", mode="biased", obey_rules=True, bias_share=0.5, bias_features={"F": ("Romance",)}
        )
        res = run_experiment(cfg, recommender=rec, encoder=HashEncoder(), dataset=ds, out_dir=tmp_path, progress=False)
        out[name] = res
        v = res.record.metrics.variants
        for key, pair in PROTOCOL_SWITCHES.items():
            assert v[key.split("__")[1]] == pair[0 if name == "repro" else 1]
        # the SNSR empty-row switch reaches snsr_proxy: REPRO's zero vectors are counted, ours dropped
        joint = res.record.metrics.methods["facter"].snsr_proxy["joint"]
        assert ("n_rows_zero" in joint.extra) == (name == "repro")
    assert out["repro"].run_id != out["facterlab"].run_id
    # REPRO's top-1 is never an unmapped title when a later title maps
    recs = out["repro"].rows["facter"]
    assert ((recs["top1_id"] >= 0) | recs["mapped_ids"].map(lambda m: all(x < 0 for x in m))).all()


# ------------------------------------------------------------------ top-1 and empty outputs


def test_top1_first_mapped_vs_position0():
    items = _dup_items()
    enc = HashEncoder()
    mapper = CatalogueMapper(items.reset_index(), enc, threshold=0.99)
    pred = Prediction(titles=("An Invented Film", "Heat (1995)", "Babe (1995)"))
    ((m0, t0, r0),) = make_postprocess("open", mapper, items, 10, top1="position0")([{}], [pred])
    ((m1, t1, r1),) = make_postprocess("open", mapper, items, 10, top1="first_mapped")([{}], [pred])
    assert m0 == m1 == [-1, 3, 4]
    assert (t0, r0) == (-1, "An Invented Film") and (t1, r1) == (3, "Heat (1995)")
    # nothing maps: both give the raw first title; no title at all: ""
    ((_, t, r),) = make_postprocess("open", mapper, items, 10, top1="first_mapped")([{}], [Prediction(titles=("Zzz",))])
    assert (t, r) == (-1, "Zzz")
    ((_, t, r),) = make_postprocess("open", mapper, items, 10, top1="first_mapped")([{}], [Prediction(titles=())])
    assert (t, r) == (-1, "")


class _Silent(Recommender):
    """A recommender that never answers (every output is empty)."""

    fingerprint = "silent"

    def predict(self, reqs):
        return [Prediction(titles=(), parse_status="empty") for _ in reqs]


@pytest.fixture(scope="module")
def world():
    ds = make_world()
    inter = build_interactions(ds, preset("repro", data__dataset="synthetic", data__n_rows=120).data)
    return ds, inter


def _monitor(world, rec, **facter):
    ds, inter = world
    cfg = preset(
        "repro",
        data__dataset="synthetic",
        data__n_rows=120,
        facter__tau_rho=0.8,
        **{f"facter__{k}": v for k, v in facter.items()},
    )
    enc = HashEncoder()
    items = inter.items
    rep = ItemRepresenter(enc, items)
    calib, test = inter.calib.reset_index(drop=True), inter.test.reset_index(drop=True)
    state = CalibrationState(
        q0=0.0,
        context_emb=context_embeddings(calib, items, enc, prompts),
        groups=_groups(calib),
        pred_emb=rep.items(calib["target"].tolist()),
        alpha=0.1,
        k_index=1,
        n=len(calib),
    )
    scorer = OnlineScorer(
        state,
        context_embeddings(test, items, enc, prompts),
        _groups(test),
        rep.items(test["target"].tolist()),
        0.7,
        0.8,
    )
    post = make_postprocess("open", CatalogueMapper(items.reset_index(), enc), items, 10, top1=cfg.facter.top1)
    settings = MonitorSettings(cfg.facter, n_calib=state.n, protocol="open", k=10, domain="movie", seed=0)
    return FacterMonitor(
        settings,
        rows=test,
        items=items,
        recommender=rec,
        scorer=scorer,
        postprocess=post,
        represent=rep.predictions,
        prompts=prompts.for_config(cfg.facter),
    )


@pytest.mark.parametrize("rule", ["unknown_generation", "skip"])
def test_empty_outputs_give_unknown_generation_rules_only_under_repro(world, rule):
    mon = _monitor(world, _Silent(), empty_output_rule=rule)
    res = mon.run(1)
    assert res.records["viol_adaptive"].all()  # Q0 = 0 and an empty answer scores d = 1
    rules = {r for rr in res.records["rules"] for r in rr}
    titles = {e.title for e in res.buffer.snapshot()}
    if rule == "unknown_generation":
        assert titles == {UNKNOWN_GENERATION}
        assert any(r.endswith(f"-> ({UNKNOWN_GENERATION})") for r in rules)
    else:
        assert titles == {""} and rules == set()


def test_cfr_prompt_is_the_rows_last_pass_prompt(world):
    ds, _ = world
    rec = FakeRecommender(
        ds.items, protocol="open", mode="biased", obey_rules=True, bias_share=0.5, bias_features={"F": ("Romance",)}
    )
    mon = _monitor(world, rec)
    res = mon.run(2)
    last = res.records[res.records["pass"] == 2].sort_values("position")
    rows = mon.rows.to_dict("records")
    differ = 0
    for row, rules in zip(rows, last["rules"]):
        mine = mon.row_system(row, "last_pass")
        final = mon.row_system(row, "final_rules")
        assert mine == prompts.system_prompt("facter", [_rule(t) for t in rules])
        assert final == mon.final_system(row)
        differ += mine != final
    assert differ > 0  # the rules changed during the last pass: the two choices are not the same prompt


def _rule(text):
    from facterlab.datatypes import Rule

    head, target = text[len("AVOID: (") :].split(") -> (")
    attr, value = head.split("=", 1)
    target = target[:-1]
    if target.endswith("-only"):
        return Rule(attr, value, target[: -len("-only")], "feature")
    return Rule(attr, value, target, "title")


# ------------------------------------------------------------------ rule tie order and wording


def test_rule_ties_first_seen_vs_by_name():
    buf = ViolationBuffer()
    attrs = {"gender": "F", "age": "25-34", "occupation": "writer"}
    for _ in range(3):  # Western seen first, Comedy second: equal counts
        buf.push(attrs, "Some Film (1990)", ["Western", "Comedy"])
    first = [r.feature for r in mine_rules(buf, attrs, tie_order="first_seen", max_per_attr=2)[:2]]
    by_name = [r.feature for r in mine_rules(buf, attrs, tie_order="by_name", max_per_attr=2)[:2]]
    assert first == ["Western", "Comedy"] and by_name == ["Comedy", "Western"]
    with pytest.raises(ValueError, match="tie order"):
        mine_rules(buf, attrs, tie_order="random")


def test_gender_wording_matches_the_rules_under_code():
    row = {"gender": "F", "age": "25-34", "occupation": "writer", "history": [1]}
    items = {1: "Heat (1995)"}
    assert "- Gender: F" in prompts.PromptSet("code").user_prompt(row, items)
    assert "- Gender: female" in prompts.PromptSet("word").user_prompt(row, items)
    req = prompts.for_config(preset("repro").facter).build_request(row, items, "", seed=3)
    assert "- Gender: F" in dict(req.messages)["user"] and req.meta_dict["gender"] == "F"
    with pytest.raises(ValueError, match="gender wording"):
        prompts.PromptSet("letter")


# ------------------------------------------------------------------ SNSR representation


def test_snsr_mapped_titles_drop_unmapped_positions():
    items = _dup_items().reset_index()
    items["text"] = items["title"] + " :: Drama"
    mapper = CatalogueMapper(items, HashEncoder())
    titles = [["Heat (1995)", "Nothing Maps Here"], ["Nothing At All"]]
    mapped = [[3, -1], [-1]]
    emb, mask = mapper.row_item_embeddings(titles, mapped, k=2, represent="title", unmapped="drop")
    assert mask.tolist() == [[True, False], [False, False]]
    enc = HashEncoder()
    assert np.allclose(emb[0, 0], enc.encode(["Heat (1995)"])[0], atol=1e-6)
    emb2, mask2 = mapper.row_item_embeddings(titles, mapped, k=2)
    assert mask2.tolist() == [[True, True], [True, False]]
    assert np.allclose(emb2[0, 0], enc.encode(["Heat (1995) :: Drama"])[0], atol=1e-6)
    vec = mapper.row_embeddings(titles, mapped, k=2, represent="title", unmapped="drop")
    assert np.isnan(vec[1]).all() and np.isfinite(vec[0]).all()
