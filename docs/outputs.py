"""Documented output is generated output: rerun every marked command of README.md and docs/*.md.

``python docs/outputs.py`` (``make docs-outputs``) finds every region marked in README.md and
docs/*.md, reruns the command it belongs to in a scratch folder that looks like a fresh clone with no
data (no ``FACTERLAB_*`` variable of the caller's environment is passed on, ``PYTHONHASHSEED=0``), and
rewrites the region. ``--check`` rewrites nothing: it prints a diff and exits 1 when a committed region
differs from what the generator would write (``tests/project/test_docs_outputs.py`` runs it).

A region is an HTML comment naming an output id and a part, the text, and an end comment::

    <!-- output: quickstart block -->
    ```text
    ... what the command printed ...
    ```
    <!-- /output -->

Parts:

``block``
    the command's output as a ``text`` fence. Compared exactly, except for the spec's ``masks``
    (timing fields: the ``seconds`` column of a sweep, ``done in 11 s``): those are the values measured
    by the last generator run, kept in the block and exempt from comparison.
``prose``
    sentences that quote or conclude from the output: written by the spec's ``prose`` function from
    the parsed output, so a conclusion changes when the numbers stop supporting it. Compared exactly.
``measured``
    the wall and CPU time of the generator's run, with its date (UTC), load average and commit.
    Exempt from comparison; rewritten by every generator run.
``fact``
    a measured figure kept in ``docs/measured.toml`` (one place: the install time, the ``make
    reproduce`` time), with its date, load and commit. Compared exactly with the file (so a figure is
    changed in one place and the generator copies it everywhere).

Every spec's command must appear verbatim in a ``bash`` fence of the page that holds its ``block``
region, so the page can never show the output of another command than the one it prints.

The served audit (``served-audit``) runs against a ``transformers serve`` the reader starts; a server
that batches concurrent requests does not answer bit for bit alike, so that block promises only what
the command decides without the server: the run id's first half (the config hash), the dataset, the
protocol, the sizes and the table's methods and columns. ``--check`` compares that much offline (the
config hash from the command line through the CLI's own parser); ``--served-url URL`` also reruns it
against a live server and writes the block (its numbers and the run id's second half are then that
run's, exempt from comparison).

Usage::

    .venv/bin/python docs/outputs.py                 # rerun every fast spec and rewrite the pages
    .venv/bin/python docs/outputs.py --check         # compare only; exit 1 and a diff on drift
    .venv/bin/python docs/outputs.py --only sweep    # one spec (a comma-separated list)
    .venv/bin/python docs/outputs.py --list          # the specs, their pages and what they cost
    .venv/bin/python docs/outputs.py --check --offline   # no command run: facts, served promise, commands shown
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import difflib
import os
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
MEASURED = ROOT / "docs" / "measured.toml"
REGION = re.compile(
    r"^<!-- output: (?P<id>[a-z0-9:_-]+) (?P<part>block|prose|measured|fact) -->\n(?P<body>.*?)^<!-- /output -->$",
    re.DOTALL | re.MULTILINE,
)
MASK = "<measured>"


class SpecError(Exception):
    """A page or spec that the generator cannot honour (one line, no traceback)."""


@dataclasses.dataclass(frozen=True)
class Spec:
    """One documented command and what its regions may promise."""

    id: str
    command: str  #: exactly as the page prints it (``.venv/bin/facterlab ...`` from the repository root)
    masks: tuple = ()  #: regexes whose group 1 is a measured field, exempt from comparison
    prose: Callable[[str], str] | None = None
    stderr: bool = False  #: the block shows stdout and stderr together (an error message)
    cost: str = "seconds"
    offline: bool = True  #: False: needs a server the reader starts (only checked offline, see above)
    before: tuple = ()  #: commands the page shows before this one, run first in the same scratch folder


# --- parsing a headline table ----------------------------------------------------------------------


def table_rows(output: str) -> dict:
    """``{method: {column: text}}`` from ``facterlab run``'s headline table (list cells joined).

    >>> t = "method  cfr_multi  viol_fixed\\nneutral  0.6265  [78]\\nfacter  0.4456  [78, 80, 72]\\n"
    >>> table_rows(t)["facter"]["viol_fixed"]
    '[78, 80, 72]'
    """
    lines = [ln for ln in output.splitlines() if ln.strip()]
    head_i = next(i for i, ln in enumerate(lines) if ln.startswith("method "))
    cols = lines[head_i].split()
    out = {}
    for ln in lines[head_i + 1 :]:
        cells = re.findall(r"\[[^\]]*\]|\S+", ln)
        if len(cells) != len(cols):
            break
        out[cells[0]] = dict(zip(cols[1:], cells[1:]))
    return out


def ints(cell: str) -> list:
    return [int(x) for x in re.findall(r"-?\d+", cell)]


def trend(seq: list) -> str:
    """How a count moves pass by pass, in words, from the numbers alone.

    >>> trend([29, 13, 7]), trend([78, 80, 72]), trend([77, 91, 91]), trend([5, 9, 12])
    ('fall pass by pass', 'stay within 10% of the first pass', 'rise from the first pass', 'rise pass by pass')
    """
    if len(seq) < 2:
        return "have one pass"
    if all(b < a for a, b in zip(seq, seq[1:])):
        return "fall pass by pass"
    if all(b > a for a, b in zip(seq, seq[1:])):
        return "rise pass by pass"
    spread = max(abs(x - seq[0]) for x in seq) / max(seq[0], 1)
    if spread <= 0.15:
        return f"stay within {max(round(spread * 100), 1)}% of the first pass"
    return "rise from the first pass" if seq[-1] > seq[0] else "fall from the first pass"


def quickstart_prose(output: str) -> str:
    """The README's reading of the quick start's table, from the numbers it shows."""
    t = table_rows(output)
    cfr = {m: float(t[m]["cfr_multi"]) for m in ("neutral", "fair", "facter")}
    fixed, adaptive = ints(t["facter"]["viol_fixed"]), ints(t["facter"]["viol_adaptive"])

    def verb(a: float, b: float) -> str:
        return "lowers" if b < a else "raises" if b > a else "leaves"

    fair = f"The Fair prompt {verb(cfr['neutral'], cfr['fair'])} the counterfactual unfairness (CFR {cfr['neutral']:.2f} -> {cfr['fair']:.2f})"
    if cfr["facter"] < cfr["fair"]:
        rep = f"FACTER's repair lowers it further ({cfr['facter']:.2f})"
    elif cfr["facter"] > cfr["fair"]:
        rep = f"FACTER's repair ends above the Fair prompt ({cfr['facter']:.2f})"
    else:
        rep = f"FACTER's repair ends level with it ({cfr['facter']:.2f})"
    fixed_words = trend(fixed)
    moved = "while" if trend(adaptive) != fixed_words else "and"
    return (
        f"{fair}; {rep}. Its adaptive violations {trend(adaptive)} ({', '.join(map(str, adaptive))}), "
        f"{moved} those against the fixed Q0 {fixed_words} ({', '.join(map(str, fixed))})."
    )


# --- the specs --------------------------------------------------------------------------------------

SPECS = {
    s.id: s
    for s in (
        Spec(
            "quickstart",
            ".venv/bin/facterlab run --dataset auto --model simulated --encoder hash-encoder --n-rows 2500 --sim-beta 2 --sim-rho 1",
            prose=quickstart_prose,
            cost="about 10 s at low load",
        ),
        Spec(
            "sweep",
            ".venv/bin/facterlab sweep --grid seed=0,1,2,3 --set model__llm=fake --set data__dataset=synthetic "
            "--set data__n_rows=60 --set facter__passes=1 --workers 2",
            masks=(
                r"^\S+-\S+ +\d+ +\d+ +\w+ +\d+ +(\d+\.\d)",
                r"\(process \(2 workers\), ((?:\d+ h )?(?:\d+ min )?\d+ (?:s|min))\)",
            ),
            cost="about 25 s at low load",
        ),
        Spec(
            "parameter-error",
            ".venv/bin/papermill notebooks/15_simpson_explorer.ipynb /tmp/out.ipynb -p N_USERS 0 --engine facterlab --no-progress-bar",
            stderr=True,
            cost="about 10 s (a kernel starts)",
        ),
        Spec(
            "own-data-import",
            ".venv/bin/facterlab data import examples/jobs --name jobs --protected country,language --domain job "
            "--wordings examples/jobs/wordings.json",
            cost="seconds",
        ),
        Spec(
            "own-data-run",
            ".venv/bin/facterlab run --dataset jobs --model simulated --sim-bias-table examples/jobs/bias_table.json "
            "--delta twin --threshold null --rule-mining confirmed",
            before=(
                ".venv/bin/facterlab data import examples/jobs --name jobs --protected country,language --domain job "
                "--wordings examples/jobs/wordings.json",
            ),
            cost="about a minute at low load (MiniLM encodes the 240 job texts once)",
        ),
        Spec(
            "own-data-simpson",
            ".venv/bin/facterlab simpson audit examples/jobs/exposure_log.csv --random-col random",
            cost="seconds",
        ),
        Spec(
            "served-audit",
            ".venv/bin/facterlab run --model openai:build/served-models/smollm2-135m --server-url http://127.0.0.1:8765 "
            "--encoder hash-encoder --temperature 0 --repetition-penalty 1 --max-new-tokens 40 "
            "--dataset synthetic --n-rows 20 --passes 1 --cfr-rows 2 --snsr-min-group 2 --timeout 120 --concurrency 2",
            offline=False,
            cost="minutes, against a transformers serve the reader starts (--served-url)",
        ),
    )
}


# --- running a command -------------------------------------------------------------------------------


def clean_env(scratch: Path) -> dict:
    """A fresh clone's environment: the caller's, less every FACTERLAB_* setting, paths in scratch."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FACTERLAB_")}
    (scratch / "data").mkdir(exist_ok=True)
    env.update(
        PYTHONHASHSEED="0",
        FACTERLAB_DATA=str(scratch / "data"),
        FACTERLAB_CACHE=str(scratch / "cache"),
        FACTERLAB_RESULTS=str(scratch / "results"),
        FACTERLAB_FIGURES=str(scratch / "figures"),
        FACTERLAB_GGUF_CACHE="0",
    )
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH", "")) if p)
    return env


