"""The README's fenced ``bash`` examples run as written in a fresh clone (after ``make install``).

Every command line of every ```` ```bash ```` block of README.md and of the pages it sends readers to for
the details (docs/USAGE.md, docs/getting-started.md; :data:`PAGES`) is

1. **parsed at full size**: ``facterlab ...`` lines with the CLI's own argument parser
   (:func:`facterlab.cli.build_parser`), ``papermill`` lines by checking the notebook exists and declares
   every ``-p`` parameter in its tagged parameters cell, ``make`` lines with ``make -n`` (the target
   exists); a README command that no longer parses fails here;
2. **run in a cheap form** in a temporary working directory that looks like a fresh clone (``.venv`` and
   ``notebooks/`` linked, nothing else: no ``build/``, ``results/`` or ``figures/``), with
   ``FACTERLAB_RESULTS``, ``FACTERLAB_FIGURES`` and ``FACTERLAB_CACHE`` in the temporary folder and
   ``FACTERLAB_DATA`` a temporary folder too (``examples/`` linked, so ``facterlab data import`` writes
   there), with the datasets of the caller's ``FACTERLAB_DATA`` linked in when set (CI's ML-100K), else
   empty (dataset ``auto`` -> synthetic).
   The cheap form comes from this documented mapping and nothing else:

   - ``facterlab run`` with an LLM (no ``--model simulated``): ``--model simulated --encoder
     hash-encoder`` is appended (the simulated recommender with known bias stands in for SmolLM2; every
     other argument, sizes included, is kept); ``--n-rows`` above 2,500 is cut to 2,500;
   - ``facterlab reproduce --profile P [--only X]``: ``--profile smoke --only X`` (``--only 10_`` when
     the README runs every notebook), with ``--set MODEL=fake --set SIMULATED=False`` where the selected
     notebooks declare them; ``papermill``: ``-p SMOKE True -p MODEL fake -p SIMULATED False``
     appended (tiny sizes, the deterministic test model);
   - ``make <target>``: only the ``make -n`` check of step 1 (running ``make test`` inside the test suite
     would recurse; ``make reproduce`` is the notebooks, which ``tests/notebooks/test_notebooks_smoke.py`` runs).
3. **run verbatim** (``slow``, and only with ``FACTERLAB_README_VERBATIM=1``): every ``facterlab`` and
   ``papermill`` line exactly as printed. The SmolLM2 lines take minutes each on 2 cores (about 25 minutes
   for the whole README), more than ``make test`` may spend, so CI runs steps 1 and 2 and a developer runs
   this step before changing the README's commands or timings::

       FACTERLAB_README_VERBATIM=1 .venv/bin/python -m pytest tests/project/test_readme_examples.py -k verbatim
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
#: README.md and the pages whose commands it moved there (issue 32): every ```bash block of each is checked
PAGES = (README, ROOT / "docs" / "USAGE.md", ROOT / "docs" / "getting-started.md")
VENV_BIN = ROOT / ".venv" / "bin"
MAX_ROWS = 2500


def bash_blocks(text: str) -> list:
    """The contents of the ```` ```bash ```` fences of a Markdown text."""
    return re.findall(r"^```bash\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)


def command_lines(block: str) -> list:
    """Command lines of a bash block: continuations joined, comments and blank lines dropped.

    >>> command_lines("a --x 1 \\\\\\n    --y 2   # note\\n\\n# only a comment\\nb")
    ['a --x 1 --y 2', 'b']
    """
    joined = re.sub(r"\s*\\\n\s*", " ", block)
    out = []
    for line in joined.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        if line:
            out.append(line)
    return out


def readme_commands() -> list:
    """The command lines of every page of :data:`PAGES`, each once, in page order."""
    out: list = []
    for page in PAGES:
        for block in bash_blocks(page.read_text(encoding="utf-8")):
            out += [c for c in command_lines(block) if c not in out]
    return out


def simple_commands(line: str) -> list:
    """The argv lists of a command line's ``&&``-joined parts, without leading ``NAME=value`` settings.

    >>> simple_commands("FACTERLAB_DATA=/d .venv/bin/jupyter lab && make test")
    [['.venv/bin/jupyter', 'lab'], ['make', 'test']]
    """
    out = []
    for part in line.split("&&"):
        argv = shlex.split(part)
        while argv and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", argv[0]):
            argv = argv[1:]
        out.append(argv)
    return out


def program(argv: list) -> str:
    return Path(argv[0]).name


COMMANDS = readme_commands()


