"""Notebook parameters: unknown names, strict types, PROFILE sizes, and `reproduce --set` (facterlab.params)."""

from __future__ import annotations

from pathlib import Path

import pytest

from facterlab import notebook
from facterlab.params import (
    ParameterError,
    coerce,
    declared_in_notebook,
    parse_parameters_cell,
    resolve,
    validate,
)
from facterlab.reporting import reproduce as rp

REPO = Path(__file__).resolve().parents[2]
NB06 = REPO / "notebooks" / "06_fig1_violations_by_pass.py"
NB11 = REPO / "notebooks" / "11_simpson_fig3_factors.py"


@pytest.fixture(scope="module")
def facter():
    return declared_in_notebook(NB06)


def test_typo_is_an_error_naming_the_close_match(facter):
    with pytest.raises(ParameterError, match=r"unknown parameter SMOKe \(did you mean SMOKE\b"):
        validate({"SMOKe": True}, facter)
    with pytest.raises(ParameterError, match=r"N_INTERACTONS \(did you mean N_INTERACTIONS"):
        validate({"N_INTERACTONS": 10}, facter)
    with pytest.raises(ParameterError, match=r"QWERTY \(no close match\)"):
        validate({"QWERTY": 1}, facter)


def test_wrong_type_names_the_parameter_and_the_type(facter):
    with pytest.raises(ParameterError, match=r"parameter N_INTERACTIONS: expected int, got 'abc'"):
        validate({"N_INTERACTIONS": "abc"}, facter)
    with pytest.raises(ParameterError, match=r"parameter PASSES: expected int, got 2.5"):
        validate({"PASSES": 2.5}, facter)
    with pytest.raises(ParameterError, match=r"parameter SMOKE: expected bool"):
        validate({"SMOKE": "maybe"}, facter)
    with pytest.raises(ParameterError, match=r"parameter MODEL: expected str, got 7"):
        validate({"MODEL": 7}, facter)
    with pytest.raises(ParameterError, match=r"parameter SEEDS: expected list of int"):
        validate({"SEEDS": "0"}, facter)  # papermill -p SEEDS 0 arrives as an int, text too
    with pytest.raises(ParameterError, match=r"parameter SEEDS\[1\]: expected int, got 'a'"):
        validate({"SEEDS": "[0, 'a']"}, facter)
    with pytest.raises(ParameterError, match=r"parameter PASSES: expected int \(None is not allowed here\)"):
        validate({"PASSES": None}, facter)
    # several problems in one message
    with pytest.raises(ParameterError, match=r"SMOKe.*PASSES"):
        validate({"SMOKe": 1, "PASSES": "x"}, facter)


def test_false_text_is_false_and_other_strict_coercions(facter):
    got = validate(
        {"SMOKE": "false", "SIMULATED": "yes", "N_INTERACTIONS": "10_000", "SIM_BETA": "2", "PASSES": 3.0}, facter
    )
    assert got == {"SMOKE": False, "SIMULATED": True, "N_INTERACTIONS": 10_000, "SIM_BETA": 2.0, "PASSES": 3}
    assert type(got["SIM_BETA"]) is float and got["SMOKE"] is False
    assert validate({"SMOKE": 0}, facter) == {"SMOKE": False}
    assert validate({"SMOKE": "True"}, facter) == {"SMOKE": True}


