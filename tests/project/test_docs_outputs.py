"""Documented output is tested output (issue 42): every output region of README.md and docs/*.md matches
what ``docs/outputs.py`` (``make docs-outputs``) would write from a fresh run of its command.

- the unit tier checks what needs no command run (the measured facts copied from ``docs/measured.toml``,
  the served audit's promise: its config hash from the CLI's own parser, every region's command shown on
  its page) and the comparison itself on copies of the pages (a changed number is drift, a changed
  measured time is not);
- ``integration``: the quick start, the sweep table and the papermill error rerun for real
  (``docs/outputs.py --check``; about 50 s at low load, several minutes on a loaded 2-core machine).
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_generator():
    spec = importlib.util.spec_from_file_location("docs_outputs", ROOT / "docs" / "outputs.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["docs_outputs"] = mod
    spec.loader.exec_module(mod)
    return mod


gen = load_generator()


def committed_output(page: Path, sid: str) -> str:
    for m in gen.regions(page.read_text(encoding="utf-8")):
        if m["id"] == sid and m["part"] == "block":
            return gen.block_output(m["body"])
    raise AssertionError(f"no {sid} block in {page}")


def test_every_spec_has_a_block_on_a_page():
    found = {m["id"] for p in gen.PAGES for m in gen.regions(p.read_text(encoding="utf-8"))}
    assert set(gen.SPECS) <= found, sorted(set(gen.SPECS) - found)
    assert {"fact:install-time", "fact:reproduce-time"} <= found


def test_offline_check_passes(capsys):
    """Facts, the served audit's config hash and the commands shown: no command run."""
    assert gen.main(["--check", "--offline"]) == 0, capsys.readouterr().out


@pytest.fixture
def pages_copy(tmp_path, monkeypatch):
    """README.md and docs/*.md copied, the generator pointed at the copies."""
    (tmp_path / "docs").mkdir()
    copies = []
    for p in gen.PAGES:
        dst = tmp_path / p.relative_to(ROOT)
        shutil.copy(p, dst)
        copies.append(dst)
    monkeypatch.setattr(gen, "PAGES", tuple(copies))
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    monkeypatch.setattr(gen, "MEASURED", ROOT / "docs" / "measured.toml")
    return tmp_path


def fake_runs(monkeypatch, outputs: dict):
    """run_spec replaced by the given outputs (the comparison is under test, not the commands)."""

    def run_spec(spec, served_url=None, timeout=0):
        return gen.Result(outputs[spec.id], 1.0, 1.0, "2026-01-01 00:00 UTC", "0.00", "abc1234")

    monkeypatch.setattr(gen, "run_spec", run_spec)


def test_check_sees_a_changed_number_and_ignores_a_measured_time(pages_copy, monkeypatch, capsys):
    readme = pages_copy / "README.md"
    outputs = {  # every block as committed (each spec's page): a check of the committed pages finds no drift
        m["id"]: gen.block_output(m["body"])
        for p in gen.PAGES
        for m in gen.regions(p.read_text(encoding="utf-8"))
        if m["part"] == "block" and m["id"] in gen.SPECS and gen.SPECS[m["id"]].offline
    }
    assert {"quickstart", "sweep", "parameter-error"} <= set(outputs)
    fake_runs(monkeypatch, outputs)
    assert gen.main(["--check"]) == 0, capsys.readouterr().out

    # a measured field (the sweep's seconds column and total) differs: not drift
    timed = re.sub(r"(ran +1 +)\d+\.\d", r"\g<1>99.9", outputs["sweep"])
    timed = re.sub(r"workers\), \d+ s\)", "workers), 999 s)", timed)
    assert timed != outputs["sweep"]
    fake_runs(monkeypatch, {**outputs, "sweep": timed})
    assert gen.main(["--check"]) == 0, capsys.readouterr().out

    # a number of the table differs: drift, in the block and in the prose that reads it
    drifted = outputs["quickstart"].replace("[78, 80, 72]", "[77, 91, 91]")
    assert drifted != outputs["quickstart"]
    fake_runs(monkeypatch, {**outputs, "quickstart": drifted})
    assert gen.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert "README.md: quickstart block differs" in out and "README.md: quickstart prose differs" in out
    assert "+facter" in out and "[77, 91, 91]" in out

    # the generator then writes the new numbers and a prose that no longer says they stay level
    assert gen.main([]) == 0
    text = readme.read_text(encoding="utf-8")
    assert "[77, 91, 91]" in text and "rise from the first pass (77, 91, 91)" in text
    assert "(measured 2026-01-01 00:00 UTC, load average 0.00, git abc1234: 1.0 s wall, 1.0 s CPU)" in text
    assert gen.main(["--check"]) == 0


