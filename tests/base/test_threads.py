"""CPU thread defaults (facterlab.threads): precedence, the automatic rule, the environment they
write, the CLI hook, and that torch and notebook kernels started afterwards really get them."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest

from facterlab import threads as th

MANAGED = th.MANAGED_VARS + ("OMP_WAIT_POLICY",)


@pytest.fixture
def clean_env(monkeypatch):
    """No thread variables in os.environ during the test; the originals come back afterwards."""
    for var in set(MANAGED):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_parse_threads():
    assert th.parse_threads(None) is None
    assert th.parse_threads("") is None and th.parse_threads(" AUTO ") is None
    assert th.parse_threads("off") == "off"
    assert th.parse_threads("3") == 3 and th.parse_threads(2) == 2
    for bad in ("0", "-1", "1.5", "two", True):
        with pytest.raises(ValueError, match="positive integer"):
            th.parse_threads(bad)


def test_auto_uses_every_usable_core_with_a_passive_pool():
    plan = th.choose(None, environ={}, cpus=2)
    assert plan.threads == 2 and plan.source == "auto" and plan.wait_policy == "PASSIVE"
    assert plan.env() == {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2", "OMP_WAIT_POLICY": "PASSIVE"}
    assert "auto: 2 usable core(s); load average" in plan.describe()
    assert th.choose(None, environ={}, cpus=8).threads == 8
    assert th.choose(None, environ={}).threads == th.usable_cpus() >= 1


def test_precedence_cli_then_env_then_omp_then_auto():
    env = {"FACTERLAB_THREADS": "3", "OMP_NUM_THREADS": "5"}
    assert th.choose("2", environ=env, cpus=4).threads == 2  # --threads wins
    assert th.choose("2", environ=env, cpus=4).source == "--threads"
    assert th.choose(None, environ=env, cpus=4).threads == 3  # then FACTERLAB_THREADS
    assert th.choose(None, environ={"OMP_NUM_THREADS": "5"}, cpus=4).threads == 5  # user OMP kept
    # an explicit "auto" chooses afresh even when OMP_NUM_THREADS is set
    assert th.choose("auto", environ={"OMP_NUM_THREADS": "5"}, cpus=4).threads == 4
    off = th.choose(None, environ={"FACTERLAB_THREADS": "off"}, cpus=4)
    assert off.threads is None and off.wait_policy is None and off.env() == {}
    with pytest.raises(ValueError, match="FACTERLAB_THREADS"):
        th.choose(None, environ={"FACTERLAB_THREADS": "many"}, cpus=2)
    with pytest.raises(ValueError, match="--threads"):
        th.choose("0", environ={}, cpus=2)


def test_wait_policy_user_setting_kept_and_checked():
    assert th.choose("1", environ={"OMP_WAIT_POLICY": "active"}, cpus=2).wait_policy == "ACTIVE"
    with pytest.raises(ValueError, match="OMP_WAIT_POLICY"):
        th.choose(None, environ={"OMP_WAIT_POLICY": "sometimes"}, cpus=2)


def test_configure_writes_env_and_replaces_only_its_own_choice(monkeypatch):
    env = {"MKL_NUM_THREADS": "7"}  # a user's own setting
    monkeypatch.setattr(th, "usable_cpus", lambda *a, **k: 2)
    plan = th.configure(None, env)
    assert plan.threads == 2
    assert env["OMP_NUM_THREADS"] == "2" and env["OMP_WAIT_POLICY"] == "PASSIVE"
    assert env["MKL_NUM_THREADS"] == "7"  # not overwritten by an automatic choice
    assert set(env[th.ENV_CHOSEN].split(",")) == {"OMP_NUM_THREADS", "OMP_WAIT_POLICY"}
    # later, with other usable cores: our own earlier choice is not mistaken for the user's
    monkeypatch.setattr(th, "usable_cpus", lambda *a, **k: 3)
    assert th.configure(None, env).threads == 3 and env["OMP_NUM_THREADS"] == "3"
    # but a user's OMP_NUM_THREADS is kept
    env_user = {"OMP_NUM_THREADS": "1"}
    assert th.configure(None, env_user).threads == 1 and th.ENV_CHOSEN in env_user
    assert "OMP_NUM_THREADS" not in env_user[th.ENV_CHOSEN].split(",")
    # an explicit request is remembered for children, and "off" removes only what we wrote
    th.configure("1", env)
    assert env["FACTERLAB_THREADS"] == "1" and env["OMP_NUM_THREADS"] == "1" and env["MKL_NUM_THREADS"] == "1"
    env2 = {"OMP_WAIT_POLICY": "ACTIVE", "FACTERLAB_THREADS": "off"}
    th.set_default_wait_policy(env2)
    th.configure(None, env2)
    assert env2 == {"OMP_WAIT_POLICY": "ACTIVE", "FACTERLAB_THREADS": "off"}
    env3 = {}
    th.set_default_wait_policy(env3)
    th.configure("off", env3)
    assert env3 == {"FACTERLAB_THREADS": "off"}


def test_set_default_wait_policy_respects_user_and_off():
    env = {}
    assert th.set_default_wait_policy(env) is True and env["OMP_WAIT_POLICY"] == "PASSIVE"
    env = {"OMP_WAIT_POLICY": "ACTIVE"}
    assert th.set_default_wait_policy(env) is False and env == {"OMP_WAIT_POLICY": "ACTIVE"}
    env = {"FACTERLAB_THREADS": "off"}
    assert th.set_default_wait_policy(env) is False and "OMP_WAIT_POLICY" not in env


def test_usable_cpus_follows_affinity(monkeypatch):
    assert th.usable_cpus([0]) == 1
    monkeypatch.setattr(th.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert th.usable_cpus() == 1
    assert th.choose(None, environ={}).usable == 1


def test_torch_loaded_afterwards_gets_the_threads():
    code = (
        "from facterlab import threads; threads.configure('1'); import os, torch; "
        "print(torch.get_num_threads(), os.environ['OMP_WAIT_POLICY'])"
    )
    env = {k: v for k, v in os.environ.items() if k not in MANAGED}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "PASSIVE"]


def test_cli_logs_choice_and_rejects_bad_value(clean_env, capsys, caplog):
    from facterlab.cli import main

    with caplog.at_level(logging.INFO, logger="facterlab.threads"):
        rc = main(["data", "summary", "--threads", "1"])
    assert rc == 0
    assert any("threads=1 OMP_WAIT_POLICY=PASSIVE (--threads)" in r.getMessage() for r in caplog.records)
    assert os.environ["OMP_NUM_THREADS"] == "1" and os.environ["FACTERLAB_THREADS"] == "1"
    assert main(["--threads", "zero", "data", "summary"]) == 2
    assert "threads must be a positive integer" in capsys.readouterr().err


@pytest.mark.slow
def test_notebook_kernel_inherits_the_choice(clean_env, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    from facterlab.reporting import reproduce as rp

    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "import json, os, pathlib\n"
            "keys = ['OMP_NUM_THREADS', 'OMP_WAIT_POLICY', 'FACTERLAB_THREADS']\n"
            "pathlib.Path('env.json').write_text(json.dumps({k: os.environ.get(k) for k in keys}))"
        )
    ]
    nbformat.write(nb, str(nbdir / "00_env.ipynb"))
    clean_env.setenv("FACTERLAB_THREADS", "1")
    clean_env.chdir(tmp_path)
    lines = []
    runs = rp.run_notebooks("smoke", log=lines.append)
    assert [r.status for r in runs] == ["ok"], runs[0].error
    seen = json.loads((tmp_path / "env.json").read_text())
    assert seen == {"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE", "FACTERLAB_THREADS": "1"}
    assert runs[0].threads.startswith("threads=1 OMP_WAIT_POLICY=PASSIVE")
    assert any("00_env.ipynb kernel: threads=1" in line for line in lines)
    assert "OMP_NUM_THREADS" not in os.environ  # the runner restores its own environment