def test_lists_from_text_and_none(facter):
    assert validate({"SEEDS": "[0, 1, 2]"}, facter) == {"SEEDS": [0, 1, 2]}
    assert validate({"SEEDS": "0, 1"}, facter) == {"SEEDS": [0, 1]}  # a Python tuple's text
    assert validate({"SEEDS": (3,)}, facter) == {"SEEDS": [3]}
    # N_INTERACTIONS says "None: the REPRO size" in its comment, so None is allowed (also as text)
    assert validate({"N_INTERACTIONS": "None"}, facter) == {"N_INTERACTIONS": None}
    # None defaults with a known type: MODELS is a list of str (JSON or Python text)
    nb04 = declared_in_notebook(REPO / "notebooks" / "04_table2_backbones.py")
    assert validate({"MODELS": '["fake", "smollm2-135m"]'}, nb04) == {"MODELS": ["fake", "smollm2-135m"]}
    with pytest.raises(ParameterError, match=r"parameter MODELS: expected list of str"):
        validate({"MODELS": "fake"}, nb04)
    assert validate({"DATA_DIR": "/data/x"}, nb04) == {"DATA_DIR": "/data/x"}
    float_list = parse_parameters_cell("BETAS = [0.0, 2.0]")
    assert validate({"BETAS": "[0, 6]"}, float_list) == {"BETAS": [0.0, 6.0]}


def test_profile_smoke_sets_the_sizes_unless_passed(facter):
    r = resolve(facter, {"PROFILE": "smoke"}, notebook.FACTER_SMOKE)
    v = r.values
    assert v["SMOKE"] is True and v["DATASET"] == "synthetic"
    # each smoke size is a cap: a declared default below it stays (notebook 06 runs 14 rows, 1 CFR row)
    caps = (min(facter["N_INTERACTIONS"].default, 24), min(facter["CFR_ROWS"].default, 2), 2, 32)
    assert (v["N_INTERACTIONS"], v["CFR_ROWS"], v["PASSES"], v["MAX_NEW_TOKENS"]) == caps
    assert v["SEEDS"] == [0] and v["SIM_N_INTERACTIONS"] == 300 and v["SNSR_MIN_GROUP"] == 3
    assert r.from_profile == {"SMOKE": True, "DATASET": "synthetic"}
    # a size passed explicitly is kept, whatever the profile
    r = resolve(facter, {"PROFILE": "smoke", "N_INTERACTIONS": "30", "DATASET": "ml-100k"}, notebook.FACTER_SMOKE)
    assert r.values["N_INTERACTIONS"] == 30 and r.values["DATASET"] == "ml-100k" and r.values["PASSES"] == 2
    assert "N_INTERACTIONS" not in r.smoke_sizes and r.explicit["N_INTERACTIONS"] == 30
    # -p SMOKE True alone shrinks too; SMOKE false under PROFILE smoke keeps the declared sizes
    assert resolve(facter, {"SMOKE": "true"}, notebook.FACTER_SMOKE).values["MAX_NEW_TOKENS"] == 32
    r = resolve(facter, {"PROFILE": "smoke", "SMOKE": "false"}, notebook.FACTER_SMOKE)
    assert r.values["N_INTERACTIONS"] == facter["N_INTERACTIONS"].default and r.values["SMOKE"] is False
    # without a PROFILE or SMOKE, the defaults
    assert resolve(facter, {}, notebook.FACTER_SMOKE).values == {k: d.default for k, d in facter.items()}


def test_profile_sizes_of_a_simpson_notebook():
    declared = declared_in_notebook(NB11)
    smoke = {"N_USERS": 1_000, "N_SEEDS": 2, "N_POINTS": 4, "N_READING_USERS": 500}
    v = resolve(declared, {"PROFILE": "smoke"}, smoke).values
    assert (v["N_USERS"], v["N_SEEDS"], v["N_POINTS"], v["N_READING_USERS"]) == (1_000, 2, 4, 500)
    assert resolve(declared, {"PROFILE": "smoke", "N_USERS": 5_000}, smoke).values["N_USERS"] == 5_000
    assert resolve(declared, {"PROFILE": "default"}, smoke).values["N_USERS"] == declared["N_USERS"].default


def test_profile_paper_and_unknown_profile(facter):
    v = resolve(facter, {"PROFILE": "paper"}).values
    assert v["MODEL"] == "llama3-8b" and v["N_INTERACTIONS"] is None and v["SEEDS"] == [0, 1, 2]
    with pytest.raises(ParameterError, match=r"parameter PROFILE: expected one of default, paper, smoke, got 'fast'"):
        resolve(facter, {"PROFILE": "fast"})


