"""Tables and published numbers (facterlab.reporting.tables / published): golden outputs on tiny inputs."""

from __future__ import annotations

import io
import math

import pandas as pd
import pytest

from facterlab.datatypes import MissingValue
from facterlab.facter.record import RunMetrics
from facterlab.reporting import published as pub
from facterlab.reporting import tables as tb


def _run(
    seed_ndcg, valid=None, dataset="ml-100k", model="smollm2-135m", rule="one_sided", adaptive=(3, 1), q_star=None
):
    """The JSON of a metrics.json (input data for the tables, read through the typed record)."""
    methods = {}
    for method, delta in (("neutral", 0.0), ("facter", 0.05)):
        block = {
            "ndcg@10_multi": seed_ndcg + delta,
            "valid@10": valid if valid is not None else {"value": None, "missing_reason": "nothing mapped"},
            "snsr_proxy": {
                "joint": {"value": None, "missing_reason": "1 group reaches 30 rows"},
                "gender": {"snsr": 0.2, "snsv": 0.2, "n_groups": 2},
            },
            "cfr_single": {"gender": 0.5, "age": 0.25, "occupation": 0.75},
            "violations": {"adaptive": list(adaptive), "fixed_q0": [4, 4], **({"q_star": q_star} if q_star else {})},
            "threshold_path": [1.0, 1.5, 2.0],
        }
        methods[method] = block
    return {
        "dataset": dataset,
        "is_synthetic": False,
        "model": model + "@fp",
        "model_name": model,
        "encoder": "all-MiniLM-L6-v2",
        "protocol": "open",
        "preset": "repro",
        "n_calib": 28,
        "n_test": 12,
        "variants": {
            "threshold_rule": rule,
            "correction": "none",
            "mapping": "encoder",
            "snsr": "snsr_proxy",
            "flip_strategy": "distinct",
        },
        "calibration": {"alpha": 0.1, "q0": 1.0},
        "methods": methods,
    }


def _m(*runs: dict) -> list:
    """The typed records of metrics.json objects: what the readers take (read leniently: a key a test
    leaves out is absent)."""
    return [RunMetrics.partial(r) for r in runs]


COLS = [
    tb.Column("ndcg@10_multi", "NDCG@10"),
    tb.Column("valid@10", "Valid@10"),
    tb.Column("violations_adaptive", "V(t)", 1),
]


def test_mean_sd_and_missing_golden_markdown():
    runs = [_run(0.1), _run(0.3)]
    t = tb.method_table(
        _m(*runs), name="t1", title="Tiny", columns=COLS, methods=("neutral", "facter"), profile="smoke", published=()
    )
    # hand-computed: mean(0.1, 0.3) = 0.2, sd = sqrt(2 * 0.1^2 / 1) = 0.1414; FACTER +0.05
    assert t.rows == [
        ["ours", "ml-100k", "smollm2-135m", "Neutral", "2", "0.200 ± 0.141", "n/a [1]", "1.0 ± 0.0"],
        ["ours", "ml-100k", "smollm2-135m", "FACTER", "2", "0.250 ± 0.141", "n/a [1]", "1.0 ± 0.0"],
    ]
    assert t.footnotes == ["[1] nothing mapped"]
    md = t.to_markdown()
    expected_table = (
        "| Source | Dataset | Model | Method | Seeds | NDCG@10 | Valid@10 | V(t) |\n"
        "|---|---|---|---|---|---|---|---|\n"
        "| ours | ml-100k | smollm2-135m | Neutral | 2 | 0.200 ± 0.141 | n/a [1] | 1.0 ± 0.0 |\n"
        "| ours | ml-100k | smollm2-135m | FACTER | 2 | 0.250 ± 0.141 | n/a [1] | 1.0 ± 0.0 |\n"
    )
    assert expected_table in md
    assert md.startswith("**Tiny**\n")
    assert "[1] nothing mapped" in md
    # provenance: profile, preset, encoder and every variant are stated
    assert "profile smoke" in md and "preset repro" in md
    for v in (
        "threshold_rule=one_sided",
        "correction=none",
        "mapping=encoder",
        "snsr=snsr_proxy",
        "flip_strategy=distinct",
    ):
        assert v in md
    assert "SYNTHETIC" not in md


