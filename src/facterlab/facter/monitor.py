"""The online phase of FACTER (Algorithm 1 / §3.3; docs/FACTER.md §3), with exact optimistic batching.

For T passes over the test rows in a fixed order (threshold and violation buffer carried across
passes), for each row t:

1. system prompt = FACTER prompt with the rules mined so far for this user's attribute values
   (:func:`facterlab.facter.repair.mine_rules`), optionally announcing Q_t (``announce_threshold``);
2. predict (open generation or re-ranking) and map the output to catalogue items;
3. S_t = d_t + lambda Delta_t against the calibration set (:class:`OnlineScorer`);
4. flags V(t) = S_t > Q_t (adaptive), V0(t) = S_t > Q0 (fixed), corrected variants;
5. if S_t > Q_t: push (attributes, top-1 item, its features) into the FIFO buffer (M = 50);
   then update Q with the configured rule (:mod:`facterlab.facter.threshold`).

Baselines (Neutral, Fair) use the same loop with a static system prompt, no rule mining, one pass.

facterlab extensions (docs/FACTER.md §7; :mod:`facterlab.facter.twins`): with ``delta = "twin"`` each
row is asked together with its counterfactual twin (protected attributes flipped, same history and
seed, the twin group's own rules) and Delta is the distance between the two answers (:class:`TwinScorer`);
with ``threshold = "null"`` the flag is Delta > Q_null (the placebo quantile), a bar that does not move;
``rule_mining = "contrast"`` and ``"confirmed"`` mine the rules otherwise (:mod:`facterlab.facter.monitor_rules`).

The scorers of step 3 are :mod:`facterlab.facter.scorers`; the rule-mining state of steps 1 and 5
(FIFO, contrast reference, confirmed rules) is :mod:`facterlab.facter.monitor_rules`.

Optimistic batching (exact): predictions are made ahead of the walk, with the prompts of the current
state, and kept with the request they were made for.  The rows are then processed strictly in order;
when the walk reaches a row, its request is rebuilt from the state at its turn, and a prediction made
for another request (stale: a violation earlier changed the rules, or the announced Q) is discarded.
A row without a valid prediction triggers one recommender call: the row itself plus the next rows
within ``lookahead`` positions that lack a valid prediction, grouped the way the recommender would
batch them (``plan_batches``: one prompt-length bucket for the LLM), at most ``batch_size`` rows.
Because a recommender's answer depends only on its request, the records equal those of processing
one row at a time, exactly; ``n_repredicted`` counts requests made for rows whose earlier prediction
went stale, ``n_calls`` the recommender calls.  A recommender whose ``plan_batches`` puts each request
alone (the likelihood ranker scores one prompt at a time) is therefore never asked for rows ahead.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from facterlab.config import FacterConfig
from facterlab.datatypes import Recommender
from facterlab.facter import prompts as _prompts
from facterlab.facter.conformal import ReproCountCorrection, corrected_threshold

# violation_summary, REFERENCE_FACTOR and the scorers are re-exported: they lived here before the monitor
# was split along its seams (issue 32); old imports work
from facterlab.facter.monitor_result import MonitorResult, violation_summary  # noqa: F401
from facterlab.facter.monitor_rules import REFERENCE_FACTOR, MonitorRules  # noqa: F401
from facterlab.facter.scorers import NO_NEIGHBOUR_SEARCH, CalibrationState, OnlineScorer, TwinScorer  # noqa: F401
from facterlab.facter.threshold import OnlineThreshold
from facterlab.facter.twins import answer_vectors, mean_over_draws, statistic_distance, twin_row, with_draws
from facterlab.progress import Progress

log = logging.getLogger(__name__)

#: predictions made ahead between two adaptations of the rows per call
ADAPT_WINDOW = 16

UNKNOWN_GENERATION = "UNKNOWN_GENERATION"  # REPRO's title for a violation whose output was empty


def request_seed(seed: int, row_id: int, pass_index: int = 0) -> int:
    """Per-request sampling seed: a pure function of (run seed, row id, pass index).

    Pass 0 of FACTER shares its seeds with the baselines (paired comparison); later passes draw anew.

    Parameters
    ----------
    seed : int
        The run seed.
    row_id : int
        The interaction row's id.
    pass_index : int, default 0
        0-based pass number.

    Returns
    -------
    int
        A seed in [0, 2**31 - 1] (from a 4-byte BLAKE2b digest).

    Examples
    --------
    >>> request_seed(0, 5, 0) == request_seed(0, 5, 0) != request_seed(0, 5, 1)
    True
    """
    h = hashlib.blake2b(f"{int(seed)}|{int(row_id)}|{int(pass_index)}".encode(), digest_size=4).digest()
    return int.from_bytes(h, "little") & 0x7FFFFFFF


def prompt_items(items: pd.DataFrame) -> dict:
    """item_id -> title mapping given to ``prompts.build_request`` (a dict lookup is ~100x faster than
    a DataFrame lookup per row; requests then carry no history features in ``meta``, the fakes read
    them from their own item table).

    Parameters
    ----------
    items : pandas.DataFrame
        The catalogue, indexed by ``item_id`` or with an ``item_id`` column, with a ``title`` column.

    Returns
    -------
    dict of int to str
        Item id -> title.
    """
    tbl = items.set_index("item_id") if "item_id" in items.columns else items
    return {int(i): str(t) for i, t in zip(tbl.index, tbl["title"])}


def system_text(request) -> str:
    """The system message of a request ("" when it has none): the prompt a row had at its turn."""
    return next((c for r, c in request.messages if r == "system"), "")


def baseline_requests(settings: MonitorSettings, rows: pd.DataFrame, items, prompts: Any = None, twins=None) -> list:
    """Every request that the one-pass baseline ``settings.system_kind`` asks, known before it runs.

    A baseline's system prompt is static (no rules, no announcement), so its requests do not depend
    on any answer: each row's request under that prompt with the seeds of pass 0 and, with
    ``facter.delta = "twin"``, each twin's, ``facter.draws`` times
    (:func:`facterlab.facter.twins.with_draws`), as :class:`FacterMonitor` builds them.  Used to ask them
    earlier, together with other phases' requests (:mod:`facterlab.facter.prefetch`).

    Parameters
    ----------
    settings : MonitorSettings
        The run's settings with the baseline's ``system_kind`` (not ``"facter"``).
    rows : pandas.DataFrame
        The test rows.
    items : pandas.DataFrame or dict
        The catalogue (or the item id -> title mapping of :func:`prompt_items`).
    prompts : module or None, default None
        The prompt module; None means :mod:`facterlab.facter.prompts`.
    twins : sequence of mapping or None, default None
        Each row's twin attributes (``facter.delta = "twin"``).

    Returns
    -------
    list of PromptRequest
        The rows' requests, then (twin Delta) the twins', draw by draw.
    """
    if settings.system_kind == "facter":
        raise ValueError("FACTER's requests depend on the rules it mines: only a baseline's are known before it runs")
    prompts = _prompts if prompts is None else prompts
    system = prompts.system_prompt(settings.system_kind, (), announce=None)
    titles = items if isinstance(items, dict) else prompt_items(items)

    def build(row: dict):
        seed = request_seed(settings.seed, int(row["row_id"]), 0)
        return prompts.build_request(row, titles, system, settings.protocol, settings.k, settings.domain, seed)

    dicts = rows.reset_index(drop=True).to_dict("records")
    reqs = [build(r) for r in dicts]
    if settings.facter.delta != "twin":
        return reqs
    if twins is None or len(twins) != len(dicts):
        raise ValueError("facter.delta = 'twin' needs the twins' attributes (one per row)")
    twin_reqs = [build(twin_row(r, {a: str(v) for a, v in t.items()})) for r, t in zip(dicts, twins)]
    return with_draws(reqs + twin_reqs, int(settings.facter.draws))


@dataclass(frozen=True)
class MonitorSettings:
    """How the online loop runs: everything but the data and the collaborators of :class:`FacterMonitor`.

    ``facter``: the method's settings (alpha, lambda, threshold rule, buffer); ``n_calib``: calibration
    size n; ``protocol`` ``"open"``/``"rank"``; ``k`` list length; ``domain`` ("movie", "product") for
    the prompts; ``seed`` the run seed of :func:`request_seed`; ``system_kind`` ``"facter"`` (rules mined
    and shown) or a static baseline prompt (``"neutral"``, ``"fair"``, ``"empty"``); ``batch_size`` rows
    per recommender call; ``lookahead`` rows predicted ahead (default ``4 * batch_size``); ``name`` of
    the method in records (default ``system_kind``).

    Parameters
    ----------
    facter : FacterConfig
        The method's settings.
    n_calib : int
        Calibration size n (used by the Hoeffding correction).
    protocol : str, default "open"
        One of ``facterlab.facter.prompts.PROTOCOLS``.
    k : int, default 10
        Recommendation list length.
    domain : str, default "movie"
        Domain word of the prompts.
    seed : int, default 0
        Run seed of :func:`request_seed`.
    system_kind : str, default "facter"
        One of ``facterlab.facter.prompts.SYSTEM_KINDS``.
    batch_size : int, default 8
        Most rows per recommender call (>= 1).
    lookahead : int or None, default None
        Rows predicted ahead (>= 1); None means ``4 * batch_size``.
    progress : bool, default False
        Show a progress bar per pass.
    name : str or None, default None
        Method name in the records; None means ``system_kind``.

    Examples
    --------
    >>> from facterlab.config import FacterConfig
    >>> MonitorSettings(FacterConfig(), n_calib=20, batch_size=0)
    Traceback (most recent call last):
    ...
    ValueError: batch_size must be >= 1, got 0
    """

    facter: FacterConfig
    n_calib: int
    protocol: str = "open"
    k: int = 10
    domain: str = "movie"
    seed: int = 0
    system_kind: str = "facter"
    batch_size: int = 8
    lookahead: int | None = None
    progress: bool = False
    name: str | None = None

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.lookahead is not None and self.lookahead < 1:
            raise ValueError(f"lookahead must be >= 1, got {self.lookahead}")
        if self.protocol not in _prompts.PROTOCOLS:
            raise ValueError(
                f"unknown protocol {self.protocol!r}; choose one of {', '.join(map(repr, _prompts.PROTOCOLS))}"
            )
        if self.system_kind not in _prompts.SYSTEM_KINDS:
            choices = ", ".join(map(repr, _prompts.SYSTEM_KINDS))
            raise ValueError(f"unknown system_kind {self.system_kind!r}; choose one of {choices}")


#: the keywords of :meth:`FacterMonitor.from_keywords` that are not :class:`MonitorSettings` fields
_PART_KEYWORDS = ("rows", "items", "recommender", "scorer", "postprocess", "represent", "prompts", "twins")


class FacterMonitor:
    """FACTER's online monitor: each test row scored against the threshold, violations collected and
    repair rules mined between passes (the loop: module docstring); built from its :class:`MonitorSettings`
    and its parts.

    ``rows``: the test rows in walk order; ``items``: the catalogue; ``recommender`` a
    :class:`~facterlab.datatypes.Recommender`; ``scorer`` the :class:`OnlineScorer` of the calibration
    state.  ``prompts`` is the prompt module (default :mod:`facterlab.facter.prompts`): it must provide
    ``system_prompt(kind, rules, announce)`` and ``build_request(row, items, system, protocol, k,
    domain, seed)``.  ``postprocess(rows, predictions) -> [(mapped ids, top-1 id, top-1 raw title)]``
    maps predictions to catalogue ids; ``represent(ids, raws) -> (n, dim)`` gives f(yhat).
    ``twins``: with ``facter.delta = "twin"``, the flipped protected attributes of each row's twin
    (:func:`facterlab.facter.twins.twin_attributes`), and ``scorer`` a :class:`TwinScorer`.

    Parameters
    ----------
    settings : MonitorSettings
        How the loop runs.
    rows : pandas.DataFrame
        Test rows in walk order, with ``row_id``, ``user_id`` and the protected attribute columns
        (plus what ``prompts.build_request`` reads).
    items : pandas.DataFrame
        The catalogue, with ``title`` and ``features`` columns; the top-1 item of a violation is
        looked up by ``items.loc[item_id]``, so the index should be ``item_id``.
    recommender : Recommender
        The model under audit.
    scorer : OnlineScorer or TwinScorer
        Scores each row; a :class:`TwinScorer` is required when ``facter.delta = "twin"``.
    postprocess : callable
        ``postprocess(rows, predictions) -> [(mapped ids, top-1 id, top-1 raw title), ...]``.
    represent : callable
        ``represent(top1_ids, raw_titles) -> array (n, dim)``, f(yhat).
    prompts : module or object or None, default None
        The prompt module; None means :mod:`facterlab.facter.prompts`.
    twins : sequence of mapping or None, default None
        With ``facter.delta = "twin"``: each row's twin protected attributes (one per row);
        ignored otherwise.

    Reference: [fayyazi2025facter] (docs/references.bib).
    """

    def __init__(
        self,
        settings: MonitorSettings,
        rows: pd.DataFrame,
        items: pd.DataFrame,
        recommender: Recommender,
        scorer: OnlineScorer | TwinScorer,
        postprocess: Callable,
        represent: Callable,
        prompts: Any = None,
        twins: Sequence | None = None,
    ):
        if not isinstance(recommender, Recommender):
            raise TypeError(
                f"recommender must implement facterlab.datatypes.Recommender (fingerprint, predict, plan_batches); "
                f"{type(recommender).__name__} does not: subclass Recommender to inherit plan_batches' default"
            )
        if prompts is None:
            prompts = _prompts
        self.settings = st = settings
        cfg = st.facter
        self.rows = rows.reset_index(drop=True)
        self.row_dicts = self.rows.to_dict("records")
        self.items, self.rec, self.scorer = items, recommender, scorer
        self.prompt_items = prompt_items(items)
        self.postprocess, self.represent = postprocess, represent
        self.cfg, self.n_calib = cfg, int(st.n_calib)
        self.protocol, self.k, self.domain, self.seed = st.protocol, int(st.k), st.domain, int(st.seed)
        self.kind, self.repair = st.system_kind, st.system_kind == "facter"
        self.batch_size, self.progress, self.prompts = int(st.batch_size), st.progress, prompts
        self.lookahead = 1 if self.batch_size == 1 else max(self.batch_size, int(st.lookahead or 4 * self.batch_size))
        self.name = st.name or st.system_kind
        self.protected = _prompts.protected_of(prompts)  # the dataset's protected attributes
        self.attrs = [{a: str(r[a]) for a in self.protected} for r in self.row_dicts]
        self.keys = [tuple(a[x] for x in self.protected) for a in self.attrs]
        self.twin = cfg.delta == "twin"
        self.twin_attrs: list[dict] = []
        self.twin_dicts: list[dict] = []
        if self.twin:
            if twins is None or len(twins) != len(self.rows) or not isinstance(scorer, TwinScorer):
                raise ValueError(
                    "facter.delta = 'twin' needs the twins' attributes (one per row) and a TwinScorer "
                    "(facterlab.facter.pipeline builds both)"
                )
            self.twin_attrs = [{a: str(t[a]) for a in self.protected} for t in twins]
            self.twin_dicts = [twin_row(r, t) for r, t in zip(self.row_dicts, self.twin_attrs)]
        # state: the flag statistic is S against Q_t (conformal) or the twin Delta against Q_null (null),
        # a bar that does not move (gamma = 1 keeps it fixed whatever the rule)
        self.null = cfg.threshold == "null"
        if self.null and scorer.calib.q_null is None:
            raise ValueError("facter.threshold = 'null' needs the calibration's null threshold (q_null)")
        q_null = scorer.calib.q_null
        q0: float = float(q_null) if (self.null and q_null is not None) else float(scorer.calib.q0)
        self.q0 = q0
        if self.null:
            self.thr = OnlineThreshold(q0, "one_sided", 1.0, cfg.eta, cfg.alpha)
        else:
            self.thr = OnlineThreshold(q0, cfg.threshold_rule, cfg.gamma, cfg.eta, cfg.alpha)
        # rule mining: the violation FIFO, the contrast reference, the confirmed rules (facter/monitor_rules.py)
        self.rules = MonitorRules(cfg, self.repair, self.twin, self.protected)
        self.buffer, self.reference, self.confirmed = self.rules.buffer, self.rules.reference, self.rules.confirmed
        self.contrast = self.rules.contrast
        self.repro = ReproCountCorrection(q0, max(1, len(self.rows)), cfg.buffer_size)
        self.n_predicted = 0
        self.n_repredicted = 0
        self.n_calls = 0
        self.n_twin_predicted = 0
        # facter.attribution = "per-attribute": a flagged FACTER row is asked again once per attribute, that
        # attribute alone flipped to its twin's value (docs/FACTER.md §7.3); these requests are counted here
        self.per_attribute = bool(self.twin and self.confirmed is not None and cfg.attribution != "joint")
        self.every_row = self.per_attribute and cfg.attribution == "per-attribute-all"
        # facter.rule_evidence = "list": confirmed mining compares the features of the whole top-k lists
        self.list_evidence = bool(self.confirmed is not None and getattr(cfg, "rule_evidence", "top1") == "list")
        self._items_read: dict = {}  # item id -> (title, features) or None, read once per item (_item)
        self.n_attr_twin_predicted = 0
        self.passes_run = 0
        # rows per call, adapted to how often predictions made ahead go stale (outputs are unchanged:
        # a stale prediction is never used); starts at batch_size
        self._cap = self.batch_size
        self._ahead = [0, 0, 0]  # [used, stale, none] since the last adaptation (see _adapt)
        self.last_pass_system: dict = {}  # position -> the system prompt the row had in the last pass run
        self._pos_by_row_id = {int(r["row_id"]): i for i, r in enumerate(self.row_dicts)}
        self._req_memo: dict = {}  # position -> {(twin, system, pass): request} (_request)
        self._sys_memo: dict = {}  # (rules, announcement) -> system prompt text (system_for)

    @classmethod
    def from_keywords(cls, **kw: Any) -> FacterMonitor:
        """The flat keyword form: :class:`MonitorSettings` fields (``cfg`` is accepted for ``facter``)
        and the parts (``rows``, ``items``, ``recommender``, ``scorer``, ``postprocess``, ``represent``,
        ``prompts``) in one call, for callers that assemble one dict; unknown keywords are a TypeError.

        Parameters
        ----------
        **kw
            :class:`MonitorSettings` fields and the constructor's parts.

        Returns
        -------
        FacterMonitor
            The monitor, not yet run.
        """
        parts = {key: kw.pop(key) for key in _PART_KEYWORDS if key in kw}
        if "cfg" in kw:
            kw["facter"] = kw.pop("cfg")
        return cls(MonitorSettings(**kw), **parts)

    # ------------------------------------------------------------------ prompts
    def rules_for(self, attrs: dict) -> tuple:
        """Rules for a user with ``attrs`` under the current state (empty for baselines):
        :meth:`MonitorRules.rules_for <facterlab.facter.monitor_rules.MonitorRules.rules_for>`.

        Parameters
        ----------
        attrs : dict
            The user's protected attributes (``gender``, ``age``, ``occupation``) as strings.

        Returns
        -------
        tuple of Rule
            The rules, in prompt order.
        """
        return self.rules.rules_for(attrs)

    def system_for(self, attrs: dict, pass_index: int, passes: int) -> tuple:
        """(system prompt text, rules) for a user under the current state.

        Parameters
        ----------
        attrs : dict
            The user's protected attributes as strings.
        pass_index : int
            0-based pass number (announced as ``pass_index + 1``).
        passes : int
            Total number of passes (announced).

        Returns
        -------
        tuple of (str, tuple of Rule)
            The system prompt and the rules it shows.
        """
        rules = self.rules_for(attrs)
        announce = (self.thr.q, pass_index + 1, passes) if (self.repair and self.cfg.announce_threshold) else None
        key = (rules, announce)
        text = self._sys_memo.get(key)
        if text is None:  # a pure function of the rules and the announcement: rendered once per state
            text = self._sys_memo[key] = self.prompts.system_prompt(self.kind, rules, announce=announce)
        return text, rules

    def request_for(self, row: dict, system: str, pass_index: int):
        """The recommender request for ``row`` with system prompt ``system``.

        Parameters
        ----------
        row : dict
            The test row (``row_id`` and what ``prompts.build_request`` reads).
        system : str
            The system prompt.
        pass_index : int
            0-based pass number (part of the request's seed).

        Returns
        -------
        PromptRequest
            What ``prompts.build_request`` returns, seeded by :func:`request_seed`.
        """
        return self.prompts.build_request(
            row,
            self.prompt_items,
            system,
            self.protocol,
            self.k,
            self.domain,
            request_seed(self.seed, int(row["row_id"]), pass_index),
        )

    def _current(self, pos: int, pass_index: int, passes: int, row: dict | None = None, attrs: dict | None = None):
        """(key, rules): the row's request under the current state (with ``delta = "twin"``, the pair
        (request, twin request); the twin gets its own group's rules) and the row's rules."""
        own = row is None  # the monitor's own row at ``pos``: its requests are memoised (_request)
        row = self.row_dicts[pos] if row is None else row
        attrs = self.attrs[pos] if attrs is None else attrs
        system, rules = self.system_for(attrs, pass_index, passes)
        req = self._request(pos, False, system, pass_index) if own else self.request_for(row, system, pass_index)
        if not self.twin:
            return req, rules
        twin_system = self.system_for(self.twin_attrs[pos], pass_index, passes)[0]
        return (req, self._request(pos, True, twin_system, pass_index)), rules

    def _request(self, pos: int, twin: bool, system: str, pass_index: int):
        """:meth:`request_for` of the row (or its twin) at ``pos``, built once per (system prompt, pass).

        A request is a pure function of the row, the system prompt and the pass (its seed), so the
        memo changes no request.  Why: each prediction call looks ahead over the next rows and rebuilds
        their requests to see whether a prediction made ahead went stale; the same requests were built
        about 13 times per row (a paper-size twin run built 56,834 for 23,040 predictions).  Entries of
        a row are dropped once the row is done in a pass (:meth:`run`)."""
        memo = self._req_memo.setdefault(pos, {})
        key = (twin, system, pass_index)
        req = memo.get(key)
        if req is None:
            req = memo[key] = self.request_for(
                self.twin_dicts[pos] if twin else self.row_dicts[pos], system, pass_index
            )
        return req

    def _predict(self, reqs: list) -> list:
        preds = self.rec.predict(reqs)
        if len(preds) != len(reqs):
            raise ValueError(f"recommender returned {len(preds)} predictions for {len(reqs)} requests")
        self.n_predicted += len(reqs)
        self.n_calls += 1
        return preds

    def _prepare(self, positions: list, keys: list, rules: list) -> dict:
        """Predict the rows at ``positions`` (and their twins, in the same recommender call)."""
        if not self.twin:
            preds = self._predict(keys)
            post = self.postprocess([self.row_dicts[p] for p in positions], preds)
            vecs = self.represent([x[1] for x in post], [x[2] for x in post])
            return {p: (rq, ru, pr, po, v) for p, rq, ru, pr, po, v in zip(positions, keys, rules, preds, post, vecs)}
        n, draws = len(positions), int(self.cfg.draws)
        # with facter.draws > 1 every request is asked once per draw; f(yhat) is the mean over the draws
        both = self._predict(with_draws([k[0] for k in keys] + [k[1] for k in keys], draws))
        self.n_twin_predicted += n * draws
        dicts = [self.row_dicts[p] for p in positions] + [self.twin_dicts[p] for p in positions]
        post = self.postprocess(dicts * draws, both)
        # f(yhat), and with facter.twin_distance = "list" the rank-weighted list mean beside it (twins.answer_vectors)
        vecs = mean_over_draws(answer_vectors(self.represent, post, both, self.cfg.twin_distance), draws)
        return {
            p: (keys[i], rules[i], both[i], post[i], vecs[i], both[n + i], post[n + i], vecs[n + i])
            for i, p in enumerate(positions)
        }

    def _fill(self, p: int, pass_index: int, passes: int, pending: dict, req_p, rules_p) -> dict:
        """Predict row ``p`` (no valid prediction) together with the next rows within the lookahead
        that lack one, as the recommender would batch them (module docstring)."""
        need = [(p, req_p, rules_p)]
        for q in range(p + 1, min(len(self.rows), p + self.lookahead)):
            rq, ru = self._current(q, pass_index, passes)
            ent = pending.get(q)
            if ent is None or ent[0] != rq:
                need.append((q, rq, ru))
        primary = [x[1][0] if self.twin else x[1] for x in need]
        groups = self.rec.plan_batches(primary) if len(need) > 1 else None
        if groups is not None:
            chosen = next(g for g in groups if 0 in g)
            chosen = sorted(chosen)[: self._cap]
        else:
            chosen = list(range(min(len(need), self._cap)))
        picked = [need[i] for i in chosen]
        self.n_repredicted += sum(1 for q, _, _ in picked if q in pending)
        return self._prepare([x[0] for x in picked], [x[1] for x in picked], [x[2] for x in picked])

    def _adapt(self, stale: bool | None) -> None:
        """Halve the rows per call when predictions made ahead mostly go stale (a violation changed the
        rules before their turn), double them back (up to batch_size) when they mostly hold, or after
        ADAPT_WINDOW rows that had nothing predicted ahead (a probe).  ``stale``: True (discarded),
        False (used), None (nothing was predicted ahead for the row)."""
        self._ahead[{False: 0, True: 1, None: 2}[stale]] += 1
        used, gone, none = self._ahead
        if used + gone >= ADAPT_WINDOW:
            if gone > used:
                self._cap = max(1, self._cap // 2)
            elif 4 * gone < used:
                self._cap = min(self.batch_size, 2 * self._cap)
        elif none >= ADAPT_WINDOW and self._cap < self.batch_size:
            self._cap = min(self.batch_size, 2 * self._cap)
        else:
            return
        self._ahead = [0, 0, 0]

    # ------------------------------------------------------------------ one row
    def _process(self, pos: int, pass_index: int, pending: tuple, rules: tuple) -> dict:
        key_req, _, pred, (mapped, top1, raw), vec = pending[:5]
        req = key_req[0] if self.twin else key_req
        if isinstance(self.scorer, TwinScorer):
            s, d, delta, n_nb = self.scorer.score(pos, vec, pending[7])
        else:
            s, d, delta, n_nb = self.scorer.score(pos, vec)
        stat = delta if self.null else s  # what the flags compare with the bar
        attrs, key = self.attrs[pos], self.keys[pos]
        q_before = self.thr.q
        v_fixed = stat > self.q0
        v_hoef = stat > corrected_threshold(self.q0, "hoeffding", self.n_calib, self.cfg.hoeffding_delta)
        v_repro = self.repro.step(key, stat)
        c_repro = self.repro.last_c
        # REPRO's corrected-dynamic count: the same C over the adaptive bar, S > Q_t + C/sqrt(n)
        v_repro_dyn = stat > q_before + c_repro / math.sqrt(self.repro.n)
        v_corr = {"none": v_fixed, "hoeffding": v_hoef, "repro_count": v_repro}[self.cfg.correction]
        v_adapt = self.thr.step(stat)
        attributed = None
        if self.per_attribute and (v_adapt or self.every_row):
            attributed = self._attribute(pos, pass_index, vec, q_before)
        if v_adapt or self.rules.observes_every_row:  # a violation feeds the rules (facter/monitor_rules.py)
            own = self._top1_title_features(top1, raw)
            twin_own = self._top1_title_features(pending[6][1], pending[6][2]) if self.twin else None
            twin_attrs = self.twin_attrs[pos] if self.twin else None
            per_attr = None
            if attributed is not None:
                per_attr = {
                    a: (self.every_row or d_a > q_before, own_a, attrs_a)
                    for a, (d_a, own_a, attrs_a, _) in attributed.items()
                }
            evidence = None
            if self.list_evidence:  # facter.rule_evidence = "list": the features of the whole lists' items
                evidence = (
                    self._list_items(mapped),
                    self._list_items(pending[6][0]),
                    {a: self._list_items(x[3]) for a, x in (attributed or {}).items()},
                )
            self.rules.observe(attrs, bool(v_adapt), own, twin_own, rules, twin_attrs, per_attr, evidence)
        row = self.row_dicts[pos]
        twin_cols = {}
        if self.twin:
            t_pred, (t_mapped, t_top1, t_raw) = pending[5], pending[6]
            twin_cols = {
                **{f"twin_{a}": v for a, v in self.twin_attrs[pos].items()},
                "twin_mapped_ids": [int(m) for m in t_mapped],  # the twin's list (facter.directional reads it)
                "twin_top1_id": int(t_top1),
                "twin_top1_text": t_raw or "",
                "twin_raw": str(t_pred.raw or ""),
            }
        if self.per_attribute:  # which attributes' own twins moved the flagged row's answer past the bar
            got = attributed or {}
            twin_cols["attr_twins"] = len(got) * int(self.cfg.draws)
            twin_cols["credited"] = [a for a, x in got.items() if x[0] > q_before]
        return {
            "method": self.name,
            "pass": pass_index + 1,
            "position": pos,
            "row_id": int(row["row_id"]),
            "user_id": int(row["user_id"]),
            **attrs,
            "S": s,
            "d": d,
            "delta": delta,
            "n_neighbours": n_nb,
            "q_before": q_before,
            "q_after": self.thr.q,
            "viol_adaptive": bool(v_adapt),
            "viol_fixed": bool(v_fixed),
            "viol_corrected": bool(v_corr),
            "viol_hoeffding": bool(v_hoef),
            "viol_repro_count": bool(v_repro),
            "viol_repro_dynamic": bool(v_repro_dyn),
            "repro_count_c": int(c_repro),
            "rules": [r.text() for r in rules],
            "n_rules": len(rules),
            "titles": [str(t) for t in pred.titles],
            "mapped_ids": [int(m) for m in mapped],
            "top1_id": int(top1),
            "top1_text": raw or "",
            "parse_status": pred.parse_status,
            "n_model_positions": pred.n_model_positions,
            "seed": int(req.seed),
            "raw": str(pred.raw or ""),
            **twin_cols,
        }

    def _attribute(self, pos: int, pass_index: int, vec, bar: float) -> dict:
        """The per-attribute twins of the flagged row at ``pos`` (``facter.attribution = "per-attribute"``):
        for each protected attribute whose twin value differs, the row with that attribute alone set to
        its twin's value, under that group's own rules and the row's seed, asked ``draws`` times in one
        call.  Returns ``{attr: (Delta_attr, (title, features) of its top-1, its attributes, its mapped ids)}``;
        Delta_attr > ``bar`` credits the attribute (:meth:`MonitorRules.observe`)."""
        passes = getattr(self, "_passes_total", pass_index + 1)
        attrs, twin = self.attrs[pos], self.twin_attrs[pos]
        flips = [a for a in self.protected if twin[a] != attrs[a]]
        if not flips:
            return {}
        dicts, groups, reqs = [], [], []
        for a in flips:
            group = {**attrs, a: twin[a]}
            row = {**self.row_dicts[pos], a: twin[a]}
            reqs.append(self.request_for(row, self.system_for(group, pass_index, passes)[0], pass_index))
            dicts.append(row)
            groups.append(group)
        draws = int(self.cfg.draws)
        preds = self._predict(with_draws(reqs, draws))
        self.n_attr_twin_predicted += len(preds)
        post = self.postprocess(dicts * draws, preds)
        how = self.cfg.twin_distance
        vecs = mean_over_draws(answer_vectors(self.represent, post, preds, how), draws)
        out = {}
        for i, a in enumerate(flips):
            v, w = np.asarray(vec, dtype=np.float64)[None, :], np.asarray(vecs[i], dtype=np.float64)[None, :]
            d_a = float(statistic_distance(v, w, how)[0])
            out[a] = (d_a, self._top1_title_features(post[i][1], post[i][2]), groups[i], post[i][0])
        return out

    def _list_items(self, mapped) -> tuple:
        """The features of each item of a top-k list of mapped item ids (an id not in the catalogue carries
        none): a pair member's evidence with ``facter.rule_evidence = "list"``."""
        return tuple(() if (it := self._item(m)) is None else it[1] for m in (mapped if mapped is not None else ()))

    def _item(self, item_id) -> tuple | None:
        """``(title, features)`` of a catalogue item, None for an id not in the catalogue (or -1: unmapped);
        read from the items table once per item (a pandas ``.loc`` per row was 7-14% of a testbed run)."""
        m = int(item_id)
        if m not in self._items_read:
            got = None
            if m >= 0 and m in self.items.index:
                it = self.items.loc[m]
                got = (str(it["title"]), tuple(it["features"]) if it["features"] is not None else ())
            self._items_read[m] = got
        return self._items_read[m]

    def _top1_title_features(self, top1: int, raw: str) -> tuple:
        """(title, features) pushed into the buffer for a violation: the top-1 item's, else the raw
        title; an empty output pushes ``UNKNOWN_GENERATION`` (REPRO, ``empty_output_rule =
        "unknown_generation"``: it can become a rule) or nothing a rule can be mined from ("skip")."""
        if top1 is not None and (got := self._item(top1)) is not None:
            return got
        raw = (raw or "").strip()
        if not raw and getattr(self.cfg, "empty_output_rule", "skip") == "unknown_generation":
            raw = UNKNOWN_GENERATION
        return raw, ()

    # ------------------------------------------------------------------ passes
    def run(self, passes: int | None = None) -> MonitorResult:
        """Run ``passes`` passes (default: cfg.passes for FACTER, 1 for baselines).

        Parameters
        ----------
        passes : int or None, default None
            Number of passes (>= 1); None means ``facter.passes`` for FACTER and 1 for baselines.

        Returns
        -------
        MonitorResult
            Records with one row per (pass, test row) (method, pass (1-based), position, ids,
            protected attributes, S, d, delta, n_neighbours, q_before, q_after, the ``viol_*`` flags,
            rules, titles, mapped ids, top-1, parse status, seed, raw output and, with the twin Delta,
            ``twin_*`` columns), plus ``viol_q_star`` (S > the final threshold); the final threshold,
            the threshold after each pass, the buffer and the call counts.
        """
        passes = int(passes if passes is not None else (self.cfg.passes if self.repair else 1))
        if passes < 1:
            raise ValueError(f"passes must be >= 1, got {passes}")
        records, path = [], [self.q0]
        n = len(self.rows)
        self._passes_total = passes
        for t in range(passes):
            # bar (when progress) and log lines: rows done, cached vs new predictions, time left
            bar = Progress(f"{self.name} pass {t + 1}/{passes}", total=n, log=log, bar=self.progress, leave=False)
            pending: dict = {}  # position -> (request, rules, prediction, postprocessed, vector)
            for p in range(n):
                req_now, rules_now = self._current(p, t, passes)
                ent = pending.get(p)
                if ent is None or ent[0] != req_now:
                    self._adapt(None if ent is None else True)
                    pending.update(self._fill(p, t, passes, pending, req_now, rules_now))
                    ent = pending[p]
                else:
                    self._adapt(stale=False)
                del pending[p]
                self._req_memo.pop(p, None)  # row p is done in this pass: its requests are not asked again
                main_req = ent[0][0] if self.twin else ent[0]
                self.last_pass_system[p] = system_text(main_req)
                records.append(self._process(p, t, ent, rules_now))
                if bar is not None:
                    bar.update(1)
            if bar is not None:
                bar.close()
            path.append(self.thr.q)
            self.passes_run = t + 1
            self.rules.end_pass(t + 1)
        df = pd.DataFrame.from_records(records)
        q_star = self.thr.q
        # the final bar against the flag's own statistic (S, or the twin Delta with the null threshold)
        df["viol_q_star"] = df["delta" if self.null else "S"].to_numpy() > q_star
        return MonitorResult(
            df,
            q_star,
            path,
            self.buffer,
            self.n_predicted,
            self.n_repredicted,
            self.n_calls,
            self.n_twin_predicted + self.n_attr_twin_predicted,  # the per-attribute twins are twin requests too
        )

    def final_system(self, attrs: dict) -> str:
        """The system prompt a user with ``attrs`` gets under the final state (after :meth:`run`).

        Parameters
        ----------
        attrs : dict
            The user's protected attributes (values converted to str).

        Returns
        -------
        str
            The system prompt (announcing the last pass when ``announce_threshold`` is on).
        """
        t = max(1, self.passes_run)
        return self.system_for({a: str(attrs[a]) for a in self.protected}, t - 1, t)[0]

    def row_system(self, row: dict, which: str = "last_pass") -> str:
        """The system prompt for auditing ``row`` (CFR, snsr_fairllm; MetricsConfig.cfr_prompt):
        ``"last_pass"`` (REPRO) the prompt the row itself had at its turn in the last pass,
        ``"final_rules"`` the prompt its attributes get under the final state.  A row the monitor did
        not process (or before :meth:`run`) gets the final-state prompt.

        Parameters
        ----------
        row : dict
            The row, with its protected attributes and ideally ``row_id``.
        which : {"last_pass", "final_rules"}, default "last_pass"
            Which prompt to return.

        Returns
        -------
        str
            The system prompt.
        """
        if which not in ("last_pass", "final_rules"):
            raise ValueError(f"unknown cfr_prompt {which!r}; choose 'last_pass' or 'final_rules'")
        if which == "last_pass":
            pos = self._pos_by_row_id.get(int(row["row_id"])) if "row_id" in row else None
            if pos is not None and pos in self.last_pass_system:
                return self.last_pass_system[pos]
        return self.final_system(row)