def argv_for(command: str, scratch: Path, served_url: str | None) -> list:
    """The page's command as this interpreter runs it (``.venv/bin/X`` -> this Python's ``X``)."""
    argv = shlex.split(command.replace("/tmp/out.ipynb", str(scratch / "out.ipynb")))
    if served_url:
        argv = [served_url if a == "http://127.0.0.1:8765" else a for a in argv]
    prog = Path(argv[0]).name
    if prog == "facterlab":
        return [sys.executable, "-m", "facterlab.cli", *argv[1:]]
    if prog == "papermill":
        return [sys.executable, "-m", "papermill", *argv[1:]]
    raise SpecError(f"{command!r}: the generator runs facterlab and papermill commands only")


def loadavg() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def commit() -> str:
    try:
        r = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=7"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
        )
        return r.stdout.strip() or "not a git checkout"
    except (OSError, subprocess.SubprocessError):
        return "git unavailable"


@dataclasses.dataclass
class Result:
    output: str
    wall: float
    cpu: float
    started: str
    load: str
    commit: str


def run_spec(spec: Spec, served_url: str | None = None, timeout: int = 1800) -> Result:
    with tempfile.TemporaryDirectory(prefix=f"docs-outputs-{spec.id}-") as tmp:
        scratch = Path(tmp)
        env = clean_env(scratch)
        argv = argv_for(spec.command, scratch, served_url)
        for cmd in spec.before:  # e.g. the import a run on an imported dataset needs
            pre = subprocess.run(argv_for(cmd, scratch, None), cwd=ROOT, env=env, capture_output=True, text=True,
                                 timeout=timeout)  # fmt: skip
            if pre.returncode != 0:
                tail = (pre.stderr or "").strip().splitlines()[-3:]
                raise SpecError(f"{spec.id}: {cmd} exited {pre.returncode}: " + " | ".join(tail))
        started = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        load = loadavg()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        r = subprocess.run(
            argv,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if spec.stderr else subprocess.PIPE,
            text=True,
            timeout=timeout,
        )
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if r.returncode != 0 and not spec.stderr:
            tail = (r.stderr or "").strip().splitlines()[-5:]
            raise SpecError(f"{spec.id}: {spec.command} exited {r.returncode}: " + " | ".join(tail))
        out = (
            r.stdout.replace(str(scratch / "results"), "<results>")
            .replace(str(scratch / "data"), "<data dir>")
            .replace(str(scratch / "out.ipynb"), "/tmp/out.ipynb")
        )
        if served_url:
            out = out.replace(served_url, "http://127.0.0.1:8765")
        out = "\n".join(ln.rstrip() for ln in out.strip("\n").splitlines())
        if spec.stderr:
            out = f"$ {spec.command}\n{out}"
        return Result(out, wall, cpu, started, load, commit())


