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
from dataclasses import dataclass, replace

from facterlab.config import RULE_EVIDENCES, RULE_KEYINGS
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

    attrs: tuple  # ((attr, value), ...) in the buffer's attribute order
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


# ---------------------------------------------------------------------- confirmed mining
def mcnemar_exact(b: int, c: int) -> float:
    """One-sided exact McNemar p-value that the b discordant pairs of one kind outnumber the c of the
    other by chance: P(X >= b) for X ~ Binomial(b + c, 1/2); 1.0 when there is no discordant pair.

    Parameters
    ----------
    b : int
        Pairs where the row's answer carries the feature and its twin's does not.
    c : int
        Pairs where the twin's answer carries it and the row's does not.

    Returns
    -------
    float
        The p-value, in (0, 1].

    Examples
    --------
    >>> round(mcnemar_exact(8, 0), 5), mcnemar_exact(0, 0), round(mcnemar_exact(3, 3), 3)
    (0.00391, 1.0, 0.656)
    """
    from scipy.stats import binom

    n = int(b) + int(c)
    if n == 0:
        return 1.0
    return float(binom.sf(int(b) - 1, n, 0.5))


def feature_counts(items: Sequence, exclude: frozenset = frozenset()) -> dict:
    """``{feature: how many of the items carry it}`` over a pair member's items (each a set of features; an
    item counts once per feature), leaving out the items that carry a feature of ``exclude``.

    With ``facter.rule_evidence = "top1"`` a member has one item, its top-1 (so the pair's discordance for f
    is the symmetric difference of the two top-1 feature sets); with ``"list"`` the items of its top-k list.

    >>> sorted(feature_counts([frozenset({"Comedy", "Romance"}), frozenset({"Comedy"}), frozenset()]).items())
    [('Comedy', 2), ('Romance', 1)]
    >>> feature_counts([frozenset({"Comedy", "Romance"}), frozenset({"Romance"})], frozenset({"Comedy"}))
    {'Romance': 1}
    """
    out: Counter = Counter()
    for it in items:
        if not (it & exclude):
            out.update(it)
    return dict(out)


def _discordance(row: dict, twin: dict):
    """(feature, True when the row's count is above the twin's) for every feature whose counts differ."""
    for f in row.keys() | twin.keys():
        x, y = row.get(f, 0), twin.get(f, 0)
        if x != y:  # a tie says nothing about a direction
            yield f, x > y


@dataclass(frozen=True)
class RuleEvidence:
    """Why a confirmed rule was made, or dropped: its discordant pairs, test and its group's flag rates.

    Parameters
    ----------
    rule : Rule
        The rule.
    made_after_pass : int
        1-based pass at whose end it was mined (in force from the next pass).
    b, c : int
        Discordant flagged pairs of the group: the row's answer carries the feature more than the twin's (b),
        less (c); in the top-1 item's features, or with ``facter.rule_evidence = "list"`` in how many items
        of the top-k lists carry it.
    p_value : float
        One-sided exact McNemar p-value (:func:`mcnemar_exact`).
    level : float
        The level it passed (``rule_level`` / the testable hypotheses at that pass: Tarone's Bonferroni).
    rate_before : float
        The rule's violations per row of its group in the pass it was mined from: (b - c) / group rows.
    rate_after : float or None
        The same in the next pass, with the rule in force (None until that pass ends).
    dropped : bool
        True when ``rate_after > rate_before / 2`` (the rule did not halve the violations it targets).
    """

    rule: Rule
    made_after_pass: int
    b: int
    c: int
    p_value: float
    level: float
    rate_before: float
    rate_after: float | None = None
    dropped: bool = False


