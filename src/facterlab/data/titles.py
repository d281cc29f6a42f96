"""Title normalisation shared by the catalogue mapping (:mod:`facterlab.metrics.catalogue`) and the
recommenders' parsers (:mod:`facterlab.models.parsing`, :mod:`facterlab.models.rankers`).

It lives in the data layer because it is a property of catalogue titles ("Usual Suspects, The (1995)"),
used by both the models and the metrics layers above it (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np

__all__ = ["normalise_title", "title_aliases"]

_YEAR = re.compile(r"\s*\(\s*\d{4}\s*\)\s*$")
_ARTICLES = r"the|a|an|la|le|les|l'|il|el|der|die|das|los|las|lo|det|den|de|het|une|un"
_TRAILING_ARTICLE = re.compile(rf"^(?P<main>.+?),\s*(?P<art>{_ARTICLES})\s*(?P<rest>\(.*\))?\s*$", flags=re.IGNORECASE)
_TRAILING_PAREN = re.compile(r"^(?P<main>.+?)\s*\((?P<alt>[^()]*)\)\s*$")
_NON_ALNUM = re.compile(r"[^0-9a-z]+")


def _move_article(title: str) -> str:
    m = _TRAILING_ARTICLE.match(title)
    if not m:
        return title
    art = m.group("art")
    sep = "" if art.endswith("'") else " "
    rest = f" {m.group('rest')}" if m.group("rest") else ""
    return f"{art}{sep}{m.group('main')}{rest}"


def normalise_title(title: str | None) -> str:
    """Normalised title for fuzzy matching (docs/FACTER.md §4, ``rapidfuzz`` mapping).

    Steps: strip a trailing "(yyyy)" year; read "Title, The" as "The Title" (also "A", "An" and common
    foreign articles); strip accents; lowercase; punctuation to spaces; collapse spaces.

    >>> normalise_title("Usual Suspects, The (1995)")
    'the usual suspects'
    >>> normalise_title("The Usual Suspects")
    'the usual suspects'
    >>> normalise_title("City of Lost Children, The (Cité des enfants perdus, La) (1995)")
    'the city of lost children cite des enfants perdus la'
    >>> normalise_title(None)
    ''
    """
    if title is None or (isinstance(title, float) and np.isnan(title)):
        return ""
    t = _YEAR.sub("", str(title).strip())
    t = _move_article(t)
    t = unicodedata.normalize("NFKD", t)
    t = "".join(c for c in t if not unicodedata.combining(c)).lower().replace("&", " and ")
    return _NON_ALNUM.sub(" ", t).strip()


def title_aliases(title: str) -> list:
    """The normalised title plus, if it ends in a parenthesised alternative title, both halves."""
    keys = [normalise_title(title)]
    base = _YEAR.sub("", str(title).strip())
    m = _TRAILING_PAREN.match(base)
    if m:
        for part in (m.group("main"), m.group("alt")):
            key = normalise_title(part)
            if key and key not in keys:
                keys.append(key)
    return [k for k in keys if k]