def test_a_page_that_hides_its_command_is_refused(pages_copy, capsys):
    readme = pages_copy / "README.md"
    text = readme.read_text(encoding="utf-8")
    readme.write_text(text.replace("--sim-beta 2 --sim-rho 1\n```", "--sim-beta 3 --sim-rho 1\n```"), encoding="utf-8")
    assert gen.main(["--check", "--offline"]) == 2
    assert "does not show its command" in capsys.readouterr().err


def test_served_block_promises_its_config_hash(pages_copy, capsys):
    usage = pages_copy / "docs" / "USAGE.md"
    text = usage.read_text(encoding="utf-8")
    usage.write_text(text.replace("run 5d8069361b2f-", "run 5d8069361b2e-", 1), encoding="utf-8")
    assert gen.main(["--check", "--offline"]) == 1
    assert "served-audit block differs" in capsys.readouterr().out


def test_a_fact_is_copied_from_measured_toml(pages_copy, capsys):
    readme = pages_copy / "README.md"
    readme.write_text(readme.read_text(encoding="utf-8").replace("took 918 s", "took 622 s"), encoding="utf-8")
    assert gen.main(["--check", "--offline"]) == 1
    assert "fact:reproduce-time fact differs" in capsys.readouterr().out


def test_trend_words():
    assert gen.trend([29, 13, 7]) == "fall pass by pass"
    assert gen.trend([78, 80, 72]).startswith("stay within")
    assert gen.trend([77, 91, 91]) == "rise from the first pass"


@pytest.mark.integration
@pytest.mark.parametrize("sid", ["quickstart", "sweep", "parameter-error"])
def test_documented_output_matches_a_fresh_run(sid, capsys):
    """The command reruns in a scratch folder; its block and prose must match the pages (timings masked)."""
    rc = gen.main(["--check", "--only", sid])
    assert rc == 0, capsys.readouterr().out


def test_a_masked_column_ignores_its_padding():
    """A table pads the seconds column to its widest value; two runs that differ only in a measured time
    compare equal, and a changed number beside it still shows."""
    spec = gen.SPECS["sweep"]
    a = "7248dc13a5aa-d3bf5704  0           0     ran     1         15.5     0.0000\n"
    b = "7248dc13a5aa-d3bf5704  0           0     ran     1         6.1      0.0000\n"
    c = "7248dc13a5aa-d3bf5704  0           0     ran     1         6.1      0.0077\n"
    assert gen.masked(spec, a) == gen.masked(spec, b) != gen.masked(spec, c)


def test_a_sweeps_total_time_is_masked_in_every_unit():
    """The sweep's last line gives its wall time as the progress lines do (``28 s``, ``1 min 21 s``,
    ``2 h 01 min``): under load the same sweep took 1 min 21 s against the block's 28 s (2026-12-07), and
    only the time may differ; a changed count beside it still shows."""
    spec = gen.SPECS["sweep"]
    line = "4 runs: 4 started, 0 finished before, 0 failed (process (2 workers), {})"
    shown = {gen.masked(spec, line.format(t)) for t in ("28 s", "1 min 21 s", "2 h 01 min", "3 min 05 s")}
    assert len(shown) == 1 and "<measured>" in shown.pop()
    assert gen.masked(spec, line.replace("0 failed", "1 failed").format("28 s")) != gen.masked(
        spec, line.format("28 s")
    )
