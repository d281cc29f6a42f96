"""The rules of the online loop (docs/FACTER.md §3 step 5 and §7): what the monitor mines and shows.

:class:`MonitorRules` holds the rule-mining state of one :class:`~facterlab.facter.monitor.FacterMonitor`
run and its two hooks into the loop:

- :meth:`MonitorRules.rules_for`, when a row's prompt is built: the AVOID rules a user with these
  attributes is shown now (mined from the violation FIFO, per attribute value or per attribute tuple,
  memoised per buffer version; or, with ``rule_mining = "confirmed"``, the twin-confirmed rules);
- :meth:`MonitorRules.observe`, after a row is flagged or not: a violation's (attributes, top-1 title,
  features) go into the FIFO (M = ``buffer_size``); with ``rule_mining = "contrast"`` the reference FIFO
  takes what the violations are contrasted with (the twin's answer with the twin Delta, else the group's
  unflagged outputs, committed when the next violation arrives so that rules change only on a
  violation); with ``"confirmed"`` every row's pair of answers is counted
  (:class:`~facterlab.facter.repair.ConfirmedRules`), and :meth:`MonitorRules.end_pass` changes the rules
  between passes.

The mining itself is :mod:`facterlab.facter.repair`'s; this module only keeps the loop's state of it.
"""

from __future__ import annotations

from collections.abc import Sequence

from facterlab.config import FacterConfig
from facterlab.data.dataset import PROTECTED
from facterlab.facter.repair import ConfirmedRules, ViolationBuffer, mine_rules, mine_value_rules

#: contrast mining keeps this many times the violation buffer's size of unflagged outputs
REFERENCE_FACTOR = 4

#: mined rule sets kept per buffer version before the memo is cleared
_MEMO_SIZE = 4096