# --- regions ----------------------------------------------------------------------------------------


def regions(text: str) -> list:
    return list(REGION.finditer(text))


def render_block(output: str) -> str:
    return f"```text\n{output}\n```\n"


def block_output(body: str) -> str:
    m = re.fullmatch(r"```text\n(.*?)\n?```\n", body, flags=re.DOTALL)
    if not m:
        raise SpecError("an output block region must hold exactly one ```text fence")
    return m.group(1)


def render_measured(res: Result) -> str:
    return f"(measured {res.started}, load average {res.load}, git {res.commit}: {res.wall:.1f} s wall, {res.cpu:.1f} s CPU)\n"


def splice(m: re.Match, body: str) -> str:
    """The region matched by ``m`` with ``body`` in place of its text."""
    return m.group(0)[: m.start("body") - m.start()] + body + m.group(0)[m.end("body") - m.start() :]


def masked(spec: Spec, text: str) -> str:
    """``text`` with the spec's measured fields replaced by :data:`MASK`, and the padding after a masked
    field collapsed (a table pads a column to its widest value: "15.5" and "6.1" are padded differently)."""
    for pat in spec.masks:
        text = re.sub(pat, lambda m: m.group(0).replace(m.group(1), MASK), text, flags=re.MULTILINE)
    return re.sub(re.escape(MASK) + r" +", MASK + " ", text)


