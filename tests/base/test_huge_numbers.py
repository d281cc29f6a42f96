"""Issue 44, case 7: an integer too large for a float is out of its bound, named by its size, never an
OverflowError."""

from __future__ import annotations

from fractions import Fraction

import pytest

from facterlab.config_bounds import Bound, short_repr
from facterlab.params import bound_problem

BIG = int("9" * 401)


def test_a_huge_integer_or_fraction_is_out_of_range_not_an_overflow():
    assert not Bound(0, 2**32 - 1, integer=True).contains(BIG)
    assert not Bound(0.0, 1.0).contains(-BIG)
    assert not Bound(0.0, 1.0).contains(Fraction(BIG, 3))
    assert Bound(0, 2**70, integer=True).contains(2**69)  # exact, no float rounding


def test_a_huge_notebook_parameter_is_one_short_line():
    line = bound_problem("SEEDS", [1, BIG])
    assert line is not None and "<an integer of 401 digits>" in line and "999" not in line
    assert short_repr(10**5000).startswith("<an integer of")  # beyond Python's int-to-text limit too


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--model", "fake", "--encoder", "hash-encoder", "--dataset", "synthetic", "--seed", str(BIG)],
        ["sweep", "--set", "model__llm=fake", "--set", f"seed={BIG}", "--dry-run"],
        ["sweep", "--set", "model__llm=fake", "--grid", f"seed=1,{BIG}", "--dry-run"],
    ],
)
def test_a_huge_seed_is_refused_before_work_with_its_size(tmp_path, monkeypatch, capsys, args):
    from facterlab.cli import main

    monkeypatch.setenv("FACTERLAB_RESULTS", str(tmp_path / "results"))
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "OverflowError" not in err and "9" * 50 not in err
    assert "seed = <an integer of 401 digits>: must be an integer in [0, 4294967295]" in err
    assert not (tmp_path / "results" / "runs").exists()