class MonitorRules:
    """The rule-mining state of one monitor run (module docstring).

    Parameters
    ----------
    cfg : FacterConfig
        The method's settings (``buffer_size``, ``rule_mining``, ``rule_keying``, ``rule_min_count``,
        ``max_rules_per_attr``, ``rule_tie_order`` and, for confirmed mining, ``rule_level``,
        ``rule_min_effect``, ``max_rules``).
    repair : bool
        Whether rules are shown (FACTER); the baselines' prompts carry none.
    twin : bool
        Whether rows are asked with their counterfactual twin (``delta = "twin"``).

    Attributes
    ----------
    buffer : ViolationBuffer
        The violation FIFO the rules are mined from.
    reference : ViolationBuffer or None
        With ``rule_mining = "contrast"``: what the violations are contrasted with; else None.
    confirmed : ConfirmedRules or None
        With the twin and ``rule_mining = "confirmed"`` (FACTER only): the twin-confirmed rules; else None.
    """

    def __init__(self, cfg: FacterConfig, repair: bool, twin: bool, attrs: Sequence[str] = PROTECTED):
        self.cfg, self.repair, self.twin = cfg, repair, twin
        self.attrs = tuple(attrs)  # the dataset's protected attributes
        self.buffer = ViolationBuffer(cfg.buffer_size, self.attrs)
        # contrast mining: the group's other (unflagged) outputs, committed when a violation arrives
        self.contrast = cfg.rule_mining == "contrast"
        ref_size = cfg.buffer_size if twin else REFERENCE_FACTOR * cfg.buffer_size
        self.reference = ViolationBuffer(ref_size, self.attrs) if self.contrast else None
        # confirmed mining (twin only): rules from twin-confirmed, enriched differences, changed between passes
        self.confirmed = (
            ConfirmedRules(
                cfg.rule_level,
                cfg.rule_min_effect,
                cfg.rule_min_count,
                cfg.max_rules,
                cfg.max_rules_per_attr,
                self.attrs,
                getattr(cfg, "rule_evidence", "top1"),
            )
            if repair and twin and cfg.rule_mining == "confirmed"
            else None
        )
        self._unflagged: list = []
        self._memo: dict = {}

    @property
    def observes_every_row(self) -> bool:
        """Whether :meth:`observe` needs rows that were not flagged too (contrast or confirmed mining).

        Returns
        -------
        bool
            False when only violations change the state (the FIFO alone).
        """
        return self.reference is not None or self.confirmed is not None

    def rules_for(self, attrs: dict) -> tuple:
        """Rules mined from the current buffer for a user with ``attrs`` (empty for baselines).

        Parameters
        ----------
        attrs : dict
            The user's protected attributes (``gender``, ``age``, ``occupation``) as strings.

        Returns
        -------
        tuple of Rule
            The rules, in prompt order (memoised per buffer version).
        """
        if not self.repair:
            return ()
        if self.confirmed is not None:
            return self.confirmed.rules_for(attrs)
        if self.cfg.rule_keying == "per_attr":  # memoised per attribute value: many users share each
            out: tuple = ()
            for a in self.attrs:
                vkey = (self.buffer.version, a, attrs[a])
                part = self._memo.get(vkey)
                if part is None:
                    if len(self._memo) > _MEMO_SIZE:
                        self._memo.clear()
                    part = self._memo[vkey] = mine_value_rules(
                        self.buffer,
                        a,
                        attrs[a],
                        self.cfg.rule_min_count,
                        self.cfg.max_rules_per_attr,
                        getattr(self.cfg, "rule_tie_order", "by_name"),
                        reference=self.reference,
                    )
                out += part
            return out
        key = (self.buffer.version, tuple(attrs[a] for a in self.attrs))
        r = self._memo.get(key)
        if r is None:
            if len(self._memo) > _MEMO_SIZE:
                self._memo.clear()
            r = mine_rules(
                self.buffer,
                attrs,
                self.cfg.rule_keying,
                self.cfg.rule_min_count,
                self.cfg.max_rules_per_attr,
                getattr(self.cfg, "rule_tie_order", "by_name"),
                reference=self.reference,
            )
            self._memo[key] = r
        return r

    def observe(
        self,
        attrs: dict,
        violated: bool,
        own: tuple,
        twin_own: tuple | None = None,
        rules: tuple = (),
        twin_attrs: dict | None = None,
        per_attr: dict | None = None,
        evidence: tuple | None = None,
    ) -> None:
        """Take one processed row into the state: its violation, or (contrast, confirmed) its other output.

        Called for every violation, and for every row when :attr:`observes_every_row`.

        Parameters
        ----------
        attrs : dict
            The row's protected attributes as strings.
        violated : bool
            Whether the row was flagged by the adaptive bar.
        own : tuple of (str, tuple)
            The (title, features) of the row's top-1 output (what a violation pushes).
        twin_own : tuple of (str, tuple) or None, default None
            The same for its twin's answer; needed with the twin when ``reference`` or ``confirmed``
            is set.
        rules : tuple of Rule, default ()
            The rules the row was shown.
        twin_attrs : dict or None, default None
            The twin's protected attributes; needed with ``confirmed``.
        per_attr : dict or None, default None
            ``facter.attribution = "per-attribute"``, flagged rows: ``{attr: (credited, (title, features) of
            the top-1 of the twin that flips attr alone, that twin's attributes)}``.
        evidence : tuple or None, default None
            ``facter.rule_evidence = "list"``: ``(row's list, twin's list, {attr: list of the twin that flips
            attr alone})``, each the features of every item of the top-k list; confirmed mining compares these
            instead of the top-1 items' features.  None: the top-1 features of ``own`` and ``twin_own``.
        """
        if violated:
            if self.reference is not None and self.twin:  # the violation's own counterfactual: its twin's answer
                assert twin_own is not None
                self.reference.push(attrs, *twin_own)
            elif self.reference is not None:
                for entry in self._unflagged:
                    self.reference.push(*entry)
                self._unflagged.clear()
            self.buffer.push(attrs, *own)
        elif self.reference is not None and not self.twin:
            self._unflagged.append((attrs, *own))
        if self.confirmed is not None:
            assert twin_own is not None and twin_attrs is not None
            row_ev, twin_ev, per_ev = (own[1], twin_own[1], None) if evidence is None else evidence
            self.confirmed.observe(
                attrs,
                bool(violated),
                row_ev,
                twin_ev,
                ruled=bool(rules) or bool(self.confirmed.rules_for(twin_attrs)),
                per_attr=None
                if per_attr is None
                else {
                    a: (
                        credited,
                        own_a[1] if per_ev is None else per_ev[a],
                        bool(rules) or bool(self.confirmed.rules_for(attrs_a)),
                    )
                    for a, (credited, own_a, attrs_a) in per_attr.items()
                },
            )

    def end_pass(self, passes_done: int) -> None:
        """Close a pass: confirmed mining changes its rules here (nothing to do otherwise).

        Parameters
        ----------
        passes_done : int
            Passes completed so far (1-based).
        """
        if self.confirmed is not None:
            self.confirmed.end_pass(passes_done)