class ConfirmedRules:
    """Repair rules from twin-confirmed differences (``facter.rule_mining = "confirmed"``; a facterlab
    extension, docs/FACTER.md §7).  Rules change only between passes:

    1. During pass t every FACTER row is observed: its group, whether it was flagged, the features of
       its top-1 item and of its twin's, and whether either prompt held a rule.
    2. At the end of pass t, for each group value ``attr = v`` and feature f seen in the group's flagged
       *rule-free* pairs (neither the row's nor its twin's prompt held a rule: a rule makes its group's
       answers differ from the twin's, and mining that difference would make rules out of rules), b counts
       the flagged pairs whose row's top-1 carries f and whose twin's does not, c the reverse.  With
       ``facter.rule_evidence = "list"`` the pair's evidence is, for each feature, how many items of the
       whole top-k list carry it (:meth:`observe` gets one feature sequence per item; :func:`feature_counts`): b
       counts the pairs whose row's list carries f more often than the twin's, c the reverse, ties drop
       out (the cells of :mod:`facterlab.facter.directional`'s ``level = "list"``).  A rule ``AVOID: (attr=v) -> (f-only)`` needs all of: the exact one-sided McNemar test
       (:func:`mcnemar_exact`) at ``level / m``, an effect ``(b - c) / (b + c) >= min_effect`` and
       ``b - c >= min_count``.  m is Tarone's count of *testable* pairs: a pair with N = b + c discordant
       rows cannot reach a p-value below 2^-N, so only the pairs with 2^-N <= level / m are counted (the
       least such m; Tarone 1990), which keeps the family-wise level of Bonferroni with fewer tests.  Rules
       are taken by p-value while fewer than ``max_rules`` are in force (and ``max_per_attr`` per group).
    3. At the end of pass t + 1, a rule made after pass t is dropped for good when the violations it
       targets did not fall by half: (b - c) per row of its group, in pass t + 1 (with the rule), above
       half of pass t's (a noisy "lower" would keep a rule that does nothing one time in two).

    Under an unbiased model the twin's and the row's features (or feature counts) are exchangeable, so
    given N each b is Binomial(N, 1/2) and each test rejects with probability <= level / m: the chance that any rule is
    made at a pass is at most ``level``.

    Parameters
    ----------
    level : float
        Family-wise level of the tests at each pass.
    min_effect : float
        Least (b - c) / (b + c).
    min_count : int
        Least b - c.
    max_rules : int
        The most rules in force at once.
    max_per_attr : int
        The most rules in force per group value.
    attrs : sequence of str, default ``PROTECTED``
        The protected attributes observed (the dataset's).

    Examples
    --------
    >>> cr = ConfirmedRules(level=0.05, min_effect=0.2, min_count=3, max_rules=10, max_per_attr=5)
    >>> for i in range(12):
    ...     cr.observe({"gender": "F", "age": "a", "occupation": "o"}, True, ("Romance",), ("Action",))
    ...     cr.observe({"gender": "M", "age": "a", "occupation": "o"}, True, ("Action",), ("Romance",))
    >>> [r.text() for r in cr.end_pass(1)]
    ['AVOID: (gender=F) -> (Romance-only)', 'AVOID: (gender=M) -> (Action-only)']
    """

    def __init__(
        self,
        level: float,
        min_effect: float,
        min_count: int,
        max_rules: int,
        max_per_attr: int,
        attrs: Sequence[str] = PROTECTED,
        evidence: str = "top1",
    ):
        if evidence not in RULE_EVIDENCES:
            raise ValueError(
                f"unknown rule evidence {evidence!r}; choose one of {', '.join(map(repr, RULE_EVIDENCES))}"
            )
        self.evidence = evidence
        self.attrs = tuple(attrs)
        self.level, self.min_effect = float(level), float(min_effect)
        self.min_count, self.max_rules, self.max_per_attr = int(min_count), int(max_rules), int(max_per_attr)
        self.active: list = []  # RuleEvidence in force
        self.retired: set = set()  # rules dropped for good
        self.log: list = []  # every RuleEvidence made or dropped, in order
        self._obs: list = []  # this pass: (attrs, flagged, row features, twin features)

    def observe(
        self,
        attrs: Mapping,
        flagged: bool,
        row_features: Sequence[str],
        twin_features: Sequence[str],
        ruled: bool = False,
        per_attr: Mapping | None = None,
    ) -> None:
        """Record one FACTER row of the current pass (``ruled``: the row's or its twin's prompt held a rule).

        ``row_features``, ``twin_features`` (and the per-attribute twins' features): the top-1 item's
        features (``facter.rule_evidence = "top1"``), or one feature sequence per item of the top-k list
        (``"list"``; counted by :func:`feature_counts`).

        ``per_attr`` (``facter.attribution`` other than ``"joint"``): ``{attr: (credited, features of the
        top-1 of the twin that flips attr alone, ruled)}``.  The row then counts for ``attr`` only when
        credited (``"per-attribute"``: a flagged row whose own twin of ``attr`` moved the answer past the
        bar; ``"per-attribute-all"``: every row), flagged or not, and its pair for ``attr`` is (row,
        that twin) instead of (row, all-attributes twin): a push on one attribute is not mined as an
        effect of another attribute correlated with it (docs/FACTER.md §7.3).  A row without
        ``per_attr`` counts only when flagged, for every attribute, against the all-attributes twin."""
        per = None
        if per_attr is not None:
            per = {a: (bool(c), self._items(f), bool(r)) for a, (c, f, r) in per_attr.items()}
        self._obs.append(
            (
                {a: str(attrs[a]) for a in self.attrs},
                bool(flagged),
                self._items(row_features),
                self._items(twin_features),
                bool(ruled),
                per,
            )
        )

    def _items(self, features) -> tuple:
        """A pair member's items as a tuple of feature sets: the top-1's features as one item (``"top1"``), or
        one set per item of the list (``"list"``: ``features`` is a sequence of per-item feature sequences)."""
        if self.evidence == "list":
            return tuple(frozenset(str(f) for f in (() if it is None else it)) for it in features)
        return (frozenset(str(f) for f in (() if features is None else features)),)

    def rules_for(self, attrs: Mapping) -> tuple:
        """The rules in force for a user with ``attrs`` (group values in ``self.attrs`` order)."""
        return tuple(
            e.rule for a in self.attrs for e in self.active if e.rule.attr == a and e.rule.value == str(attrs[a])
        )

    @staticmethod
    def tarone_m(sizes: Sequence[int], level: float) -> int:
        """Tarone's number of testable hypotheses: the least m >= 1 such that at most m of the tests
        (each with N discordant rows, smallest attainable p-value 2^-N) can reach ``level / m``.

        >>> ConfirmedRules.tarone_m([1, 1, 1, 2, 10, 12], 0.05)
        2
        """
        mins = sorted(0.5 ** int(n) for n in sizes)
        for m in range(1, len(mins) + 1):
            if sum(1 for x in mins if x <= level / m) <= m:
                return m
        return max(1, len(mins))

    def end_pass(self, pass_number: int) -> tuple:
        """Close pass ``pass_number`` (1-based): drop the rules that did not lower the violations they
        target, mine new ones; returns the rules in force for the next pass."""
        rows: dict = {}
        disc: dict = {}  # (attr, value, feature) -> [b, c] over the pass's flagged pairs (judging rules)
        free: dict = {}  # the same over the flagged rule-free pairs (mining rules)
        free_pairs: dict = {}  # (attr, value) -> [(row items, twin items)] of the rule-free pairs ("list")
        for attrs, flagged, r_items, t_items, ruled, per in self._obs:
            rf = feature_counts(r_items)
            for a in self.attrs:
                rows[(a, attrs[a])] = rows.get((a, attrs[a]), 0) + 1
            if not flagged and per is None:
                continue
            for a in self.attrs:
                if per is None:  # joint: the all-attributes twin's pair counts for every attribute
                    ta_items, ruled_a = t_items, ruled
                elif a in per and per[a][0]:  # per-attribute: credited, against the twin of a alone
                    ta_items, ruled_a = per[a][1], per[a][2]
                else:
                    continue
                if not ruled_a and self.evidence == "list":
                    free_pairs.setdefault((a, attrs[a]), []).append((r_items, ta_items))
                for f, more in _discordance(rf, feature_counts(ta_items)):
                    for table in (disc, free) if not ruled_a else (disc,):
                        bc = table.setdefault((a, attrs[a], f), [0, 0])
                        bc[0 if more else 1] += 1

        def targeted(rule: Rule) -> float:
            b, c = disc.get((rule.attr, rule.value, rule.feature), (0, 0))
            n = rows.get((rule.attr, rule.value), 0)
            return (b - c) / n if n else float("nan")

        kept = []
        for e in self.active:
            if e.made_after_pass == pass_number - 1:  # its first pass in force: judge it
                after = targeted(e.rule)
                dropped = not (after <= e.rate_before / 2)
                e = replace(e, rate_after=after, dropped=dropped)
                if dropped:
                    self.retired.add(e.rule)
                    self.log.append(e)
                    continue
            kept.append(e)
        self.active = kept
        tested = [(key, b, c) for key, (b, c) in free.items() if b + c > 0]
        if tested:
            lvl = self.level / self.tarone_m([b + c for _, b, c in tested], self.level)
            found = []
            for (a, v, f), b, c in tested:
                rule = Rule(a, v, f, "feature")
                if rule in self.retired or any(e.rule == rule for e in self.active):
                    continue
                p = self._passes(b, c, lvl)
                if p is not None:
                    found.append(RuleEvidence(rule, pass_number, b, c, p, lvl, targeted(rule)))
            for e in sorted(found, key=lambda e: (e.p_value, -(e.b - e.c), e.rule.text())):
                if len(self.active) >= self.max_rules:
                    break
                group = [
                    x.rule.feature for x in self.active if (x.rule.attr, x.rule.value) == (e.rule.attr, e.rule.value)
                ]
                if len(group) >= self.max_per_attr:
                    continue
                if group and self.evidence == "list" and not self._holds_without(e, group, free_pairs, lvl):
                    continue  # explained by the group's stronger rules: co-tagged items (class docstring)
                self.active.append(e)
                self.log.append(e)
        self._obs = []
        return tuple(e.rule for e in self.active)

    def _holds_without(self, e: RuleEvidence, stronger: Sequence[str], free_pairs: dict, level: float) -> bool:
        """``"list"`` evidence: whether rule ``e`` still passes its tests (McNemar at ``level``, effect, count)
        on its group's rule-free pairs counted without the items that carry a ``stronger`` feature."""
        excl = frozenset(stronger)
        b = c = 0
        for r_items, t_items in free_pairs.get((e.rule.attr, e.rule.value), ()):
            x = feature_counts(r_items, excl).get(e.rule.feature, 0)
            y = feature_counts(t_items, excl).get(e.rule.feature, 0)
            b, c = b + (x > y), c + (x < y)
        return self._passes(b, c, level) is not None

    def _passes(self, b: int, c: int, level: float) -> float | None:
        """The McNemar p-value of b against c discordant pairs when a rule passes all its tests (count
        ``b - c >= min_count``, effect ``(b - c) / (b + c) >= min_effect``, p-value at most ``level``), else None."""
        if b + c == 0 or b - c < self.min_count or (b - c) / (b + c) < self.min_effect:
            return None
        p = mcnemar_exact(b, c)
        return p if p <= level else None