def test_csv_round_trip_and_comment_lines():
    t = tb.method_table(
        _m(_run(0.1, valid=0.5)), name="t2", title="CSV", columns=COLS, methods=("neutral",), published=()
    )
    text = t.to_csv()
    assert text.splitlines()[0].startswith("# Runs: ")  # the header names the runs and code version
    body = [line for line in text.splitlines() if not line.startswith("#")]
    assert body[0] == "Source,Dataset,Model,Method,Seeds,NDCG@10,Valid@10,V(t)"
    assert body[1] == "ours,ml-100k,smollm2-135m,Neutral,1,0.100,0.500,1.0"
    assert any(line.startswith("# Variants: ") for line in text.splitlines())
    back = pd.read_csv(io.StringIO(text), comment="#", dtype=str)
    assert back.shape == (1, 8) and back.loc[0, "NDCG@10"] == "0.100"


def test_latex_escapes_and_pm():
    t = tb.Table(
        name="x_y",
        title="50% of A_B & C",
        header=["a_b", "V(t)"],
        rows=[["0.1 ± 0.2", "n/a [1]"]],
        notes=["note #1"],
        footnotes=["[1] reason $"],
    )
    tex = t.to_latex()
    assert r"a\_b & V(t) \\" in tex
    assert r"0.1 $\pm$ 0.2 & n/a [1] \\" in tex
    assert r"\caption{50\% of A\_B \& C}" in tex
    assert r"note \#1 \\ [1] reason \$" in tex
    assert r"\label{tab:x-y}" in tex
    assert tex.count(r"\begin{table}") == 1 and tex.count(r"\end{table}") == 1


def test_partial_missing_seed_gets_footnote():
    a, b = _run(0.1, valid=0.4), _run(0.3)  # valid missing in the second seed
    t = tb.method_table(
        _m(a, b), name="t", title="T", columns=[tb.Column("valid@10", "Valid@10")], methods=("neutral",), published=()
    )
    assert t.rows[0][-1] == "0.400 [1]"
    assert t.footnotes == ["[1] 1 of 2 seeds missing: nothing mapped"]


def test_varying_variant_becomes_a_row_label():
    runs = [_run(0.1, rule="one_sided"), _run(0.2, rule="aci")]
    t = tb.method_table(_m(*runs), name="t", title="T", columns=COLS[:1], methods=("neutral",), published=())
    assert "Threshold rule" in t.header
    assert len(t.rows) == 2  # never averaged across variants
    assert {r[t.header.index("Threshold rule")] for r in t.rows} == {"one_sided", "aci"}
    assert not any("threshold_rule=" in n for n in t.notes)


def test_published_rows_beside_ours():
    t = tb.method_table(
        _m(_run(0.1, valid=0.5, dataset="ml-1m", model="llama3-8b")),
        name="t",
        title="T",
        columns=[tb.Column("ndcg@10_multi", "NDCG@10"), tb.Column("violations_adaptive", "V(t)", 1)],
    )
    repro = [r for r in t.rows if r[0] == "REPRO"]
    assert [r[3] for r in repro] == ["Neutral", "Fair", "FACTER"]
    assert [r[5] for r in repro] == ["0.035", "0.030", "0.029"]
    # REPRO gives no adaptive count for the baselines: n/a with a reason, never 0
    assert repro[0][6].startswith("n/a [") and repro[2][6] == "9.0"
    assert any(tb.NOT_REPORTED in f for f in t.footnotes)
    assert any(r[0] == "ORIG" for r in t.rows)


def test_random_floor_row():
    m = _run(0.1, valid=0.5)
    m["protocol"] = "rank"
    m["random_floor"] = {"ndcg@10_multi": 0.24, "recall@10_multi": 0.25}
    t = tb.method_table(
        _m(m), name="t", title="T", columns=COLS[:2], methods=("neutral",), published=(), random_floor=True
    )
    floor = t.rows[-1]
    assert floor[3] == "Random ranking (floor)" and floor[5] == "0.240"
    assert floor[6].startswith("n/a [")