def test_readme_has_the_examples():
    progs = {program(a) for line in COMMANDS for a in simple_commands(line)}
    assert {"make", "facterlab", "papermill"} <= progs, progs
    for line in COMMANDS:
        for argv in simple_commands(line):
            if program(argv) in ("facterlab", "papermill", "jupyter", "jupytext"):
                assert argv[0].startswith(".venv/bin/"), f"{line!r}: not runnable as written after make install"


def test_inline_commands_run_as_printed():
    """Commands quoted in the README's prose (`facterlab runs list`) run as printed from the repository
    root after the install: `.venv/bin/facterlab ...`, not a bare `facterlab` that the shell does not
    know (issue 25).  A two-word name such as `facterlab reproduce` refers to the command and may stay."""
    spans = [s for page in PAGES for s in re.findall(r"`([^`\n]+)`", page.read_text(encoding="utf-8"))]
    bare = [s for s in spans if re.match(r"(facterlab|papermill|jupyter|jupytext)\s", s) and len(s.split()) >= 3]
    assert not bare, f"inline commands that do not run as printed (write .venv/bin/...): {bare}"


# --- step 1: every line parses at full size -----------------------------------------------------------


def check_parses(argv: list) -> None:
    name = program(argv)
    if name == "facterlab":
        from facterlab.cli import build_parser

        try:
            args = build_parser().parse_args(argv[1:])
        except SystemExit as exc:  # argparse's way of refusing
            pytest.fail(f"README command does not parse: {shlex.join(argv)} (exit {exc.code})")
        assert getattr(args, "func", None), f"no sub-command in {shlex.join(argv)}"
    elif name == "papermill":
        from facterlab.reporting.reproduce import declared_parameters

        nb = ROOT / argv[1]
        assert nb.is_file(), f"{argv[1]} does not exist"
        params = [argv[i + 1] for i, a in enumerate(argv) if a == "-p"]
        missing = set(params) - set(declared_parameters(nb))
        assert not missing, f"{argv[1]} does not declare {sorted(missing)}"
    elif name == "make":
        r = subprocess.run(["make", "-n", *argv[1:]], cwd=ROOT, capture_output=True, text=True)
        assert r.returncode == 0, f"make -n {' '.join(argv[1:])}: {r.stderr}"
    elif name == "mkdir":
        assert argv[1:2] == ["-p"], argv
    elif name in ("jupyter", "jupytext"):
        exe = ROOT / argv[0] if name == "jupytext" else ROOT / f"{argv[0]}-{argv[1]}"  # jupyter lab -> jupyter-lab
        assert exe.exists(), f"{exe} is not installed by make install ({shlex.join(argv)})"
    else:
        pytest.fail(f"unknown program in a README example: {shlex.join(argv)}")


@pytest.mark.parametrize("line", COMMANDS)
def test_readme_command_parses(line):
    for argv in simple_commands(line):
        check_parses(argv)


def test_a_broken_command_is_caught():
    """The parse check is not a formality: a misspelt option or parameter fails."""
    with pytest.raises(pytest.fail.Exception):
        check_parses([".venv/bin/facterlab", "run", "--n-rowz", "20"])
    with pytest.raises(AssertionError):
        check_parses([".venv/bin/papermill", "notebooks/03_table1_open_generation.ipynb", "o.ipynb", "-p", "NOPE", "1"])


# --- steps 2 and 3: run them ---------------------------------------------------------------------------


NOT_RUN = ("make", "jupyter", "jupytext")  # make: see above; jupyter lab is a server (the browser tests)


def cheap_form(argv: list) -> list | None:
    """The documented cheap form of one simple command (None: not run, only parsed)."""
    name = program(argv)
    if name in NOT_RUN:
        return None
    if name == "papermill":
        return [*argv, "-p", "SMOKE", "True", "-p", "MODEL", "fake", "-p", "SIMULATED", "False"]
    if name == "facterlab" and len(argv) > 1 and argv[1] == "run":
        out = list(argv)
        if "--n-rows" in out:
            i = out.index("--n-rows") + 1
            out[i] = str(min(int(out[i]), MAX_ROWS))
        if "--model" not in out or out[out.index("--model") + 1] != "simulated":
            out += ["--model", "simulated", "--encoder", "hash-encoder"]
        return out
    if name == "facterlab" and len(argv) > 1 and argv[1] == "reproduce":
        from facterlab.reporting.reproduce import declared_parameters, discover_notebooks

        only = argv[argv.index("--only") + 1] if "--only" in argv else "10_"
        out = [argv[0], "reproduce", "--profile", "smoke", "--only", only]
        declared = [declared_parameters(nb) for nb in discover_notebooks(ROOT / "notebooks", only)]
        for key, value in (("MODEL", "fake"), ("SIMULATED", "False")):
            if declared and all(key in d for d in declared):
                out += ["--set", f"{key}={value}"]
        return out
    return list(argv)