def test_every_repo_notebook_accepts_every_profile():
    for nb in sorted((REPO / "notebooks").glob("*.ipynb")):
        declared = declared_in_notebook(nb)
        assert declared == declared_in_notebook(nb.with_suffix(".py")), nb.name
        assert set(declared) == rp.declared_parameters(nb), nb.name  # the names papermill sees
        for profile in rp.PROFILES:
            resolve(declared, rp.kernel_parameters(profile), where=nb.stem)


def _ns(params_src: str, injected: str | None = None, **values) -> dict:
    """A notebook namespace as IPython leaves it after the parameters (and papermill's) cell."""
    ns: dict = {}
    exec(params_src, ns)
    history = ["", params_src]
    if injected is not None:
        exec(injected, ns)
        history.append(injected)
    ns.update(values)
    ns["In"] = [*history, "P = notebook.parameters(globals())"]
    return ns


PARAMS = 'PROFILE = "default"  # default | paper | smoke\nSMOKE = False\nN_ROWS = 40  # None: all\nSEEDS = [0, 1]\n'


def test_notebook_helper_reads_papermills_injected_cell(capsys):
    ns = _ns(PARAMS, '# Parameters\nPROFILE = "smoke"\nSEEDS = "[5]"\n')
    P = notebook.parameters(ns, smoke={"N_ROWS": 10, "SEEDS": lambda s: s[:1]})
    assert ns["SMOKE"] is True and ns["N_ROWS"] == 10 and ns["SEEDS"] == [5] and P["SEEDS"] == [5]
    assert P.resolved.explicit == {"PROFILE": "smoke", "SEEDS": [5]}
    assert "profile smoke" in capsys.readouterr().out
    with pytest.raises(ParameterError, match=r"unknown parameter SMOKe \(did you mean SMOKE\?\)"):
        notebook.parameters(_ns(PARAMS, "# Parameters\nSMOKe = 1\n"), quiet=True)
    with pytest.raises(ParameterError, match=r"parameter SMOKE: expected bool"):
        notebook.parameters(_ns(PARAMS, '# Parameters\nSMOKE = "maybe"\n'), quiet=True)
    # JupyterLab: no injected cell; a value edited in (or after) the parameters cell counts as passed
    ns = _ns(PARAMS, N_ROWS=33, SMOKE=True)
    notebook.parameters(ns, smoke={"N_ROWS": 10, "SEEDS": lambda s: s[:1]}, quiet=True)
    assert ns["N_ROWS"] == 33 and ns["SEEDS"] == [0]
    with pytest.raises(ParameterError, match="run the notebook's parameters cell"):
        notebook.parameters({"In": ["", "x = 1", "here"]}, quiet=True)


def test_notebook_helper_config_needs_declared_names():
    P = notebook.parameters(_ns(PARAMS), quiet=True)
    with pytest.raises(ParameterError, match=r"sim_config\(\) needs the parameter\(s\) DATASET"):
        P.sim_config(0)


def test_reproduce_set_typo_is_an_error_before_anything_runs(capsys, tmp_path, monkeypatch):
    papermill = pytest.importorskip("papermill")
    from facterlab.cli import main

    def must_not_run(*a, **k):
        raise AssertionError("a notebook ran despite a bad --set")

    monkeypatch.setattr(papermill, "execute_notebook", must_not_run)
    monkeypatch.chdir(REPO / "notebooks")  # the runner finds the project root (and its notebooks/) from here

    args = ["reproduce", "--profile", "smoke", "--only", "06*", "--out", str(tmp_path / "nb")]
    assert main([*args, "--set", "N_INTERACTONS=10"]) == 2
    err = capsys.readouterr().err
    assert "unknown parameter N_INTERACTONS (did you mean N_INTERACTIONS or SIM_N_INTERACTIONS?)" in err
    assert main([*args, "--set", "SEEDS=abc"]) == 2
    assert "parameter SEEDS: expected list of int" in capsys.readouterr().err
    # a name that only another notebook declares is unknown for this selection
    assert main([*args, "--set", "DATASETS=['ml-1m']"]) == 2
    assert "unknown parameter DATASETS" in capsys.readouterr().err
    assert not list((tmp_path / "nb").glob("*.ipynb"))  # nothing ran


