"""Citations: every ``Reference: [key]`` in src/ names an entry of docs/references.bib, every entry is
cited, and the metrics and estimators whose formula comes from a paper carry a reference."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIB = REPO / "docs" / "references.bib"
SRC = REPO / "src" / "facterlab"

_ENTRY = re.compile(r"^@\w+\{([^,\s]+),", re.M)
_REFERENCE = re.compile(r"Reference:((?:\s*\[[^\]]+\],?)+)")
_KEY = re.compile(r"\[([^\]]+)\]")

#: the metrics and estimators whose formula comes from a paper (module -> names)
MUST_CITE = {
    "facterlab.metrics.ranking": ["ndcg_at_k"],
    "facterlab.metrics.fairness": ["snsr_proxy", "snsr_fairllm"],
    "facterlab.metrics.counterfactual": ["cfr"],
    "facterlab.facter.conformal": ["conformal_k", "ConformalThreshold", "corrected_threshold", "hoeffding_constant"],
    "facterlab.facter.scores": ["nonconformity_scores", "counterfactual_disparity"],
    "facterlab.facter.threshold": ["update_threshold"],
    "facterlab.facter.repair": ["mine_rules"],
    "facterlab.facter.neighbours": ["counterfactual_neighbours"],
    "facterlab.simpson.gaps": ["per_user_gap", "aggregate_gap", "decompose"],
    "facterlab.simpson.ips": ["ips_estimate", "naive_estimate"],
    "facterlab.simpson.exposure": ["log_discount", "competition"],
    "facterlab.models.simulated": ["fit_preferences"],
}


def bib_keys(text: str) -> set:
    return set(_ENTRY.findall(text))


def cited_keys(text: str) -> list:
    """Every key inside ``Reference: [a], [b]`` lines of ``text``."""
    return [k.strip() for m in _REFERENCE.finditer(text) for k in _KEY.findall(m.group(1))]


def unknown_citations(files, keys: set) -> list:
    return [
        f"{f}: [{k}] is not in docs/references.bib" for f in files for k in cited_keys(f.read_text()) if k not in keys
    ]


def test_every_cited_key_is_in_the_bib_file():
    keys = bib_keys(BIB.read_text())
    assert len(keys) >= 10
    files = sorted(SRC.rglob("*.py"))
    assert sum(len(cited_keys(f.read_text())) for f in files) > 20
    assert unknown_citations(files, keys) == []


def test_every_bib_entry_is_cited():
    text = "".join(f.read_text() for f in sorted(SRC.rglob("*.py")))
    assert sorted(bib_keys(BIB.read_text()) - set(cited_keys(text))) == []


@pytest.mark.parametrize("module", sorted(MUST_CITE))
def test_formulas_from_papers_cite_them(module):
    mod = importlib.import_module(module)
    missing = [name for name in MUST_CITE[module] if not cited_keys(inspect.getdoc(getattr(mod, name)) or "")]
    assert missing == [], f"{module}: no 'Reference: [key]' line in the docstring of {missing}"


def test_the_check_catches_an_unknown_key(tmp_path):
    f = tmp_path / "m.py"
    f.write_text('def ndcg():\n    """DCG.\n\n    Reference: [jarvelin2002ndcg], [nobody1999]\n    """\n')
    keys = bib_keys("@article{jarvelin2002ndcg,\n  title = {x}\n}\n")
    assert keys == {"jarvelin2002ndcg"}
    assert unknown_citations([f], keys) == [f"{f}: [nobody1999] is not in docs/references.bib"]