def test_synthetic_is_flagged():
    m = _run(0.1)
    m["is_synthetic"] = True
    t = tb.method_table(_m(m), name="t", title="T", columns=COLS[:1], published=())
    assert t.notes[0].startswith("SYNTHETIC DATA")


def test_flatten_and_metric_value():
    f = RunMetrics.partial(_run(0.1)).methods["neutral"].flat()
    assert f["violations_adaptive"] == 1.0 and f["violations_adaptive_total"] == 4.0
    assert f["violations_fixed_q0_pass2"] == 4.0
    assert f["cfr_age"] == 0.25 and f["snsr_gender"] == 0.2
    assert isinstance(f["snsr_joint"], MissingValue) and "30 rows" in f["snsr_joint"].reason
    assert f["q0"] == 1.0 and f["q_final"] == 2.0
    assert isinstance(tb.metric_value(float("nan")), MissingValue)
    assert isinstance(tb.metric_value("abc"), MissingValue)


def test_aggregate_matches_pandas():
    vals = [0.1, 0.25, 0.4, 0.9]
    c = tb.aggregate(vals)
    s = pd.Series(vals)
    assert math.isclose(c.mean, s.mean()) and math.isclose(c.sd, s.std(ddof=1))


def test_per_pass_table_and_save(tmp_path):
    runs = [_run(0.1, adaptive=(3, 1), q_star=[1, 0]), _run(0.2, adaptive=(5, 1), q_star=[1, 0])]
    t = tb.per_pass_table(_m(*runs), name="fig1", title="By pass")
    assert t.rows[1][:2] == ["1", "4.0 ± 1.4"]  # mean(3, 5) = 4, sd = sqrt(2)
    assert t.rows[0][0].startswith("Q0") and t.rows[0][5] == "1.000 ± 0.000"
    assert t.rows[1][-3:] == ["15.3", "57.0", "1.272"]
    paths = t.save(tmp_path)
    assert sorted(p.name for p in paths.values()) == ["fig1.csv", "fig1.md", "fig1.tex"]
    with pytest.raises(ValueError, match="no per-pass violations"):
        tb.per_pass_table(_m({"methods": {}}), name="x", title="x")


def test_empty_input_is_a_clear_error():
    with pytest.raises(ValueError, match="at least one run record"):
        tb.method_table([], name="x", title="x")


def test_published_numbers_match_spec():
    # docs/FACTER.md §6: headline adaptive count = last per-pass count; threshold path rises
    last = pub.published_value("REPRO", "ml-1m", "llama3-8b", "open", "facter", "violations_adaptive_pass", 2)
    assert last == pub.published_value("REPRO", "ml-1m", "llama3-8b", "open", "facter", "violations_adaptive") == 9.0
    path = [pub.published_value("REPRO", "ml-1m", "llama3-8b", "open", "facter", "threshold_path", i) for i in range(4)]
    assert path == sorted(path) and path[0] == 1.004 and path[-1] == 1.494
    assert pub.published_value("REPRO", "ml-1m", "llama3-8b", "rank", "neutral", "recall@10_multi") == 0.433
    assert pub.published_value("ORIG", "ml-1m", "any", "open", "facter", "cfr_multi") == 0.591
    assert len(pub.published_frame("REPRO")) == len(pub.published_records("REPRO"))
    with pytest.raises(ValueError, match="unknown published source"):
        pub.published_records("OTHER")


@pytest.mark.slow
def test_saved_figures_are_byte_identical_when_redrawn(tmp_path):
    import time

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from facterlab.reporting.figures import save_figure

    def draw(d):
        fig, ax = plt.subplots()
        ax.plot([0, 1, 2], [1, 0, 2])
        paths = save_figure(fig, "f", d)
        plt.close(fig)
        return [p.read_bytes() for p in paths]

    a = draw(tmp_path / "a")
    time.sleep(1.1)  # a PDF creation date would differ by now
    assert draw(tmp_path / "b") == a