def test_check_extra_coerces_per_notebook():
    declared_by = {
        "a": parse_parameters_cell("N = 1\nSEEDS = [0]"),
        "b": parse_parameters_cell("N = 1.5"),
    }
    assert rp.check_extra({"N": "2"}, declared_by) == {"a": {"N": 2}, "b": {"N": 2.0}}
    with pytest.raises(ParameterError, match=r"a: parameter N: expected int, got '2.5'"):
        rp.check_extra({"N": "2.5"}, declared_by)


def test_coerce_rejects_bool_for_numbers():
    with pytest.raises(ParameterError, match="parameter N: expected int, got True"):
        coerce("N", True, 1)
    with pytest.raises(ParameterError, match="parameter X: expected a finite float, got 'nan'"):
        coerce("X", "nan", 1.0)


@pytest.mark.slow
def test_papermill_run_of_a_notebook_with_the_helper(tmp_path):
    """In a real kernel: -p SMOKE "false" arrives as text and becomes False; PROFILE smoke sets the
    sizes; a misspelled -p name fails the notebook with the close match."""
    papermill = pytest.importorskip("papermill")
    from nbgen import code, params, write_notebook

    nb = tmp_path / "01_p.ipynb"
    write_notebook(
        nb,
        [
            params(PARAMS),
            code(
                "from facterlab import notebook\n"
                "P = notebook.parameters(globals(), smoke={'N_ROWS': 10})\n"
                "import json, pathlib\n"
                "pathlib.Path('out.json').write_text(json.dumps([PROFILE, SMOKE, N_ROWS, SEEDS]))"
            ),
        ],
    )
    out = tmp_path / "out.json"
    kw = dict(kernel_name="python3", cwd=str(tmp_path), progress_bar=False)
    papermill.execute_notebook(str(nb), str(tmp_path / "o1.ipynb"), parameters={"SMOKE": "false"}, **kw)
    assert out.read_text() == '["default", false, 40, [0, 1]]'
    papermill.execute_notebook(str(nb), str(tmp_path / "o2.ipynb"), parameters={"PROFILE": "smoke"}, **kw)
    assert out.read_text() == '["smoke", true, 10, [0, 1]]'
    with pytest.raises(papermill.PapermillExecutionError, match=r"did you mean SMOKE"):
        papermill.execute_notebook(str(nb), str(tmp_path / "o3.ipynb"), parameters={"SMOKe": True}, **kw)


def test_a_notebook_without_a_parameters_cell_takes_none_only_when_allowed(tmp_path):
    import nbformat

    from facterlab.params import ParameterError, declared_in_notebook

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1")]
    path = tmp_path / "plain.ipynb"
    nbformat.write(nb, str(path))
    assert declared_in_notebook(path, missing_ok=True) == {}
    with pytest.raises(ParameterError, match="no cell tagged 'parameters'"):
        declared_in_notebook(path)
    bad = nbformat.v4.new_notebook()
    bad.cells = [nbformat.v4.new_code_cell("N = (", metadata={"tags": ["parameters"]})]
    nbformat.write(bad, str(tmp_path / "bad.ipynb"))
    with pytest.raises(ParameterError):  # a malformed parameters cell is an error even with missing_ok
        declared_in_notebook(tmp_path / "bad.ipynb", missing_ok=True)
