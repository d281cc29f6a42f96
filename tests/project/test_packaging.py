"""Packaging: environment.yml matches pyproject.toml, and `import facterlab` stays light."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "sentence_transformers")


def _normalise(req: str) -> tuple:
    """(canonical name, specifier without spaces), as PEP 503 / PEP 508 compare them."""
    req = req.split(";")[0].strip()
    m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$", req)
    assert m, f"cannot parse requirement {req!r}"
    name = re.sub(r"[-_.]+", "-", m.group(1)).lower()
    spec = ",".join(sorted(s.strip() for s in m.group(3).replace(" ", "").split(",") if s.strip()))
    return name, spec


def _environment_pip() -> list:
    lines = (REPO / "environment.yml").read_text().splitlines()
    out, in_pip, indent = [], False, None
    for line in lines:
        stripped = line.split("#", 1)[0].rstrip()
        if not stripped.strip():
            continue
        if stripped.strip() == "- pip:":
            in_pip, indent = True, len(stripped) - len(stripped.lstrip())
            continue
        if in_pip:
            cur = len(stripped) - len(stripped.lstrip())
            if cur <= indent:
                in_pip = False
                continue
            item = stripped.strip()[2:].strip()
            if item.startswith("-e") or item in (".",):
                continue
            out.append(item)
    return out


def test_environment_yml_matches_pyproject():
    py = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = list(py["dependencies"]) + [r for extra in py["optional-dependencies"].values() for r in extra]
    env = _environment_pip()
    assert env, "no pip list found in environment.yml"
    want = sorted(_normalise(r) for r in wanted if not _normalise(r)[0] == "facterlab")
    got = sorted(_normalise(r) for r in env)
    assert got == want, (
        f"only in environment.yml: {sorted(set(got) - set(want))}; "
        f"only in pyproject.toml: {sorted(set(want) - set(got))}"
    )


def test_normalise():
    assert _normalise("Sentence_Transformers >= 3.0") == ("sentence-transformers", ">=3.0")
    assert _normalise("numpy>=1.24,<3") == ("numpy", "<3,>=1.24")


def test_import_facterlab_is_light():
    code = (
        "import sys, json; import facterlab, facterlab.config, facterlab.data, facterlab.data.protocol, "
        "facterlab.facter.prompts; print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        f"{HEAVY!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
