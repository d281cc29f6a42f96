"""Mapping generated titles to catalogue items, and Valid@k (docs/FACTER.md §4, §2 "item representation").

Two named mapping variants (report which one a table used, see :attr:`CatalogueMapper.variant`):

- ``"encoder"`` (REPRO, default): embed the catalogue titles and the generated titles with the
  sentence encoder f; a generated title maps to the catalogue item of highest cosine similarity,
  accepted when ``cos >= threshold`` (0.65, REPRO), else unmapped (-1).  Blocked matrix products keep
  memory bounded (fine for 100k items).  Ties go to the first item in catalogue order.
- ``"rapidfuzz"``: titles normalised by :func:`facterlab.data.titles.normalise_title` (lowercase, accents and punctuation
  removed, a trailing "(1995)" year removed, "Title, The" read as "The Title"; a trailing
  parenthesised alternative title is also indexed as an alias), exact normalised match first, else
  ``rapidfuzz.process.extractOne`` with scorer ``fuzz.ratio`` (0..100) and ``score_cutoff`` 85.

Item representation for SNSR/CFR (docs/FACTER.md §2): the encoder embedding of the mapped catalogue item's
``text`` ("{title} :: {genres}" for MovieLens), the raw generated title when nothing maps.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
import pandas as pd

from facterlab.config import MAPPINGS, RAPIDFUZZ_THRESHOLD
from facterlab.data.titles import normalise_title, title_aliases
from facterlab.metrics.embeddings import normalise_rows, normalised_row_means
from facterlab.metrics.ranking import is_unmapped

RAPIDFUZZ_SCORERS = ("ratio", "WRatio", "token_sort_ratio", "token_set_ratio")
DEFAULT_FUZZY_CUTOFF = float(RAPIDFUZZ_THRESHOLD.example)  # the rapidfuzz map_threshold example of config

ERR_METHOD = "method must be one of {methods}, got {method!r}"
ERR_NEEDS_ENCODER = "an encoder is required for {what} (any object with .encode(list[str]) -> (n, d))"
ERR_ITEMS = "items must be a DataFrame with an item_id column (or index) and a title column"
ERR_BAD_K = "k must be a positive integer, got {k!r}"
ERR_NO_ROWS = "no rows: Valid@k is undefined"

__all__ = ["CatalogueMapper", "normalise_title", "valid_at_k", "valid_per_row"]


def _check_k(k) -> int:
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(ERR_BAD_K.format(k=k))
    return int(k)


def _is_blank(t) -> bool:
    return t is None or (isinstance(t, float) and np.isnan(t)) or not str(t).strip()


class CatalogueMapper:
    """Map generated titles to catalogue item ids (docs/FACTER.md §4; the matching rules: module docstring).

    Parameters
    ----------
    items : pandas.DataFrame
        ``item_id`` (column, or the index) and ``title``; optional ``text`` (what the encoder embeds
        for the item representation; defaults to the title).
    encoder : object, optional
        With ``.encode(list[str]) -> (n, d)`` giving an L2-normalised array.  Required for
        ``method="encoder"`` and for :meth:`row_item_embeddings` / :meth:`row_embeddings`.
    method : str
        ``"encoder"`` (default) or ``"rapidfuzz"``.
    threshold : float
        Minimum cosine for ``"encoder"`` (default 0.65, REPRO).
    fuzzy_cutoff : float
        Minimum rapidfuzz score (0..100) for ``"rapidfuzz"`` (default 85).
    scorer : str
        Rapidfuzz scorer name, one of ``ratio`` (default), ``WRatio``, ``token_sort_ratio``,
        ``token_set_ratio``.
    block_size : int, optional
        Query titles per matrix-product block (default: about 32M float32 similarities, 128 MiB,
        per block).

    Notes
    -----
    After a call to :meth:`map` / :meth:`map_with_scores`, the similarity of each accepted match is
    in the returned scores (cosine for ``"encoder"``, 0..100 for ``"rapidfuzz"``; NaN when unmapped).

    Examples
    --------
    >>> items = pd.DataFrame({"item_id": [10, 20], "title": ["Heat (1995)", "Usual Suspects, The (1995)"]})
    >>> m = CatalogueMapper(items, method="rapidfuzz")
    >>> m.map(["The Usual Suspects", "heat", "Nothing Like It"]).tolist()
    [20, 10, -1]
    >>> m.variant
    'rapidfuzz(ratio>=85)'
    """

    def __init__(
        self,
        items: pd.DataFrame,
        encoder=None,
        method: str = "encoder",
        threshold: float = 0.65,
        *,
        fuzzy_cutoff: float = DEFAULT_FUZZY_CUTOFF,
        scorer: str = "ratio",
        block_size: int | None = None,
    ):
        if method not in MAPPINGS:
            raise ValueError(ERR_METHOD.format(methods=MAPPINGS, method=method))
        if scorer not in RAPIDFUZZ_SCORERS:
            raise ValueError(f"scorer must be one of {RAPIDFUZZ_SCORERS}, got {scorer!r}")
        if not isinstance(items, pd.DataFrame) or "title" not in items.columns:
            raise ValueError(ERR_ITEMS)
        if "item_id" in items.columns:
            ids = items["item_id"].to_numpy()
        elif items.index.name == "item_id":
            ids = items.index.to_numpy()
        else:
            raise ValueError(ERR_ITEMS)
        if len(items) == 0:
            raise ValueError("the catalogue is empty: nothing to map to")
        if method == "encoder" and encoder is None:
            raise ValueError(ERR_NEEDS_ENCODER.format(what='method="encoder"'))
        self.item_ids = np.asarray(ids).astype(np.int64)
        self.titles = items["title"].astype(str).to_numpy()
        self.texts = items["text"].astype(str).to_numpy() if "text" in items.columns else self.titles
        self._pos = {int(i): p for p, i in enumerate(self.item_ids)}
        self.encoder = encoder
        self.method = method
        self.threshold = float(threshold)
        self.fuzzy_cutoff = float(fuzzy_cutoff)
        self.scorer = scorer
        self.block_size = block_size
        self._title_emb: np.ndarray | None = None
        self._fuzzy_keys: list | None = None
        self._fuzzy_pos: np.ndarray | None = None
        self._exact: dict | None = None
        self._emb_cache: dict = {}

    @property
    def variant(self) -> str:
        """Which mapping produced the numbers, e.g. ``'encoder(cos>=0.65)'``."""
        if self.method == "encoder":
            return f"encoder(cos>={self.threshold:g})"
        return f"rapidfuzz({self.scorer}>={self.fuzzy_cutoff:g})"

    # ------------------------------------------------------------------ mapping
    def map(self, titles: Sequence[str | None]) -> np.ndarray:
        """Item id for each title (int64; -1 when unmatched, blank or None)."""
        return self.map_with_scores(titles)[0]

    def map_with_scores(self, titles: Sequence[str | None]) -> tuple:
        """``(item_ids, scores)``: ids (-1 unmatched) and the similarity of each accepted match (NaN else).

        Scores are cosines for ``"encoder"`` and rapidfuzz scores (0..100) for ``"rapidfuzz"``.
        """
        titles = list(titles)
        out_ids = np.full(len(titles), -1, dtype=np.int64)
        out_scores = np.full(len(titles), np.nan)
        keep = [i for i, t in enumerate(titles) if not _is_blank(t)]
        if not keep:
            return out_ids, out_scores
        uniq, inverse = np.unique(np.array([str(titles[i]).strip() for i in keep], dtype=object), return_inverse=True)
        if self.method == "encoder":
            pos, score = self._map_encoder(list(uniq))
        else:
            pos, score = self._map_fuzzy(list(uniq))
        pos, score = pos[inverse], score[inverse]
        keep_arr = np.asarray(keep)
        ok = pos >= 0
        out_ids[keep_arr[ok]] = self.item_ids[pos[ok]]
        out_scores[keep_arr[ok]] = score[ok]
        return out_ids, out_scores

    def map_rows(self, titles_per_row: Sequence[Sequence[str | None]], k: int | None = None) -> list:
        """Map each row's titles (first k if given); returns a list of int64 arrays (-1 unmatched)."""
        rows = [list(r)[:k] if k is not None else list(r) for r in titles_per_row]
        flat = [t for r in rows for t in r]
        ids = self.map(flat)
        out, s = [], 0
        for r in rows:
            out.append(ids[s : s + len(r)])
            s += len(r)
        return out

    def _map_encoder(self, uniq: list) -> tuple:
        if self._title_emb is None:
            self._title_emb = self._encode(list(self.titles)).astype(np.float32)
        q = self._encode(uniq).astype(np.float32)
        n_items = self._title_emb.shape[0]
        block = self.block_size or max(1, (1 << 25) // n_items)
        pos = np.empty(len(uniq), dtype=np.int64)
        best = np.empty(len(uniq), dtype=np.float64)
        for s in range(0, len(uniq), block):
            sims = q[s : s + block] @ self._title_emb.T
            arg = np.argmax(sims, axis=1)
            pos[s : s + block] = arg
            best[s : s + block] = sims[np.arange(len(arg)), arg]
        # guard against float32 rounding just below the threshold of an exact duplicate (cos = 1)
        accept = best >= self.threshold - 1e-6
        pos[~accept] = -1
        best[~accept] = np.nan
        return pos, best

    def _build_fuzzy(self) -> None:
        keys: list[str] = []
        pos: list[int] = []
        exact: dict[str, int] = {}
        for p, title in enumerate(self.titles):
            for key in title_aliases(title):
                keys.append(key)
                pos.append(p)
                exact.setdefault(key, p)
        self._fuzzy_keys, self._fuzzy_pos, self._exact = keys, np.asarray(pos, dtype=np.int64), exact

    def _map_fuzzy(self, uniq: list) -> tuple:
        from rapidfuzz import fuzz, process

        if self._fuzzy_keys is None:
            self._build_fuzzy()
        fuzzy_keys, fuzzy_pos, exact = self._fuzzy_keys, self._fuzzy_pos, self._exact
        assert fuzzy_keys is not None and fuzzy_pos is not None and exact is not None  # set by _build_fuzzy
        scorer = getattr(fuzz, self.scorer)
        pos = np.full(len(uniq), -1, dtype=np.int64)
        score = np.full(len(uniq), np.nan)
        for i, title in enumerate(uniq):
            key = normalise_title(title)
            if not key:
                continue
            if key in exact:
                pos[i], score[i] = exact[key], 100.0
                continue
            hit = process.extractOne(key, fuzzy_keys, scorer=scorer, processor=None, score_cutoff=self.fuzzy_cutoff)
            if hit is not None:
                pos[i], score[i] = fuzzy_pos[hit[2]], float(hit[1])
        return pos, score

    # ------------------------------------------------------------------ embeddings
    def _encode(self, texts: list) -> np.ndarray:
        if self.encoder is None:
            raise ValueError(ERR_NEEDS_ENCODER.format(what="embeddings"))
        if not texts:
            return np.zeros((0, int(getattr(self.encoder, "dim", 0) or 0)))
        emb = np.asarray(self.encoder.encode(list(texts)), dtype=np.float64)
        if emb.ndim != 2 or emb.shape[0] != len(texts):
            raise ValueError(f"encoder returned shape {emb.shape} for {len(texts)} texts; expected (n, d)")
        return normalise_rows(emb)

    def _embed_cached(self, texts: list) -> np.ndarray | None:
        missing = [t for t in dict.fromkeys(texts) if t not in self._emb_cache]
        if missing:
            for t, v in zip(missing, self._encode(missing)):
                self._emb_cache[t] = v
        return np.stack([self._emb_cache[t] for t in texts]) if texts else None

    def item_text(self, item_id: int, represent: str = "text") -> str:
        """The string embedded for a catalogue item: its ``text`` column (else its title) or, with
        ``represent="title"``, its catalogue title."""
        p = self._pos[int(item_id)]
        return str(self.titles[p] if represent == "title" else self.texts[p])

    def row_item_embeddings(
        self,
        titles_per_row: Sequence[Sequence[str | None]],
        mapped_per_row: Sequence[Sequence[Hashable]] | None = None,
        k: int = 10,
        represent: str = "text",
        dedupe: bool = True,
        unmapped: str = "raw",
    ) -> tuple:
        """Item embeddings of each row's top-k outputs: ``(emb (n, k, d), mask (n, k))`` (docs/FACTER.md §2, §4).

        Position j of row i embeds the mapped item's text when ``mapped_per_row[i][j]`` is an item id,
        the raw generated title when it is unmapped, and is masked out when the row has no title there
        (shorter output, blank title).  ``mapped_per_row`` defaults to :meth:`map_rows`.
        ``represent="title"`` embeds the mapped item's catalogue title instead of its text (what REPRO's
        SNSR code did); the default ``"text"`` follows docs/FACTER.md §2.  With ``dedupe`` (default) a
        repeated mapped item (or a repeated identical unmapped title) is masked out after its first
        position, as in Valid@k and NDCG (REPRO's mapper also dropped duplicate mappings).
        ``unmapped="drop"`` masks out unmapped positions instead of embedding their raw title (REPRO's
        SNSR embedded the mapped titles only: MetricsConfig.snsr_items = "mapped_title").
        """
        k = _check_k(k)
        if unmapped not in ("raw", "drop"):
            raise ValueError(f'unmapped must be "raw" or "drop", got {unmapped!r}')
        if represent not in ("text", "title"):
            raise ValueError(f'represent must be "text" or "title", got {represent!r}')
        titles = [list(r)[:k] for r in titles_per_row]
        mapped = self.map_rows(titles) if mapped_per_row is None else [list(m)[:k] for m in mapped_per_row]
        if len(mapped) != len(titles):
            raise ValueError(f"got {len(titles)} title rows but {len(mapped)} mapped rows")
        n = len(titles)
        mask = np.zeros((n, k), dtype=bool)
        texts, where = [], []
        for i, (tr, mr) in enumerate(zip(titles, mapped)):
            seen: set = set()
            for j in range(min(k, max(len(tr), len(mr)))):
                key: tuple[str, int | str]
                mid = mr[j] if j < len(mr) else -1
                if not is_unmapped(mid):
                    text, key = self.item_text(mid, represent), ("item", int(mid))
                elif unmapped == "raw" and j < len(tr) and not _is_blank(tr[j]):
                    text = str(tr[j]).strip()
                    key = ("raw", text)
                else:
                    continue
                if dedupe and key in seen:
                    continue
                seen.add(key)
                mask[i, j] = True
                texts.append(text)
                where.append((i, j))
        vec = self._embed_cached(texts)
        d = vec.shape[1] if vec is not None else int(getattr(self.encoder, "dim", 1) or 1)
        emb = np.zeros((n, k, d), dtype=np.float64)
        if where:
            ii, jj = np.asarray(where).T
            emb[ii, jj] = vec
        return emb, mask

    def row_embeddings(
        self,
        titles_per_row: Sequence[Sequence[str | None]],
        mapped_per_row: Sequence[Sequence[Hashable]] | None = None,
        k: int = 10,
        represent: str = "text",
        dedupe: bool = True,
        unmapped: str = "raw",
    ) -> np.ndarray:
        """Per-row normalised mean of the top-k item embeddings, (n, d); NaN rows have no item.

        ``normalised_row_means(*row_item_embeddings(...))``, the row vector used by SNSR and CFR.
        """
        return normalised_row_means(
            *self.row_item_embeddings(titles_per_row, mapped_per_row, k, represent, dedupe, unmapped)
        )


def valid_per_row(mapped_per_row: Sequence[Sequence[Hashable]], k: int = 10) -> np.ndarray:
    """Per-row Valid@k (docs/FACTER.md §4): distinct mapped ids among the first k positions, divided by k.

    Missing positions (shorter output) and unmapped ones (-1/None) count as invalid; an item mapped
    twice counts once.

    Parameters
    ----------
    mapped_per_row : sequence of sequences of hashable
        Each row's mapped item ids, in output order (``-1`` / ``None``: unmapped).
    k : int, default 10
        Cut-off (the denominator).

    Returns
    -------
    numpy.ndarray
        Shape (n,): Valid@k of each row, in [0, 1].

    Examples
    --------
    >>> valid_per_row([[3, 3, -1, 7], []], k=4).tolist()
    [0.5, 0.0]
    """
    k = _check_k(k)
    out = np.zeros(len(mapped_per_row))
    for i, r in enumerate(mapped_per_row):
        out[i] = len({x for x in list(r)[:k] if not is_unmapped(x)}) / k
    return out


def valid_at_k(mapped_per_row: Sequence[Sequence[Hashable]], k: int = 10) -> float:
    """Valid@k (docs/FACTER.md §4): mean over rows of :func:`valid_per_row`.

    Parameters
    ----------
    mapped_per_row : sequence of sequences of hashable
        Each row's mapped item ids, in output order.
    k : int, default 10
        Cut-off.

    Returns
    -------
    float
        Mean Valid@k over the rows.

    Examples
    --------
    >>> valid_at_k([[1, 2, 2, None], [5, 6, 7, 8]], k=4)  # (2/4 + 4/4) / 2
    0.75
    """
    if len(mapped_per_row) == 0:
        raise ValueError(ERR_NO_ROWS)
    return float(valid_per_row(mapped_per_row, k).mean())
