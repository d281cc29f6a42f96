"""`facterlab reproduce --jobs`: the side lane (SIDE_LANE's notebooks in a child process at low priority).

The rule's claim (its notebooks touch no FACTER run) is checked on the notebooks' imports; the lanes on
tiny notebooks in a temporary folder (tests/helpers/nbgen.py), as tests/reporting/test_reporting_reproduce.py.
No timing assertions: the machine is shared.
"""

from __future__ import annotations

import ast
import json
import os
import sys
from pathlib import Path

import pytest

from facterlab.reporting import reproduce as rp

REPO = Path(__file__).resolve().parents[2]
#: Modules that read or write FACTER runs: a side-lane notebook imports none of them.
FACTER_MODULES = ("facterlab.facter", "facterlab.reporting.experiments", "facterlab.reporting.batch")


def facter_imports(notebook: Path) -> list:
    """The FACTER modules (:data:`FACTER_MODULES`, or a module under one) a notebook's code cells import,
    by ``import x.y``, ``from x import y`` or a module name written as text (``importlib``)."""
    import nbformat

    found = []
    for cell in nbformat.read(str(notebook), 4).cells:
        if cell.cell_type != "code":
            continue
        source = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
        names = []
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                names += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.append(node.value)
        found += [n for n in names if any(n == m or n.startswith(m + ".") for m in FACTER_MODULES)]
    return found


def test_side_lane_is_the_simpson_notebooks_10_to_15():
    side = {p.stem for p in (REPO / "notebooks").glob("*.ipynb") if rp.in_side_lane(p)}
    assert side == {
        "10_simpson_fig2_toy",
        "11_simpson_fig3_factors",
        "12_simpson_fig4_aggregate_gap",
        "13_simpson_fig5_ips_estimate",
        "14_simpson_grid_160",
        "15_simpson_explorer",
    }
    assert not rp.in_side_lane("20_simpson_in_llm_recommendations")  # it runs FACTER experiments


def test_side_lane_notebooks_import_no_facter_module():
    """Every notebook SIDE_LANE matches imports none of the modules that read or write FACTER runs, so it can
    run beside the main lane in any order; notebook 20 (main lane) does, which shows the check sees them."""
    notebooks = sorted((REPO / "notebooks").glob("*.ipynb"))
    side = [nb for nb in notebooks if rp.in_side_lane(nb)]
    assert side
    for nb in side:
        assert facter_imports(nb) == [], f"{nb.name} imports {facter_imports(nb)}: it cannot be in SIDE_LANE"
    assert "facterlab.reporting.experiments" in facter_imports(
        REPO / "notebooks" / "20_simpson_in_llm_recommendations.ipynb"
    )


def test_split_lanes():
    nbs = [Path(n) for n in ("00_a.ipynb", "10_simpson_x.ipynb", "14_simpson_y.ipynb", "20_simpson_z.ipynb")]
    main, side = rp.split_lanes(nbs, 2)
    assert [p.stem for p in main] == ["00_a", "20_simpson_z"] and [p.stem for p in side] == [
        "10_simpson_x",
        "14_simpson_y",
    ]
    assert rp.split_lanes(nbs, 1) == (nbs, []) and rp.split_lanes(nbs, 3) == (main, side)
    assert rp.split_lanes(nbs[1:3], 2) == (nbs[1:3], [])  # an empty main lane: everything here
    assert rp.split_lanes(nbs[:1], 2) == (nbs[:1], [])
    with pytest.raises(ValueError, match="at least 1"):
        rp.split_lanes(nbs, 0)


def test_jobs_parsing(monkeypatch, capsys):
    from facterlab.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["reproduce", "--jobs", "1"]).jobs == 1
    assert parser.parse_args(["reproduce", "--jobs", "2"]).jobs == 2
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert parser.parse_args(["reproduce", "--jobs", "auto"]).jobs == 2
    assert parser.parse_args(["reproduce"]).jobs == 2  # the command's default is auto
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3}, raising=False)
    assert parser.parse_args(["reproduce"]).jobs == 1
    for bad in ("x", "0", "-1", "1.5"):
        with pytest.raises(SystemExit) as exc:
            parser.parse_args(["reproduce", "--jobs", bad])
        assert exc.value.code == 2
        assert f"argument --jobs: expected auto or a whole number >= 1, got '{bad}'" in capsys.readouterr().err


def _probe(name: str) -> str:
    """A cell that writes its kernel's process facts to ``probe_<name>.json`` (in the run's cwd)."""
    return (
        "import json, os\n"
        f"facts = {{'pid': os.getpid(), 'ppid': os.getppid(), 'nice': os.nice(0), 'report': os.environ.get('FACTERLAB_REPORT'), "
        "'policy': os.sched_getscheduler(0) if hasattr(os, 'sched_getscheduler') else None}\n"
        f"open('probe_{name}.json', 'w').write(json.dumps(facts))\n"
        "print('probe', facts['ppid'], facts['nice'])"
    )