def served_promise(spec: Spec, output: str) -> str:
    """What a served audit's block promises: config hash, header words, methods and columns."""
    lines = output.splitlines()
    head = re.sub(r"^run (\w{12})-\w{8}", r"run \1-<server>", lines[0])
    head = re.sub(r"Q0=\S+", "Q0=<server>", head)
    table = table_rows(output)
    cols = next(ln for ln in lines if ln.startswith("method ")).split()
    return "\n".join([head, " ".join(cols), *(m for m in table)])


def served_config_hash(spec: Spec) -> str:
    sys.path.insert(0, str(ROOT / "src"))
    from facterlab.cli import build_parser
    from facterlab.config import config_hash
    from facterlab.facter.commands import config_from_args

    args = build_parser().parse_args(shlex.split(spec.command)[1:])
    return config_hash(config_from_args(args))


def load_facts() -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    with MEASURED.open("rb") as fh:
        return tomllib.load(fh)


def render_fact(name: str, facts: dict) -> str:
    if name not in facts:
        raise SpecError(f"fact {name!r} is not in {MEASURED.relative_to(ROOT)}")
    return facts[name]["text"].strip() + "\n"


# --- the command ------------------------------------------------------------------------------------


def check_command_shown(spec: Spec, page: Path, text: str) -> None:
    fences = re.findall(r"^```(?:bash|text)\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)
    joined = [re.sub(r"\s*\\\n\s*", " ", f) for f in fences]
    for command in (*spec.before, spec.command):
        if not any(command in f for f in joined):
            raise SpecError(
                f"{page.relative_to(ROOT)}: region {spec.id!r}: the page does not show its command: {command}"
            )


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(prog="docs/outputs.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare only; exit 1 with a diff on drift")
    ap.add_argument("--only", default="", help="comma-separated spec ids (default: every offline spec)")
    ap.add_argument("--list", action="store_true", help="list the specs and their regions")
    ap.add_argument("--served-url", default=None, help="also rerun the served audit against this server")
    ap.add_argument(
        "--offline",
        action="store_true",
        help="run no command: check the facts, the served promise and the commands shown",
    )
    args = ap.parse_args(argv)
    only = [s for s in args.only.split(",") if s]
    unknown = [s for s in only if s not in SPECS and not s.startswith("fact:")]
    if unknown:
        print(f"docs/outputs.py: error: unknown output id(s) {unknown}; known: {sorted(SPECS)}", file=sys.stderr)
        return 2
    texts = {p: p.read_text(encoding="utf-8") for p in PAGES}
    found: dict = {}
    for page, text in texts.items():
        for m in regions(text):
            found.setdefault(m["id"], []).append((page, m["part"]))
    if args.list:
        for sid, spec in SPECS.items():
            where = ", ".join(f"{p.relative_to(ROOT)} ({part})" for p, part in found.get(sid, []))
            print(f"{sid:16} {spec.cost}; {where or 'no region'}")
        return 0
    try:
        for sid in found:
            if sid not in SPECS and not sid.startswith("fact:"):
                raise SpecError(f"a region names {sid!r}, which docs/outputs.py has no spec for")
        for sid, spec in SPECS.items():
            for page, part in found.get(sid, []):
                if part == "block":
                    check_command_shown(spec, page, texts[page])
        facts = load_facts()
        wanted = [s for s in SPECS if (s in only if only else SPECS[s].offline or args.served_url)]
        if args.offline:
            wanted = []
        if args.served_url and "served-audit" not in wanted:
            wanted.append("served-audit")
        results = {}
        for sid in wanted:
            if sid not in found:
                continue
            spec = SPECS[sid]
            if not spec.offline and not args.served_url:
                continue  # checked offline below
            print(f"docs/outputs.py: running {sid} ({spec.cost}) ...", file=sys.stderr, flush=True)
            results[sid] = run_spec(spec, served_url=args.served_url)
        drift = []
        new_texts = {}
        for page, text in texts.items():

            def sub(m: re.Match, page: Path = page) -> str:
                sid, part, body = m["id"], m["part"], m["body"]
                new = body
                if sid.startswith("fact:"):
                    new = render_fact(sid[5:], facts)
                    if new != body:
                        drift.append((page, sid, part, body, new))
                    return splice(m, new)
                spec = SPECS[sid]
                if not spec.offline and sid not in results:
                    if part == "block":
                        promised = served_promise(spec, block_output(body))
                        want = served_config_hash(spec)
                        if not promised.startswith(f"run {want}-"):
                            drift.append((page, sid, part, promised, f"run {want}-<server> ..."))
                    return m.group(0)
                if sid not in results:
                    return m.group(0)
                res = results[sid]
                if part == "block":
                    new = render_block(res.output)
                    old_cmp, new_cmp = (
                        (served_promise(spec, block_output(body)), served_promise(spec, res.output))
                        if not spec.offline
                        else (masked(spec, body), masked(spec, new))
                    )
                    if old_cmp != new_cmp:
                        drift.append((page, sid, part, body, new))
                elif part == "prose":
                    if spec.prose is None:
                        raise SpecError(f"{sid}: a prose region, but the spec writes no prose")
                    new = spec.prose(res.output) + "\n"
                    if new != body:
                        drift.append((page, sid, part, body, new))
                elif part == "measured":
                    new = render_measured(res)
                return splice(m, new)

            new_texts[page] = REGION.sub(sub, text)
    except SpecError as exc:
        print(f"docs/outputs.py: error: {exc}", file=sys.stderr)
        return 2
    if args.check:
        for page, sid, part, old, new in drift:
            print(f"{page.relative_to(ROOT)}: {sid} {part} differs from a fresh run:")
            sys.stdout.writelines(
                difflib.unified_diff(old.splitlines(True), new.splitlines(True), "committed", "fresh run")
            )
        if drift:
            print(f"docs/outputs.py: {len(drift)} region(s) drifted; rerun `make docs-outputs` and commit")
            return 1
        print(f"docs/outputs.py: {len(results)} command(s) rerun, every region matches")
        return 0
    for page, new in new_texts.items():
        if new != texts[page]:
            page.write_text(new, encoding="utf-8")
            print(f"docs/outputs.py: rewrote {page.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
