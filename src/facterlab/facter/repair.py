"""Violation buffer and repair-rule mining (FACTER §3.3 prompt repair; docs/FACTER.md §3).

On an adaptive violation S_t > Q_t the row's protected attributes, its top-1 item and the item's
features are pushed into a FIFO buffer of M = 50 entries.  Rules for a user are mined from the buffer:

- ``per_attr`` keying (REPRO, default): for each attribute value v of the user (gender, age,
  occupation in that order), count over buffered violations with attr = v the item features
  (genres / categories) and, separately, the exact item titles; each feature with count >= n (3)
  gives ``AVOID: (attr=v) -> (feature-only)``, then each title with count >= n gives
  ``AVOID: (attr=v) -> (title)``; features first, then titles, each by count (desc), equal counts in
  the order of ``tie_order`` (docs/PROTOCOL.md): ``"first_seen"`` (REPRO's ``Counter.most_common``:
  the order in which the buffer, oldest entry first, first shows them) or ``"by_name"`` (facterlab);
  at most 5 rules per attribute.
- ``tuple`` keying: the same on buffered violations with the user's whole protected tuple, the rule
  printed as ``(tuple=gender=F, age=.., occupation=..)``.

Contrast mining (``rule_mining = "contrast"``, a facterlab extension, docs/FACTER.md §7): counting
names the features that are frequent among a group's violations, which are mostly the features that
are frequent in the group's outputs anyway (Drama, Comedy).  Contrast mining names a feature only when
it is *enriched* among the group's violations over the group's other (unflagged) outputs, kept in a
``reference`` buffer:

    E(f) = ((a + 1/2) / (n1 + 1)) / ((b + 1/2) / (n0 + 1))

with a of the n1 buffered violations of the group carrying f and b of its n0 reference outputs; a rule
needs a >= rule_min_count and E(f) >= 1.5 (:data:`CONTRAST_MIN_ENRICHMENT`), ranked by E (then a,
then name).  Titles are mined the same way after the features.

>>> buf = ViolationBuffer(maxlen=50)
>>> for g in ["Romance", "Romance", "Romance"]:
...     buf.push({"gender": "F", "age": "25-34", "occupation": "writer"}, "Sleepless (1993)", [g, "Comedy"])
>>> [r.text() for r in mine_rules(buf, {"gender": "F", "age": "18-24", "occupation": "writer"})]
['AVOID: (gender=F) -> (Comedy-only)', 'AVOID: (gender=F) -> (Romance-only)', 'AVOID: (gender=F) -> (Sleepless (1993))', 'AVOID: (occupation=writer) -> (Comedy-only)', 'AVOID: (occupation=writer) -> (Romance-only)', 'AVOID: (occupation=writer) -> (Sleepless (1993))']
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from facterlab.config import RULE_KEYINGS
from facterlab.data.dataset import PROTECTED
from facterlab.datatypes import Rule


@dataclass(frozen=True)
class Violation:
    """One buffered violation: protected attributes, top-1 title and its features.

    Parameters
    ----------
    attrs : tuple of (str, str)
        ``((attr, value), ...)`` in the buffer's attribute order, values as strings.
    title : str
        The top-1 item's title ("" if none).
    features : tuple of str
        The top-1 item's features (genres / categories).
    """

    attrs: tuple  # ((attr, value), ...) in PROTECTED order
    title: str
    features: tuple


class ViolationBuffer:
    """FIFO of the last ``maxlen`` violations (M = 50).  ``version`` counts pushes (cheap change test).

    Parameters
    ----------
    maxlen : int, default 50
        Buffer size M (> 0); the oldest entry is dropped when full.
    attrs : sequence of str, default ``PROTECTED``
        The protected attributes recorded, in order.

    Attributes
    ----------
    entries : collections.deque of Violation
        The buffered violations, oldest first.
    version : int
        Number of pushes so far.

    Reference: [fayyazi2025facter] (docs/references.bib).
    """

    def __init__(self, maxlen: int = 50, attrs: Sequence[str] = PROTECTED):
        if maxlen <= 0:
            raise ValueError(f"buffer size must be positive, got {maxlen}")
        self.maxlen = int(maxlen)
        self.attrs = tuple(attrs)
        self.entries: deque = deque(maxlen=self.maxlen)
        self.version = 0

    def push(self, attrs: Mapping, title: str, features: Sequence[str] = ()) -> None:
        """Append one violation (dropping the oldest when full) and bump ``version``.

        Parameters
        ----------
        attrs : mapping
            The user's protected attributes; every name in ``self.attrs`` must be a key (values
            are stored as str).
        title : str
            The top-1 title; a falsy value is stored as "".
        features : sequence of str, default ()
            The top-1 item's features; None is treated as empty.
        """
        self.entries.append(
            Violation(
                tuple((a, str(attrs[a])) for a in self.attrs),
                str(title) if title else "",
                tuple(str(f) for f in features or ()),
            )
        )
        self.version += 1

    def __len__(self) -> int:
        return len(self.entries)

    def snapshot(self) -> list:
        """The buffered violations as a list, oldest first.

        Returns
        -------
        list of Violation
            A copy of the buffer's entries.
        """
        return list(self.entries)


TIE_ORDERS = ("first_seen", "by_name")
#: the least enrichment (violations over the group's other outputs) a contrast rule needs
CONTRAST_MIN_ENRICHMENT = 1.5


def enrichment(a: int, n1: int, b: int, n0: int) -> float:
    """E = ((a + 1/2)/(n1 + 1)) / ((b + 1/2)/(n0 + 1)): how much more often a feature is among the
    group's violations (a of n1) than among its other outputs (b of n0), with half-counts.

    Parameters
    ----------
    a : int
        Violations of the group that carry the feature.
    n1 : int
        Violations of the group.
    b : int
        Reference (unflagged) outputs of the group that carry the feature.
    n0 : int
        Reference outputs of the group.

    Returns
    -------
    float
        The enrichment E (> 0; 1 means no enrichment).

    Examples
    --------
    >>> round(enrichment(4, 5, 1, 20), 3), round(enrichment(4, 5, 16, 20), 3)
    (10.5, 0.955)
    """
    return ((a + 0.5) / (n1 + 1.0)) / ((b + 0.5) / (n0 + 1.0))


def _contrast_rules(viol, ref, attr: str, value: str, min_count: int, max_rules: int) -> list:
    out = []
    for kind in ("feature", "title"):
        cv: Counter = Counter()
        cr: Counter = Counter()
        for entries, c in ((viol, cv), (ref, cr)):
            for e in entries:
                if kind == "feature":
                    c.update(list(dict.fromkeys(e.features)))
                elif e.title:
                    c[e.title] += 1
        scored = [(enrichment(a, len(viol), cr.get(f, 0), len(ref)), a, f) for f, a in cv.items() if a >= min_count]
        scored = [x for x in scored if x[0] >= CONTRAST_MIN_ENRICHMENT]
        out += [Rule(attr, value, f, kind) for _, _, f in sorted(scored, key=lambda x: (-x[0], -x[1], x[2]))]
    return out[:max_rules]


def _ranked(counts: Counter, tie_order: str) -> list:
    if tie_order == "by_name":
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return sorted(counts.items(), key=lambda kv: -kv[1])  # stable: insertion (first-seen) order on ties


def _attr_rules(entries, attr: str, value: str, min_count: int, max_rules: int, tie_order: str = "by_name") -> list:
    feats: Counter = Counter()
    titles: Counter = Counter()
    for e in entries:
        feats.update(list(dict.fromkeys(e.features)))  # each feature once per entry, in its order
        if e.title:
            titles[e.title] += 1
    out = [Rule(attr, value, f, "feature") for f, c in _ranked(feats, tie_order) if c >= min_count]
    out += [Rule(attr, value, t, "title") for t, c in _ranked(titles, tie_order) if c >= min_count]
    return out[:max_rules]


def mine_rules(
    buffer: ViolationBuffer,
    user_attrs: Mapping,
    keying: str = "per_attr",
    min_count: int = 3,
    max_per_attr: int = 5,
    tie_order: str = "by_name",
    reference: ViolationBuffer | None = None,
) -> tuple:
    """Rules that apply to a user with ``user_attrs`` given the buffered violations (see module doc);
    with a ``reference`` buffer of unflagged outputs, contrast mining (module doc).

    Parameters
    ----------
    buffer : ViolationBuffer
        The buffered violations.
    user_attrs : mapping
        The user's protected attributes; values are compared as str.
    keying : {"per_attr", "tuple"}, default "per_attr"
        Mine per attribute value, or on the user's whole protected tuple.
    min_count : int, default 3
        Least count (>= 1) of a feature or title among the selected violations for a rule.
    max_per_attr : int, default 5
        Most rules (>= 0) per attribute value (per tuple with ``"tuple"`` keying).
    tie_order : {"by_name", "first_seen"}, default "by_name"
        Order of equal counts (count mining only; contrast rules break ties by name).
    reference : ViolationBuffer or None, default None
        The group's other (unflagged) outputs; given, contrast mining is used; None means counting.

    Returns
    -------
    tuple of Rule
        Feature rules then title rules for each attribute (gender, age, occupation order); empty
        when the buffer is empty.

    Examples
    --------
    >>> b = ViolationBuffer()
    >>> for _ in range(3): b.push({"gender": "M", "age": "18-24", "occupation": "x"}, "Heat (1995)", [])
    >>> [r.text() for r in mine_rules(b, {"gender": "M", "age": "18-24", "occupation": "x"}, keying="tuple")]
    ['AVOID: (tuple=gender=M, age=18-24, occupation=x) -> (Heat (1995))']
    >>> mine_rules(b, {"gender": "F", "age": "56+", "occupation": "y"})
    ()

    Reference: [fayyazi2025facter] (docs/references.bib).
    """
    if keying not in RULE_KEYINGS:
        raise ValueError(f"unknown rule_keying {keying!r}; choose one of {', '.join(map(repr, RULE_KEYINGS))}")
    if tie_order not in TIE_ORDERS:
        raise ValueError(f"unknown rule tie order {tie_order!r}; choose one of {', '.join(map(repr, TIE_ORDERS))}")
    if min_count < 1 or max_per_attr < 0:
        raise ValueError("rule_min_count must be >= 1 and max_rules_per_attr >= 0")
    entries = buffer.snapshot()
    if not entries:
        return ()
    if keying == "tuple":
        key = tuple((a, str(user_attrs[a])) for a in buffer.attrs)
        sel = [e for e in entries if e.attrs == key]
        label = ", ".join(f"{a}={v}" for a, v in key)
        if reference is None:
            return tuple(_attr_rules(sel, "tuple", label, min_count, max_per_attr, tie_order))
        ref_sel = [e for e in reference.entries if e.attrs == key]
        return tuple(_contrast_rules(sel, ref_sel, "tuple", label, min_count, max_per_attr))
    return tuple(
        r
        for a in buffer.attrs
        for r in mine_value_rules(buffer, a, str(user_attrs[a]), min_count, max_per_attr, tie_order, reference)
    )


def mine_value_rules(
    buffer: ViolationBuffer,
    attr: str,
    value: str,
    min_count: int = 3,
    max_per_attr: int = 5,
    tie_order: str = "by_name",
    reference: ViolationBuffer | None = None,
) -> tuple:
    """The ``per_attr`` rules of one attribute value: the part of :func:`mine_rules` that a user with
    ``attr = value`` gets (``mine_rules`` concatenates them over the user's attributes), so that a caller
    can memoise them per value rather than per user.

    Parameters
    ----------
    buffer : ViolationBuffer
        The buffered violations.
    attr : str
        The attribute; must be one of ``buffer.attrs``.
    value : str
        The attribute value; compared as-is with the stored strings, so pass a str.
    min_count : int, default 3
        Least count of a feature or title for a rule (not validated here, unlike :func:`mine_rules`).
    max_per_attr : int, default 5
        Most rules returned.
    tie_order : {"by_name", "first_seen"}, default "by_name"
        Order of equal counts (count mining only; not validated here).
    reference : ViolationBuffer or None, default None
        The group's other (unflagged) outputs; given, contrast mining is used.

    Returns
    -------
    tuple of Rule
        Feature rules then title rules for ``attr = value``; empty when no buffered violation has it.

    Examples
    --------
    >>> b = ViolationBuffer()
    >>> for _ in range(3): b.push({"gender": "M", "age": "18-24", "occupation": "x"}, "Heat (1995)", ["Crime"])
    >>> [r.text() for r in mine_value_rules(b, "age", "18-24")]
    ['AVOID: (age=18-24) -> (Crime-only)', 'AVOID: (age=18-24) -> (Heat (1995))']
    """
    if attr not in buffer.attrs:
        raise ValueError(f"unknown attribute {attr!r}; the buffer keys {', '.join(map(repr, buffer.attrs))}")
    if tie_order not in TIE_ORDERS:
        raise ValueError(f"unknown rule tie order {tie_order!r}; choose one of {', '.join(map(repr, TIE_ORDERS))}")
    if min_count < 1 or max_per_attr < 0:
        raise ValueError("rule_min_count must be >= 1 and max_rules_per_attr >= 0")
    i = buffer.attrs.index(attr)
    value = str(value)  # the buffer stores values as text
    sel = [e for e in buffer.entries if e.attrs[i][1] == value]
    if not sel:
        return ()
    if reference is None:
        return tuple(_attr_rules(sel, attr, value, min_count, max_per_attr, tie_order))
    ref_sel = [e for e in reference.entries if e.attrs[i][1] == value]
    return tuple(_contrast_rules(sel, ref_sel, attr, value, min_count, max_per_attr))