def _tiny_notebooks(nbdir: Path) -> None:
    from nbgen import code, params, write_notebook

    head = 'PROFILE = "default"\nSMOKE = False'
    write_notebook(nbdir / "01_main.ipynb", [params(head), code(_probe("01_main"))])
    write_notebook(nbdir / "10_simpson_side.ipynb", [params(head + "\nX = 1"), code(_probe("10_simpson_side"))])
    write_notebook(nbdir / "11_simpson_fail.ipynb", [params(head), code('raise RuntimeError("boom on the side")')])
    write_notebook(nbdir / "20_after.ipynb", [params(head), code(_probe("20_after"))])


@pytest.mark.slow
@pytest.mark.integration
def test_two_lanes_same_runs_as_one_side_lane_in_a_lower_priority_process(tmp_path, monkeypatch):
    nbdir = tmp_path / "notebooks"
    _tiny_notebooks(nbdir)
    monkeypatch.chdir(tmp_path)
    one = rp.run_notebooks("smoke", cwd=tmp_path, extra={"X": "5"}, log=lambda *a: None, timings_path="t1.json")
    probes_one = {n: json.loads((tmp_path / f"probe_{n}.json").read_text()) for n in ("01_main", "10_simpson_side")}
    lines: list = []
    monkeypatch.setattr(rp, "uncommitted_reason", lambda root: None)  # --report needs a clean tree
    two = rp.run_notebooks(
        "smoke", cwd=tmp_path, extra={"X": "5"}, log=lines.append, timings_path="t2.json", jobs=2, report=True
    )
    key = [(r.notebook, r.status, r.parameters, r.skipped_parameters) for r in one]
    assert [(r.notebook, r.status, r.parameters, r.skipped_parameters) for r in two] == key
    assert [r.status for r in two] == ["ok", "ok", "failed", "ok"]  # numeric order, both lanes merged
    assert [r.lane for r in one] == ["main"] * 4 and [r.lane for r in two] == ["main", "side", "side", "main"]
    assert "RuntimeError" in two[2].error and "boom on the side" in two[2].error
    assert all(Path(r.output).is_file() for r in two)  # the executed copies, side lane's included

    me, my_nice = os.getpid(), os.nice(0)
    side = json.loads((tmp_path / "probe_10_simpson_side.json").read_text())
    main = json.loads((tmp_path / "probe_01_main.json").read_text())
    assert main["ppid"] == me and main["nice"] == my_nice  # the main lane's kernels: started here, as before
    assert probes_one["10_simpson_side"]["ppid"] == me and probes_one["10_simpson_side"]["nice"] == my_nice
    assert side["ppid"] != me and side["nice"] == min(my_nice + rp.SIDE_NICE, 19)  # another process, nice 19
    if hasattr(os, "SCHED_IDLE"):  # Linux: the side lane only takes a core no other task wants
        assert side["policy"] == os.SCHED_IDLE and main["policy"] == os.sched_getscheduler(0)
    assert side["report"] == main["report"] == "1"  # the parent's report decision, in both lanes
    assert any(line.startswith("[side] [10_simpson_side] probe") for line in lines)
    assert any(line.startswith("[side] [reproduce] FAILED 11_simpson_fail.ipynb") for line in lines)
    assert any(line.startswith("[reproduce] 2 lanes: main lane 2 notebook(s)") for line in lines)
    assert not any(line.startswith("[side] [reproduce] dataset:") for line in lines)  # said once, by the parent

    t1, t2 = (json.loads((tmp_path / f"t{i}.json").read_text()) for i in (1, 2))
    assert (t1["jobs"], t1["lanes"], t2["jobs"], t2["lanes"]) == (1, ["main"], 2, ["main", "side"])
    assert [n["lane"] for n in t2["notebooks"]] == ["main", "side", "side", "main"]
    assert t2["notebook_seconds"] == pytest.approx(sum(n["seconds"] for n in t2["notebooks"]))
    assert t1["total_seconds"] >= t1["notebook_seconds"] - 1e-6 and t2["total_seconds"] > 0
    table = rp.timings_table(two, "smoke", wall=t2["total_seconds"])
    assert "sum of notebooks (profile smoke)" in table and "wall, both lanes" in table and " side " in table
    assert "total (profile smoke)" in rp.timings_table(one, "smoke")  # one lane: the table as before


@pytest.mark.slow
@pytest.mark.integration
def test_side_lane_that_cannot_start_or_dies_gives_failed_runs(tmp_path, monkeypatch):
    from nbgen import code, params, write_notebook

    nbdir = tmp_path / "notebooks"
    head = 'PROFILE = "default"\nSMOKE = False'
    write_notebook(nbdir / "01_main.ipynb", [params(head), code("x = 1")])
    write_notebook(nbdir / "12_simpson_a.ipynb", [params(head), code("x = 1")])
    write_notebook(nbdir / "13_simpson_b.ipynb", [params(head), code("x = 1")])
    monkeypatch.chdir(tmp_path)
    for command, why in (
        ((str(tmp_path / "no-such-python"),), "side lane could not start: FileNotFoundError"),
        ((sys.executable, "-c", "raise SystemExit(3)"), "side lane exited with code 3 before running it"),
    ):
        monkeypatch.setattr(rp.SideLane, "command", command)
        lines: list = []
        runs = rp.run_notebooks("smoke", cwd=tmp_path, log=lines.append, timings_path="t.json", jobs=2)
        assert [(r.notebook, r.status, r.lane) for r in runs] == [
            ("01_main", "ok", "main"),
            ("12_simpson_a", "failed", "side"),
            ("13_simpson_b", "failed", "side"),
        ]
        assert all(r.error.startswith(why) for r in runs[1:]), runs
        assert any(line.startswith("[reproduce] FAILED 13_simpson_b.ipynb: " + why) for line in lines)


