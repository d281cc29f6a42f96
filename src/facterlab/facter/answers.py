"""From a model's answer to catalogue items (docs/PROTOCOL.md): the postprocessing every FACTER phase uses.

- :func:`make_postprocess` builds ``post(rows, predictions) -> [(mapped ids, top-1 id, top-1 raw title)]``:
  open generation maps free titles through the catalogue mapper, re-ranking maps titles to the row's
  candidates by position; ``top1`` chooses how the top-1 item is picked.
- :func:`candidate_ids_for_titles`: a re-ranking answer's titles as candidate ids, duplicate titles
  kept as distinct items.

Both are re-exported by :mod:`facterlab.facter.pipeline`, where they lived before issue 32.
"""

from __future__ import annotations

import pandas as pd


def candidate_ids_for_titles(titles, candidates, titles_by_id: dict) -> list:
    """Item ids of a re-ranking answer: each title takes the first candidate with that title that no
    earlier position has taken (-1 when no unused candidate has it).

    Candidates keep their ids by position, so two candidates with the same title (ML-100K has 18
    duplicated titles) stay two distinct items: the first occurrence of the title in the answer is
    the first such candidate in the list, the second the second.

    Parameters
    ----------
    titles : sequence of str
        The answer's titles, best first.
    candidates : sequence of int
        The row's candidate item ids, in list order; each must be a key of ``titles_by_id``.
    titles_by_id : dict of int to str
        Catalogue item id -> title.

    Returns
    -------
    list of int
        One item id per title, -1 where no unused candidate has the title.

    Examples
    --------
    >>> candidate_ids_for_titles(["X", "Y", "X", "Z"], [5, 9, 7], {5: "X", 9: "X", 7: "Y"})
    [5, 7, 9, -1]
    """
    from collections import deque

    free: dict = {}
    for c in candidates:
        free.setdefault(titles_by_id[int(c)], deque()).append(int(c))
    out = []
    for t in titles:
        q = free.get(str(t))
        out.append(q.popleft() if q else -1)
    return out


def make_postprocess(protocol: str, mapper, items: pd.DataFrame, k: int = 10, top1: str = "position0"):
    """``post(rows, predictions) -> [(mapped ids, top-1 id, top-1 raw title)]``.

    Re-ranking: titles map to the row's candidate ids by position (:func:`candidate_ids_for_titles`:
    duplicate titles stay distinct items).  Open generation: the first k titles go through the
    catalogue mapper (one call per batch).

    ``top1`` (FacterConfig.top1, docs/PROTOCOL.md): ``"position0"`` (facterlab) takes the item at
    position 0, unmapped (-1, scored by its raw title) when that title maps to nothing;
    ``"first_mapped"`` (REPRO) takes the first position that maps to a catalogue item, and the raw
    title of position 0 only when no position maps.

    Parameters
    ----------
    protocol : {"open", "rank"}
        The prediction protocol; anything but ``"rank"`` is treated as open generation.
    mapper : CatalogueMapper
        Maps free titles to catalogue ids (``mapper.map(titles) -> ids``, -1 for none); used for
        open generation only, and only for titles that are not exact catalogue titles.
    items : pandas.DataFrame
        The catalogue, indexed by ``item_id``, with a ``title`` column.
    k : int, default 10
        Titles kept per answer for open generation.
    top1 : {"position0", "first_mapped"}, default "position0"
        How the top-1 item is chosen (above).

    Returns
    -------
    callable
        ``post(rows, predictions) -> list of (list of int, int, str)``: per row the mapped ids
        (-1 = unmapped), the top-1 id and the top-1 raw title ("" for an empty answer). ``rows``
        are row dicts (with ``candidates`` for ``"rank"``), ``predictions`` the matching
        :class:`~facterlab.datatypes.Prediction` objects.
    """
    if top1 not in ("position0", "first_mapped"):
        raise ValueError(f"unknown top1 {top1!r}; choose 'position0' or 'first_mapped'")
    titles_by_id = items["title"].astype(str).to_dict()
    exact: dict = {}
    for iid, t in titles_by_id.items():
        exact.setdefault(t, int(iid))

    def pick(mr: list, ts: list) -> tuple:
        raw = str(ts[0]) if ts else ""
        if top1 == "first_mapped":
            for m, t in zip(mr, ts):
                if int(m) >= 0:
                    return int(m), str(t)
            return -1, raw
        return (int(mr[0]) if mr else -1), raw

    def post(rows: list, preds: list) -> list:
        if protocol == "rank":
            out = []
            for row, pr in zip(rows, preds):
                ts = [str(t) for t in pr.titles]
                mapped = candidate_ids_for_titles(ts, row["candidates"], titles_by_id)
                out.append((mapped, *pick(mapped, ts)))
            return out
        lists = [[str(t) for t in list(pr.titles)[:k]] for pr in preds]
        # exact catalogue titles map to themselves (cosine 1 / fuzzy 100: what the mapper would return);
        # only the other titles go through the mapper, in one call per batch
        unknown = sorted({t for ts in lists for t in ts if t not in exact})
        found = dict(zip(unknown, (int(m) for m in mapper.map(unknown)))) if unknown else {}
        out = []
        for ts in lists:
            mr = [exact[t] if t in exact else found[t] for t in ts]
            out.append((mr, *pick(mr, ts)))
        return out

    return post