def test_protocol_line_and_no_neighbour_share():
    """Every table names the protocol switches (header notes and LaTeX caption) and shows the share of
    rows without a counterfactual neighbour beside the violation counts."""
    from facterlab.config import preset
    from facterlab.facter.pipeline import protocol_variants

    old = _run(0.1)  # a run that predates the switches
    new = _run(0.2)
    new["variants"].update(protocol_variants(preset("repro")))
    new["calibration"].update({"share_no_neighbour": 0.969, "test_share_no_neighbour": 0.95})
    cols = [tb.Column("violations_adaptive", "V(t)", 1), tb.Column("no_neighbour_test", "No CF nb.")]
    t = tb.method_table(_m(new), name="t", title="T", columns=cols, methods=("neutral",), published=())
    assert t.rows[0][-2:] == ["1.0", "0.950"]
    proto = [n for n in t.notes if n.startswith("Protocol (")]
    assert proto == [
        "Protocol (docs/PROTOCOL.md): tie_order=file_order, ndcg_positions=compacted, "
        "snsr_items=mapped_title, snsr_empty_rows=zero, rule_tie_order=first_seen, top1=first_mapped, "
        "empty_output_rule=unknown_generation, cfr_prompt=last_pass, gender_in_prompt=code."
    ]
    assert any("96.9% of calibration rows and 95.0% of test rows" in n for n in t.notes)
    assert proto[0].replace("_", r"\_") in t.to_latex().split(r"\caption{")[1]
    assert (
        "no_neighbour"
        in tb.OPEN_COLUMNS[
            tb.OPEN_COLUMNS.index(tb.Column("violations_repro_count", tb.REPRO_FIXED_CORRECTED, 1)) + 1
        ].key
    )
    # the old run: the switches are "not recorded", the share is n/a with its reason
    t = tb.method_table(_m(old), name="t", title="T", columns=cols, methods=("neutral",), published=())
    assert "tie_order=not recorded" in t.to_markdown()
    assert "snsr_empty_rows=drop" in t.to_markdown()  # added later: every earlier run dropped empty rows
    assert t.rows[0][-1].startswith("n/a") and "not recorded in metrics.json" in t.footnotes[0]
    # runs that differ in a switch get it as a row label, never mixed
    ours = _run(0.3)
    ours["variants"].update(protocol_variants(preset("facterlab")))
    t = tb.method_table(_m(new, ours), name="t", title="T", columns=cols, methods=("neutral",), published=())
    assert "Tie order" in t.header and {r[t.header.index("Tie order")] for r in t.rows} == {"file_order", "item_id"}


def test_figure1_shows_the_no_neighbour_share():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from facterlab.reporting.facter_figures import violations_by_pass

    run = _run(0.1)
    run["calibration"].update({"share_no_neighbour": 0.969, "test_share_no_neighbour": 0.95})
    fig = violations_by_pass(_m(run), "Fig. 1", profile="smoke", method="facter")
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert "no counterfactual neighbour: test 95.0%, calibration 96.9% of rows (Delta = 0: S = d)" in texts
    fig = violations_by_pass(_m(_run(0.1)), "Fig. 1", profile="smoke", method="facter")
    assert any("test n/a, calibration n/a" in t.get_text() for ax in fig.axes for t in ax.texts)


def test_ranker_of_a_recommender_with_its_own_scores_and_per_model_split_sizes():
    llm = _run(0.1)
    llm["variants"]["ranker"] = "likelihood"
    sim = _run(0.3, model="simulated")
    sim["variants"]["ranker"] = "generate"  # the config's default, unused by the simulator
    sim["n_calib"], sim["n_test"] = 1750, 750
    t = tb.method_table(_m(llm, sim), name="t", title="T", columns=COLS[:1], methods=("neutral",), published=())
    by_model = {r[t.header.index("Model")]: r[t.header.index("Ranker")] for r in t.rows}
    assert by_model == {"smollm2-135m": "likelihood", "simulated": "own scores"}
    setting = next(n for n in t.notes if n.startswith("Setting:"))
    assert "smollm2-135m 28/12" in setting and "simulated 1750/750" in setting
    one = tb.method_table(_m(llm), name="t", title="T", columns=COLS[:1], methods=("neutral",), published=())
    assert "calibration/test rows 28/12;" in next(n for n in one.notes if n.startswith("Setting:"))