@pytest.fixture
def fresh_clone(tmp_path):
    """A working directory like a fresh clone after `make install`, and its environment."""
    if not (VENV_BIN / "facterlab").exists():
        pytest.skip(".venv/bin/facterlab missing: run `make install` first")
    work = tmp_path / "clone"
    work.mkdir()
    (work / ".venv").symlink_to(ROOT / ".venv")
    (work / "notebooks").symlink_to(ROOT / "notebooks")
    (work / "examples").symlink_to(ROOT / "examples")
    env = dict(os.environ)
    for key, sub in (("FACTERLAB_RESULTS", "results"), ("FACTERLAB_FIGURES", "figures"), ("FACTERLAB_CACHE", "cache")):
        env[key] = str(tmp_path / sub)
    # a data folder of its own (a `facterlab data import` writes there), with CI's real datasets linked in
    data = tmp_path / "data"
    data.mkdir()
    if env.get("FACTERLAB_DATA") and Path(env["FACTERLAB_DATA"]).is_dir():
        for d in Path(env["FACTERLAB_DATA"]).iterdir():
            if d.name != "imported":
                (data / d.name).symlink_to(d)
    env["FACTERLAB_DATA"] = str(data)
    env["PYTHONHASHSEED"] = "0"
    env["FACTERLAB_THREADS"] = env.get("FACTERLAB_THREADS", "auto")
    return work, env


def run_line(parts: list, work: Path, env: dict, timeout: int) -> None:
    for argv in parts:
        r = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
        assert r.returncode == 0, f"{shlex.join(argv)} failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"


RUNNABLE = [line for line in COMMANDS if any(program(a) not in NOT_RUN for a in simple_commands(line))]


@pytest.mark.parametrize("line", RUNNABLE)
def test_readme_command_runs_in_cheap_form(line, fresh_clone):
    work, env = fresh_clone
    parts = [c for c in (cheap_form(a) for a in simple_commands(line)) if c is not None]
    run_line(parts, work, env, timeout=900)
    if "papermill" in line:
        out = next(a[2] for a in simple_commands(line) if program(a) == "papermill")
        assert (work / out).is_file(), f"papermill wrote no {out}"


@pytest.mark.slow
@pytest.mark.parametrize("line", RUNNABLE)
def test_readme_command_runs_verbatim(line, fresh_clone):
    if os.environ.get("FACTERLAB_README_VERBATIM") != "1":
        pytest.skip("verbatim README runs take minutes each: set FACTERLAB_README_VERBATIM=1")
    work, env = fresh_clone
    run_line(simple_commands(line), work, env, timeout=3600)


def test_cheap_form_mapping():
    llm = [".venv/bin/facterlab", "run", "--dataset", "auto", "--n-rows", "5000", "--passes", "1"]
    assert cheap_form(llm) == [*llm[:5], "2500", "--passes", "1", "--model", "simulated", "--encoder", "hash-encoder"]
    sim = [".venv/bin/facterlab", "run", "--model", "simulated", "--n-rows", "100"]
    assert cheap_form(sim) == sim
    rep = [".venv/bin/facterlab", "reproduce", "--profile", "default", "--only", "05"]
    assert cheap_form(rep)[1:] == ["reproduce", "--profile", "smoke", "--only", "05", "--set", "MODEL=fake"] + [
        "--set",
        "SIMULATED=False",
    ]
    assert cheap_form(["make", "test"]) is None


def python_blocks(text: str) -> list:
    """The contents of the ```` ```python ```` fences of a Markdown text."""
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)


@pytest.mark.slow
def test_readme_python_snippet_runs_as_printed_with_no_data(fresh_clone, tmp_path):
    """Issue 45: the README's Python snippet, as printed, in a fresh clone without data: dataset auto falls
    back to the synthetic data and says so, the stage lines of the command line show, the table prints."""
    work, env = fresh_clone
    (tmp_path / "no-data").mkdir()
    env["FACTERLAB_DATA"] = str(tmp_path / "no-data")  # a fresh clone has none, whatever CI's environment holds
    blocks = python_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) == 1, f"README.md has {len(blocks)} python blocks; this test runs the one snippet"
    r = subprocess.run(
        [str(VENV_BIN / "python"), "-c", blocks[0]], cwd=work, env=env, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, f"{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    for line in ("dataset auto found no MovieLens", "SYNTHETIC stand-in", "calibration: Q0 = ", "passes: FACTER"):
        assert line in r.stderr, f"no {line!r} among the stage lines:\n{r.stderr[-3000:]}"
    table = r.stdout.splitlines()
    assert any(ln.startswith("facter ") for ln in table) and "cfr_multi" in r.stdout, r.stdout