@pytest.mark.integration
def test_interrupt_in_the_main_lane_stops_the_side_lane(tmp_path, monkeypatch):
    """Ctrl-C (or any error) in the main lane: the side lane's process is ended before the exception leaves."""
    from nbgen import code, params, write_notebook

    nbdir = tmp_path / "notebooks"
    for name in ("01_main", "12_simpson_a"):
        write_notebook(nbdir / f"{name}.ipynb", [params('PROFILE = "default"\nSMOKE = False'), code("x = 1")])
    started: list = []

    class Recorded(rp.SideLane):
        command = (sys.executable, "-c", "import time; print('side up', flush=True); time.sleep(600)")

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started.append(self)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(rp, "SideLane", Recorded)
    monkeypatch.setattr(rp, "_run_one", interrupted)
    with pytest.raises(KeyboardInterrupt):
        rp.run_notebooks("smoke", cwd=tmp_path, log=lambda *a: None, timings_path="t.json", jobs=2)
    assert len(started) == 1 and started[0].proc is not None
    assert started[0].proc.poll() is not None  # ended, not left running


@pytest.mark.skipif(os.name == "nt", reason="no ipc transport on Windows")
def test_kernels_started_in_one_folder_get_socket_paths_of_their_own(tmp_path, monkeypatch):
    """Two kernel managers that write their connection files before either kernel binds (the two lanes
    at the same moment) pick the same socket paths with jupyter_client's default prefix (``kernel-ipc``
    in the working folder, numbered by the first free numbers found there): the positive control.  With
    the engine's kernel manager each has a prefix of its own under Jupyter's runtime directory."""
    from jupyter_client import AsyncKernelManager
    from jupyter_core.paths import jupyter_runtime_dir

    from facterlab.reporting.papermill_engine import kernel_manager_kwargs

    monkeypatch.chdir(tmp_path)

    def sockets(manager) -> set:
        manager.write_connection_file()
        try:
            info = manager.get_connection_info()
            ports = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")
            return {os.path.abspath(f"{info['ip']}-{info[p]}") for p in ports}
        finally:
            manager.cleanup_connection_file()

    default = [AsyncKernelManager(transport="ipc") for _ in range(2)]
    assert sockets(default[0]) == sockets(default[1])  # the collision the lanes met ("Invalid Signature")
    cls = kernel_manager_kwargs()["kernel_manager_class"]
    ours = [cls() for _ in range(2)]
    first, second = sockets(ours[0]), sockets(ours[1])
    assert not first & second and len(first) == len(second) == 5
    runtime = os.path.realpath(jupyter_runtime_dir())
    assert all(os.path.realpath(p).startswith(runtime + os.sep) for p in first | second)
    assert all(len(p.encode()) < 104 for p in first)  # a Unix socket path's limit (macOS: 104, Linux: 108)


@pytest.mark.skipif(os.name == "nt", reason="no ipc transport on Windows")
def test_a_runtime_dir_too_deep_for_a_socket_falls_back_to_a_temporary_folder_removed_at_exit(tmp_path, monkeypatch):
    """Where Jupyter's runtime directory is too deep for a socket path, the prefix lies in a new 0700
    temporary folder, and that folder is registered for removal when the process exits (not left in /tmp)."""
    import atexit
    import shutil

    import jupyter_core.paths

    from facterlab.reporting import papermill_engine

    deep = tmp_path / ("d" * 120)
    monkeypatch.setattr(jupyter_core.paths, "jupyter_runtime_dir", lambda: str(deep))
    registered = []
    monkeypatch.setattr(atexit, "register", lambda fn, *args: registered.append((fn, args)))
    prefix = papermill_engine.ipc_prefix()
    folder = os.path.dirname(prefix)
    assert not folder.startswith(str(deep)) and len(prefix.encode()) < 104
    assert os.stat(folder).st_mode & 0o777 == 0o700
    assert registered == [(shutil.rmtree, (folder, True))]
    registered[0][0](*registered[0][1])
    assert not os.path.exists(folder)
    # the positive control: a short runtime directory is used as it is, and nothing is registered
    monkeypatch.setattr(jupyter_core.paths, "jupyter_runtime_dir", lambda: str(tmp_path / "rt"))
    assert papermill_engine.ipc_prefix().startswith(str(tmp_path / "rt") + os.sep) and len(registered) == 1
