"""The notebooks' text sources: every ``notebooks/*.ipynb`` is paired (jupytext, ``jupytext.toml``)
with a ``py:percent`` file holding the same cells, and the tracked notebooks hold no outputs.

Edit either file (JupyterLab with jupytext keeps both in step on save; on the command line run
``jupytext --sync notebooks/*.ipynb``).  These tests fail when the pair drifts apart or when an
executed notebook is committed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

jupytext = pytest.importorskip("jupytext")
nbformat = pytest.importorskip("nbformat")

REPO = Path(__file__).resolve().parents[1]
NB_DIR = REPO / "notebooks"
NOTEBOOKS = sorted(NB_DIR.glob("*.ipynb"))


def _cells(nb) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(c.cell_type, c.source.strip(), tuple(c.metadata.get("tags", []))) for c in nb.cells]


def test_every_notebook_has_a_text_source_and_back():
    assert NOTEBOOKS, "no notebooks found"
    ipynb = {p.stem for p in NOTEBOOKS}
    py = {p.stem for p in NB_DIR.glob("*.py")}
    assert ipynb - py == set(), f"notebooks without a py:percent source: {sorted(ipynb - py)}"
    assert py - ipynb == set(), f"py sources without a notebook: {sorted(py - ipynb)}"


def test_pairing_is_configured_for_the_notebooks_folder():
    config = jupytext.config.find_jupytext_configuration_file(str(NB_DIR))
    assert config is not None, "jupytext.toml not found"
    formats = jupytext.config.load_jupytext_configuration_file(config).formats
    assert "py:percent" in str(formats) and "ipynb" in str(formats)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_pair_in_sync(path):
    nb = nbformat.read(str(path), as_version=4)
    text = jupytext.read(str(path.with_suffix(".py")))
    a, b = _cells(nb), _cells(text)
    for i, (x, y) in enumerate(zip(a, b)):
        assert x == y, (
            f"{path.name} and {path.with_suffix('.py').name} differ at cell {i}; "
            "run `jupytext --sync notebooks/*.ipynb` (the newer file wins)"
        )
    assert len(a) == len(b), f"{path.name}: {len(a)} cells, its .py source: {len(b)}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_tracked_notebook_has_no_outputs(path):
    nb = nbformat.read(str(path), as_version=4)
    dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert not dirty, (
        f"{path.name} holds outputs in cells {dirty}: strip them (`nbstripout {path.relative_to(REPO)}`; "
        "`make install` installs nbstripout as this repository's git filter)"
    )


def test_pair_check_detects_drift(tmp_path):
    """The sync check can fail: a changed line in the text source is seen."""
    src = NOTEBOOKS[0]
    text = jupytext.read(str(src.with_suffix(".py")))
    text.cells[-1].source += "\nprint('drift')"
    nb = nbformat.read(str(src), as_version=4)
    assert _cells(nb) != _cells(text)
