"""The tables users bring, read one way: an own dataset's files (:mod:`facterlab.data.imported`) and an
exposure log (:mod:`facterlab.simpson.auditing`).

- Text must be UTF-8 (a byte-order mark, as Excel writes, is allowed and dropped); a byte that is not
  is one line naming the file, the byte, its offset and its line.
- Every field of a text table is read as text, so ids such as ``007`` and ``7`` stay distinct; an
  empty field is missing.
- A file pandas or pyarrow cannot parse is one line naming the file and the parser's first line.

Each caller passes the error class its own messages use (``DatasetError``, ``LogError``).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pandas as pd

__all__ = ["decode_utf8", "read_delimited", "read_parquet"]


def decode_utf8(path: Path, error: type[Exception] = ValueError) -> str:
    """The text of ``path`` as UTF-8 (a BOM dropped), or ``error`` naming the first byte that is not.

    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "t.csv"
    >>> _ = p.write_bytes(b"\\xef\\xbb\\xbfid\\n1\\n"); decode_utf8(p)
    'id\\n1\\n'
    >>> _ = p.write_bytes(b"id\\nJos\\xe9\\n"); decode_utf8(p)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: .../t.csv: byte 0xe9 at offset 6 (line 2) is not UTF-8; re-save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)
    """
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise error(
            f"{path}: byte 0x{data[exc.start]:02x} at offset {exc.start} (line {line}) is not UTF-8; "
            "re-save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)"
        ) from None


def read_delimited(
    path: Path, sep: str, error: type[Exception] = ValueError, what: str = "CSV", quoting: int = csv.QUOTE_MINIMAL
) -> pd.DataFrame:
    """A delimited text table, every field as text and an empty field missing; ``error`` for a file that
    is not UTF-8, empty, or that the parser refuses (``what`` names the format in that message).

    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "t.csv"
    >>> _ = p.write_text("user,item\\n007,7\\n8,\\n"); read_delimited(p, ",").to_dict("list")
    {'user': ['007', '8'], 'item': ['7', nan]}
    >>> _ = p.write_text("a,b\\n1,2\\n3,4,5,6\\n"); read_delimited(p, ",")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: .../t.csv: not a readable CSV file (Error tokenizing data. C error: Expected 2 fields in line 3, saw 4)
    """
    text = decode_utf8(path, error)
    if not text.strip():
        raise error(f"{path}: the file is empty")
    try:
        return pd.read_csv(
            io.StringIO(text), sep=sep, dtype=str, keep_default_na=False, na_values=[""], quoting=quoting
        )
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise error(f"{path}: not a readable {what} file ({first})") from None


def read_parquet(path: Path, error: type[Exception] = ValueError) -> pd.DataFrame:
    """A parquet table, or ``error`` in one line (pyarrow raises several types for a bad file)."""
    try:
        return pd.read_parquet(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow's errors, one line
        raise error(f"{path}: not a readable parquet file ({type(exc).__name__}: {exc})") from None
