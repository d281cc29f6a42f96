"""Write small throw-away notebooks from Python cell lists, for tests of the runner.

(The project's own notebooks are paired with py:percent sources by jupytext; see
``tests/notebooks/test_notebook_sources.py``.)  Usage::

    from nbgen import write_notebook, md, params, code
    write_notebook("notebooks/01_data_and_protocol.ipynb", [
        md("# Title"), params("DATASET = 'auto'\\nSMOKE = False"), code("..."),
    ])

The first code cell must be ``params(...)`` (tagged ``parameters`` for papermill).  nbformat is imported
inside the functions: its import (jsonschema's format checkers) took 5 s of the unit tier's collection,
which imports this module for its doctests and test_progress.py's for a slow test.
"""

from __future__ import annotations

from pathlib import Path


def md(src: str):
    from nbformat.v4 import new_markdown_cell

    return new_markdown_cell(src.strip("\n"))


def code(src: str):
    from nbformat.v4 import new_code_cell

    return new_code_cell(src.strip("\n"))


def params(src: str):
    from nbformat.v4 import new_code_cell

    cell = new_code_cell(src.strip("\n"))
    cell.metadata["tags"] = ["parameters"]
    return cell


def write_notebook(path, cells) -> Path:
    import nbformat
    from nbformat.v4 import new_notebook

    first_code = next(c for c in cells if c.cell_type == "code")
    if "parameters" not in first_code.metadata.get("tags", []):
        raise ValueError(f"{path}: the first code cell must be the tagged parameters cell")
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path
