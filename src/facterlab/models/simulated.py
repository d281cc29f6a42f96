"""A simulated LLM recommender with known demographic bias (docs/SIMULATED.md).

The only LLM that runs on a CPU-only machine without a model hub (SmolLM2-135M) does not recommend,
so FACTER's conformal threshold and repair loop have nothing to act on there.  This recommender
stands in for the LLM behind the same :class:`~facterlab.datatypes.Recommender` protocol, with every
source of unfairness known:

1. **Preferences** come from a collaborative model fitted on the run's own *training histories*:
   the (user, item) pairs shown in the rows' watch histories, minus every pair that is a target or a
   relevant (future-window) item of any row, calibration or test.  The model is PureSVD (Cremonesi,
   Koren and Turrin, RecSys 2010): a truncated SVD (scikit-learn's ``TruncatedSVD``) of the binary
   user x item matrix; a request is folded in from the history item ids that its prompt shows,
   ``score = V (V^T h)``.  PureSVD is a strong, well-understood top-N baseline, fits in milliseconds
   and needs nothing beyond scikit-learn, which the package already depends on.  Scores are
   standardised over the request's pool (z-scores), so the knobs below are in units of one standard
   deviation of the preference score.
2. **Bias** of strength ``beta``: for each protected attribute whose value appears in the prompt's
   demographics block, ``beta`` times the feature's weight is added to the score of every item that has
   a feature (genre) the bias table (:data:`BIAS_TABLE` by default, :data:`RARE_BIAS_TABLE`, or the
   user's own, :func:`load_bias_table`) pushes to that value (an item with several pushed features takes
   the largest weight).  The Fair prompt's rules ("do not reinforce stereotypes", present in the Fair and
   FACTER system prompts) remove a share ``phi`` of the push.
3. **Noise** ``sigma``: an independent N(0, sigma^2) term per (request, item).
4. **Rule compliance** ``rho``: each ``AVOID: (attr=value) -> (feature-only)`` or ``-> (title)`` line of
   the system prompt that names the user's own value (as shown in the prompt) is honoured with
   probability ``rho`` (drawn per request and rule).  With ``compliance = "relative"`` (default) an
   honoured rule first cancels the push on the items it names, then lowers them by ``demote`` standard
   deviations, so that a rule can overcome the bias whatever beta; ``"absolute"`` (sim-v1) only lowers
   them by ``demote`` (``demote >= 1000`` puts them below every other item).
5. **Title corruption** ``h`` (open generation only): each returned title is, with probability ``h``,
   replaced by one of three fixed corruptions of that item (a typo, the title without its year, an
   invented title mixing its words with another title's), so that Valid@k and the catalogue mapping
   are exercised.

Every random draw is keyed by (request seed, watch history, candidates, ``seed``): the demographics
and the system prompt change an answer only through the bias, the Fair share and the rules.  So at
``beta = 0`` and without rules an answer does not depend on the demographics at all (CFR is exactly
0), and an answer is a pure function of (request, ``seed``, parameters, training data).

:meth:`SimulatedRecommender.truth` tells for a request what the bias did: whether it changed the top-1
item (``top1_changed``: against the same prompt without the push, rules kept), whether the top-1 differs
from the demographics-blind answer (``top1_unfair``: no push and no rules, so that unfairness the rules
cause is counted too), the top-k set, how many of the top k carry a pushed feature with and without the
bias, and how many rules were honoured.  The same facts go into ``Prediction.raw`` as JSON.

This module holds the recommender (:class:`SimulatedRecommender`, :func:`simulated_from_config`); its
parts live in their own modules and every name is re-exported here: the bias tables
(:mod:`facterlab.models.simulated_tables`), the preference model
(:mod:`facterlab.models.simulated_preferences`), what the text-reading variant reads and its named cases
(:mod:`facterlab.models.simulated_text`) and the per-request memos
(:mod:`facterlab.models.simulated_memo`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd

from facterlab.config import SimulatorConfig
from facterlab.data.wording import ATTRIBUTE_LABELS, canonical, is_default_spelling
from facterlab.datatypes import PARSE_NA, Prediction, PromptRequest, Recommender
from facterlab.models.fake import parse_avoid_rules

# the parts in their own modules, re-exported: every name stays importable from here
from facterlab.models.simulated_memo import _LRU, MEMO_BYTES, MEMO_MAX, MEMO_MIN, _Core  # noqa: F401
from facterlab.models.simulated_preferences import fit_preferences, training_pairs
from facterlab.models.simulated_tables import (  # noqa: F401
    BIAS_TABLE,
    MAX_BIAS_WEIGHT,
    NAMED_BIAS_TABLES,
    NARROW_BIAS_TABLE,
    RARE_BIAS_TABLE,
    ROMANCE_BIAS_TABLE,
    _table_error,
    bias_table_markdown,
    check_bias_table,
    load_bias_table,
    normalise_bias_table,
)
from facterlab.models.simulated_text import _BLOCK, TEXT_CASES, _aspect, demographic_lines  # noqa: F401

__all__ = [
    "BIAS_TABLE",
    "SimulatedRecommender",
    "simulated_from_config",
    "simulated_fingerprint",
    "SIMULATED_MODEL",
    "fit_preferences",
    "training_pairs",
    "bias_table_markdown",
    "SIM_VERSION",
    "RARE_BIAS_TABLE",
    "load_bias_table",
    "TEXT_CASES",
    "NARROW_BIAS_TABLE",
    "demographic_lines",
]

SIMULATED_MODEL = "simulated"
SIM_VERSION = "sim-v2"  # v2: weighted bias tables, "relative" compliance, the blind truth label

FAIR_MARKER = "Do not reinforce stereotypes"
_SIM_DEFAULTS = SimulatorConfig()  # the one owner of the knobs' defaults
_YEAR = re.compile(r"\s*\(\d{4}\)\s*$")
#: fixed corruptions per item (title-corruption rate ``h``): a typo, the title without its year, an invented title
N_VARIANTS = 3
#: the most elements of one score matrix of a batch (requests x catalogue items for open generation): 16 MiB
#: of float64; a larger batch is answered in chunks (the answers do not depend on it)
BATCH_ELEMENTS = 2**21
#: the batched top k's threshold is the k-th largest score of every TOP_STRIDE-th item (``_top_rows``)
TOP_STRIDE = 8
#: a batch of fewer requests is answered request by request (``_predict_one``: the same answers): the batched
#: path's fixed cost per chunk (catalogue-wide matrices, three top k's) is more than it saves on so few.  Measured
#: on the requests of a paper-size `attributed-all` run with warm memos (ML-100K, 2026-12-07, load about 14): per
#: request 135 vs 431 us alone, 128 vs 230 us in batches of 3, 132 vs 170 us of 6, 144 vs 153 us of 8, 144 vs 103 us of 12
SMALL_BATCH = 8
#: ``Prediction.raw``: what ``json.dumps(truth, sort_keys=True)`` writes, without building an encoder per call
_TRUTH_JSON = json.JSONEncoder(sort_keys=True)


def _hash64(*parts) -> int:
    h = hashlib.blake2b(repr(parts).encode("utf-8"), digest_size=8)
    return int.from_bytes(h.digest(), "little")


@dataclass(frozen=True)
class _Parsed:
    rules: tuple  # (attr, value, target, kind)
    fair: bool


class _Inputs(NamedTuple):
    """What one request's scores are built from (``SimulatedRecommender._inputs``)."""

    core: _Core
    base: np.ndarray  # preferences plus noise (and the surface terms), over the pool
    strength: float  # the bias strength (beta, less the Fair prompt's share)
    push_full: np.ndarray  # per catalogue item: the push of the shown attribute values
    pushed_full: np.ndarray  # per catalogue item: push_full > 0
    named: np.ndarray | None  # per catalogue item: named by an honoured rule (None: no rule honoured)
    n_pushed_attrs: int
    parsed: _Parsed
    n_applicable: int
    n_honoured: int
    k: int  # the answer's length (rank: at most the pool's)
    meaning: np.ndarray | None = None  # the meaning term added to base (``meaning_sd``; None: none)


class SimulatedRecommender(Recommender):
    """A :class:`~facterlab.datatypes.Recommender` with known bias (module docstring).

    Parameters
    ----------
    items : catalogue with ``item_id``, ``title``, ``features`` (indexed by item_id or not).
    train : (user_id, item_id) training pairs (:func:`training_pairs`).
    protocol : "open" | "rank".
    beta, sigma, rho, h, phi, demote : bias strength, noise, rule compliance, title corruption (open only),
        share of the bias the Fair prompt removes, score penalty of an honoured rule (docs/SIMULATED.md);
        ranges are checked by
        :class:`facterlab.config.SimulatorConfig`, and again here.
    compliance : "relative" (an honoured rule cancels the push on what it names, then demotes it) or
        "absolute" (demote only).
    n_factors : PureSVD rank.  seed : mixed into every random draw.
    bias_table : attribute -> value -> features or {feature: weight}, or a name/path for
        :func:`load_bias_table` (default :data:`BIAS_TABLE`).

    The defaults are :class:`facterlab.config.SimulatorConfig`'s; :func:`simulated_from_config` builds
    one from a run config.
    """

    def __init__(
        self,
        items: pd.DataFrame,
        train: pd.DataFrame,
        protocol: str = "open",
        beta: float = _SIM_DEFAULTS.beta,
        sigma: float = _SIM_DEFAULTS.sigma,
        rho: float = _SIM_DEFAULTS.rho,
        h: float = _SIM_DEFAULTS.h,
        phi: float = _SIM_DEFAULTS.phi,
        demote: float = _SIM_DEFAULTS.demote,
        n_factors: int = _SIM_DEFAULTS.n_factors,
        seed: int = _SIM_DEFAULTS.seed,
        bias_table: Mapping | str | None = None,
        compliance: str = _SIM_DEFAULTS.compliance,
        reads: str = _SIM_DEFAULTS.reads,
        trigger: str = _SIM_DEFAULTS.trigger,
        order_sd: float = _SIM_DEFAULTS.order_sd,
        wording_sd: float = _SIM_DEFAULTS.wording_sd,
        field_sd: float = _SIM_DEFAULTS.field_sd,
        prompt_sd: float = _SIM_DEFAULTS.prompt_sd,
        temperature: float = _SIM_DEFAULTS.temperature,
        meaning_sd: float = _SIM_DEFAULTS.meaning_sd,
    ):
        if protocol not in ("open", "rank"):
            raise ValueError(f"unknown protocol {protocol!r}; choose 'open' or 'rank'")
        # one owner for the ranges: the config section (raises ValueError naming the field)
        SimulatorConfig(
            beta=beta,
            sigma=sigma,
            rho=rho,
            h=h,
            phi=phi,
            demote=demote,
            n_factors=int(n_factors),
            seed=int(seed),
            compliance=compliance,
            reads=reads,
            trigger=trigger,
            order_sd=order_sd,
            wording_sd=wording_sd,
            field_sd=field_sd,
            prompt_sd=prompt_sd,
            temperature=temperature,
            meaning_sd=meaning_sd,
        )
        self.reads, self.trigger = str(reads), str(trigger)
        self.surface = {
            "order": float(order_sd),
            "wording": float(wording_sd),
            "field": float(field_sd),
            "prompt": float(prompt_sd),
            "temperature": float(temperature),
            # a random function of the values' meaning (no direction): kept apart from the base so that the
            # truth can say what it moved (``meaning_topk_changed``); tagged last, so other fingerprints keep theirs
            "meaning": float(meaning_sd),
        }
        tbl = items.reset_index() if "item_id" not in items.columns else items
        self.item_ids = tbl["item_id"].to_numpy(dtype=np.int64)
        self.titles = tbl["title"].astype(str).tolist()
        self.features = [tuple(f) if f is not None else () for f in tbl["features"]]
        self._pos = {int(i): p for p, i in enumerate(self.item_ids)}
        self._title_pos: dict = {}
        for p, t in enumerate(self.titles):
            self._title_pos.setdefault(t, p)
        self.protocol = protocol
        self.beta, self.sigma, self.rho, self.h, self.phi = float(beta), float(sigma), float(rho), float(h), float(phi)
        self.demote, self.compliance = float(demote), str(compliance)
        self.n_factors, self.seed = int(n_factors), int(seed)
        self.bias_table = load_bias_table(bias_table)
        catalogue_feats = {f for fs in self.features for f in fs}
        named = {f for vals in self.bias_table.values() for fs in vals.values() for f in fs}
        if self.beta > 0 and not (named & catalogue_feats):
            raise ValueError(
                "simulated recommender: no feature of the bias table occurs in this catalogue "
                f"(catalogue features: {sorted(catalogue_feats)[:12]}...); pass a bias_table for it"
            )
        # item x feature incidence, and per (attr, value) the pushed-item mask
        self._feat_index = {f: i for i, f in enumerate(sorted(catalogue_feats))}
        inc = np.zeros((len(self.item_ids), max(1, len(self._feat_index))), dtype=bool)
        for p, fs in enumerate(self.features):
            for f in fs:
                inc[p, self._feat_index[f]] = True
        self._inc = inc
        self._push = {
            (a, v): self._feature_weights(fs) for a, vals in self.bias_table.items() for v, fs in vals.items()
        }
        train = train[["user_id", "item_id"]]
        self.V = fit_preferences(train, self.item_ids, self.n_factors, self.seed)
        self.fingerprint = _fingerprint(
            protocol,
            {k: getattr(self, k) for k in ("beta", "sigma", "rho", "h", "phi", "demote", "compliance", "n_factors")},
            self.seed,
            self.bias_table,
            train,
            self.reads,
            self.trigger,
            self.surface,
        )
        if self.reads == "text" and self.trigger == "semantic":
            # the table's values as a reader who understands every wording takes them
            self._push = {(a, canonical(a, v)): m for (a, v), m in self._push.items()}
        self._parsed: dict = {}
        self._push_memo: dict = {}
        self._mask_memo: dict = {}
        # per-request memos (answers unchanged: see _LRU); sized so that each holds MEMO_BYTES of vectors
        n = max(1, len(self.item_ids))
        self._core_memo = _LRU(min(MEMO_MAX, max(MEMO_MIN, MEMO_BYTES // (12 * n))))
        self._surface_memo = _LRU(min(MEMO_MAX, max(MEMO_MIN, MEMO_BYTES // (8 * n))))
        self._attrs_memo: dict = {}
        self._applicable_memo: dict = {}
        self._named_memo: dict = {}
        self._corrupt_memo: dict = {}
        self._no_named = np.zeros(len(self.item_ids), dtype=bool)  # a request without an honoured rule
        self._no_named.flags.writeable = False
        self.n_calls = 0
        self.n_batches = 0

    # ------------------------------------------------------------------ helpers
    def _feature_weights(self, weights: Mapping) -> np.ndarray:
        """Per item: the largest weight of the pushed features it carries (0 when none)."""
        out = np.zeros(len(self.item_ids))
        for f, w in weights.items():
            if f in self._feat_index and w > 0:
                np.maximum(out, np.where(self._inc[:, self._feat_index[f]], float(w), 0.0), out=out)
        return out

    def _feature_mask(self, feats: Sequence[str]) -> np.ndarray:
        cols = [self._feat_index[f] for f in feats if f in self._feat_index]
        if not cols:
            return np.zeros(len(self.item_ids), dtype=bool)
        return np.asarray(self._inc[:, cols].any(axis=1))

    def _parse_system(self, system: str) -> _Parsed:
        got = self._parsed.get(system)
        if got is None:
            rules = parse_avoid_rules(system)
            got = _Parsed(tuple(rules), FAIR_MARKER in system)
            if len(self._parsed) > 10_000:
                self._parsed.clear()
            self._parsed[system] = got
        return got

    def _shown_attrs(self, req: PromptRequest, meta: Mapping, lines: list | None = None) -> dict:
        """The protected attributes the prompt shows (none when the demographics block is dropped).

        With ``reads = "text"`` they are parsed from the prompt text alone (the request's fields are
        never read): every wording (``trigger = "semantic"``) or only facterlab's default spelling
        (``"literal"``: a reworded value is not understood), as canonical values."""
        if self.reads == "text":
            out = {}
            for label, text in demographic_lines(req) if lines is None else lines:
                attr = ATTRIBUTE_LABELS.get(label.lower())
                if attr is None or attr in out:
                    continue
                if self.trigger == "semantic":
                    out[attr] = canonical(attr, text)
                elif attr == "gender":  # literal: the code or facterlab's word, nothing else
                    code = canonical(attr, text)
                    if is_default_spelling(attr, text, code):
                        out[attr] = code
                else:  # literal: the value as facterlab spells it (a reworded value matches nothing)
                    out[attr] = text
            return out
        user = "\n".join(c for r, c in req.messages if r == "user")
        if "User demographics" not in user:
            return {}
        return {a: str(meta[a]) for a in meta.get("protected", ("gender", "age", "occupation")) if a in meta}

    def _rule_applies(self, attr: str, value: str, attrs: Mapping) -> bool:
        text = self.reads == "text" and self.trigger == "semantic"
        if attr == "tuple":  # "gender=F, age=25-34, occupation=writer"
            want = dict(kv.split("=", 1) for kv in value.split(", ") if "=" in kv)
            return all(str(attrs.get(a)) == (canonical(a, v) if text else v) for a, v in want.items())
        return str(attrs.get(attr)) == (canonical(attr, value) if text else value)

    def _surface_noise(self, req: PromptRequest, key: tuple, n: int, lines: list) -> np.ndarray | None:
        """The text-reading simulator's surface terms (docs/SIMULATED.md): per named sensitivity an
        N(0, sd^2) draw per pool item, seeded by that aspect of the prompt text (line order, the set of
        the demographic lines' texts, the irrelevant lines, the whole prompt) and the request's history
        and candidates; ``temperature`` by the whole prompt and the request seed (a fresh draw per request).
        None when every sensitivity is 0.  Each term is memoised by what seeds it (and ``n``)."""
        sd = self.surface
        if not any(v for name, v in sd.items() if name != "meaning"):
            return None
        rest = key[2:]
        out = None  # the terms' sum, left to right (0 + t == t: no array of zeros to start from)
        for name, scale in sd.items():
            if not scale or name == "meaning":  # the meaning term: :meth:`_meaning_noise`
                continue
            if name == "temperature":
                aspect: tuple = (int(req.seed), tuple(req.messages))
            else:
                aspect = _aspect(name, req, lines)
            mk = (name, scale, self.seed, aspect, rest, n)
            term = self._surface_memo.get(mk)
            if term is None:
                if name == "temperature":
                    seed = _hash64("temperature", self.seed, int(req.seed), tuple(req.messages), *rest)
                else:
                    seed = _hash64("surface", name, self.seed, aspect, *rest)
                term = scale * np.random.default_rng(seed).standard_normal(n)
                term.flags.writeable = False
                self._surface_memo.put(mk, term)
            out = term if out is None else out + term
        return out

    def _meaning_noise(self, req: PromptRequest, key: tuple, n: int, lines: list) -> np.ndarray | None:
        """The ``meaning_sd`` term: an N(0, sd^2) draw per pool item seeded by the *meaning* of the shown
        protected values (each line's value read as every wording is understood, order-invariant) and the
        request's history and candidates: a random function of who the user is, with no direction (no
        value gets any feature more than another on average).  No placebo edit moves it (a rewording keeps
        the meaning); a twin with other values gets an independent draw.  None when ``meaning_sd`` is 0."""
        scale = self.surface["meaning"]
        if not scale:
            return None
        aspect = _aspect("meaning", req, lines)
        rest = key[2:]
        mk = ("meaning", scale, self.seed, aspect, rest, n)
        term = self._surface_memo.get(mk)
        if term is None:
            term = scale * np.random.default_rng(
                _hash64("surface", "meaning", self.seed, aspect, *rest)
            ).standard_normal(n)
            term.flags.writeable = False
            self._surface_memo.put(mk, term)
        return term

    def _pool(self, req: PromptRequest, meta: Mapping, hist_pos: list) -> np.ndarray:
        if self.protocol == "rank":
            ids = meta.get("candidate_ids") or ()
            if ids:
                missing = [int(i) for i in ids if int(i) not in self._pos]
                if missing:
                    raise ValueError(
                        f"candidate item id(s) {missing[:5]} are not in the simulated recommender's catalogue"
                    )
                return np.asarray([self._pos[int(i)] for i in ids], dtype=np.int64)
            if req.candidates:
                return np.asarray([self._title_pos[t] for t in req.candidates], dtype=np.int64)
            raise ValueError("protocol 'rank' needs the request's candidates")
        mask = np.ones(len(self.item_ids), dtype=bool)
        mask[hist_pos] = False
        return np.flatnonzero(mask)

    # ------------------------------------------------------------------ one request
    def _push_masks(self, attrs: Mapping, key: tuple | None = None) -> tuple:
        """(push count per item, any-push mask per item) for the shown attribute values (memoised by
        ``key``, the sorted items of ``attrs``)."""
        if key is None:
            key = tuple(sorted(attrs.items()))
        got = self._push_memo.get(key)
        if got is None:
            push = np.zeros(len(self.item_ids))
            for a, v in attrs.items():
                m = self._push.get((a, v))
                if m is not None:
                    push += m
            got = (push, push > 0)
            self._push_memo[key] = got
        return got

    def _mask_of(self, feature: str) -> np.ndarray:
        m = self._mask_memo.get(feature)
        if m is None:
            m = self._mask_memo[feature] = self._feature_mask((feature,))
        return m

    @staticmethod
    def _top(score: np.ndarray, k: int) -> np.ndarray:
        """Indices of the k largest scores, best first, ties by index: equal to
        ``np.argsort(-score, kind="stable")[:k]`` without sorting everything."""
        n = len(score)
        if k >= n or n <= 64:
            return np.argsort(-score, kind="stable")[:k]
        # the k-th largest score (NaN last, as argpartition(-score) and min() would have it), without indices
        cand = np.flatnonzero(score >= -np.partition(-score, k - 1)[k - 1])
        return cand[np.lexsort((cand, -score[cand]))][:k]

    def _core_key(self, req: PromptRequest, meta: Mapping) -> tuple:
        """(history ids, candidate ids, the memo key of the request's core)."""
        hist_ids = tuple(map(int, meta.get("history_ids") or ()))
        cand_ids = tuple(map(int, meta.get("candidate_ids") or ()))
        by_titles = req.candidates if self.protocol == "rank" and not cand_ids else None
        return (
            hist_ids,
            cand_ids,
            (self.seed, self.sigma, self.h, self.protocol, int(req.seed), hist_ids, cand_ids, by_titles),
        )

    def _core(self, req: PromptRequest, meta: Mapping) -> _Core:
        """The request's :class:`_Core`, memoised by everything it depends on: the pool (history ids,
        candidate ids or, without them, candidate titles), the noise (``seed``, request seed, history and
        candidate ids) and the fixed ``sigma``, ``protocol``, ``h``, ``V``.  A miss computes it exactly as
        every request did before the memo."""
        hist_ids, cand_ids, mk = self._core_key(req, meta)
        core = self._core_memo.get(mk)
        if core is not None:
            return core
        hist_pos = [self._pos[i] for i in hist_ids if i in self._pos]
        pool = self._pool(req, meta, hist_pos)
        if len(pool) == 0:
            raise ValueError("the simulated recommender has no item to recommend (empty pool)")
        # preferences: PureSVD fold-in, standardised over the pool
        if hist_pos:
            # np.take: the same (pool, f) array as self.V[pool], so the same product, at a quarter of the cost
            pref = np.take(self.V, pool, axis=0) @ self.V[hist_pos].sum(axis=0)
        else:
            pref = np.zeros(len(pool))
        sd = pref.std()
        pref = (pref - pref.mean()) / sd if sd > 0 else pref - pref.mean()
        return self._new_core(req, mk, (self.seed, int(req.seed), hist_ids, cand_ids), pool, pref)

    def _new_core(self, req: PromptRequest, mk: tuple, key: tuple, pool: np.ndarray, pref: np.ndarray) -> _Core:
        """The core of standardised preferences ``pref`` over ``pool``: the noise added, memoised under ``mk``."""
        rng = np.random.default_rng(_hash64("noise", *key))
        base = pref + rng.standard_normal(len(pool)) * self.sigma if self.sigma > 0 else pref
        base.flags.writeable = False
        # the corruption draws continue the noise generator: keep its state (open generation only)
        state = rng.bit_generator.state if self.h > 0 and self.protocol == "open" else None
        # open generation's pool (the catalogue minus the history) kept as int32: half the bytes, the same items
        if self.protocol == "open" and len(self.item_ids) < 2**31:
            pool = pool.astype(np.int32)
        pool.flags.writeable = False
        core = _Core(key, pool, base, state)
        if state is not None and int(req.k) >= 1:  # this request's corruption draws straight from the generator
            n = min(int(req.k), len(pool))  # (its answer's length; other lengths from the saved state)
            core.corr[n] = (rng.random(n).tolist(), rng.integers(N_VARIANTS, size=n).tolist())
        return self._core_memo.put(mk, core)

    def _cores(self, requests: Sequence[PromptRequest]) -> dict:
        """Open generation: the cores a batch misses, ``memo key -> core``, their fold-ins standardised for
        many requests at once (requests of one history length and one pool length together: each row
        reduced as its own vector, so the same values as :meth:`_core`'s; the fold-in itself stays one
        matrix-vector product per request, BLAS's results depending on the shapes it is given).  Requests
        left out (rank, no history, alone in their group) get their core from :meth:`_core`."""
        if self.protocol != "open":
            return {}
        todo: dict = {}
        for req in requests:
            hist_ids, cand_ids, mk = self._core_key(req, req.meta_dict)
            if mk in todo or self._core_memo.get(mk) is not None:
                continue
            hist_pos = [self._pos[i] for i in hist_ids if i in self._pos]
            if hist_pos:
                todo[mk] = (req, (self.seed, int(req.seed), hist_ids, cand_ids), hist_pos)
        groups: dict = {}
        for mk, got in todo.items():
            groups.setdefault((len(got[2]), len(set(got[2]))), []).append((mk, got))
        out: dict = {}
        n_items = len(self.item_ids)
        for (h, n_hist), members in groups.items():
            m = len(members)
            if m < 2 or n_items - n_hist < 1:
                continue
            hist = np.array([got[2] for _, got in members], dtype=np.intp)  # (m, h)
            mask = np.ones((m, n_items), dtype=bool)
            mask[np.repeat(np.arange(m), h), hist.ravel()] = False
            width = n_items - n_hist
            pools = (np.flatnonzero(mask) - np.repeat(np.arange(m) * n_items, width)).reshape(m, width)
            folded = np.take(self.V, hist, axis=0).sum(axis=1)  # (m, f): each row as V[hist_pos].sum(axis=0)
            pref = np.empty((m, width))
            for r in range(m):
                pref[r] = np.take(self.V, pools[r], axis=0) @ folded[r]
            sd = pref.std(axis=1)
            centred = pref - pref.mean(axis=1)[:, None]
            with np.errstate(divide="ignore", invalid="ignore"):
                z = np.where((sd > 0)[:, None], centred / sd[:, None], centred)
            for r, (mk, (req, key, _)) in enumerate(members):
                out[mk] = self._new_core(req, mk, key, pools[r].copy(), z[r].copy())
        return out

    def _attrs(self, req: PromptRequest, meta: Mapping, lines: list | None) -> tuple:
        """(shown attributes, their sorted items, how many of them the bias table pushes); memoised by the
        demographic lines for the text-reading simulator (its only input there)."""
        if lines is not None:
            mk = tuple(lines)
            got = self._attrs_memo.get(mk)
            if got is not None:
                return got
        attrs = self._shown_attrs(req, meta, lines)
        got = (attrs, tuple(sorted(attrs.items())), int(sum(1 for a, v in attrs.items() if (a, v) in self._push)))
        if lines is not None:
            if len(self._attrs_memo) > 10_000:
                self._attrs_memo.clear()
            self._attrs_memo[mk] = got
        return got

    def _applicable(self, parsed: _Parsed, attrs: Mapping, attrs_key: tuple) -> tuple:
        """The rules of ``parsed`` that name the shown attribute values, in prompt order (memoised)."""
        mk = (parsed.rules, attrs_key)
        got = self._applicable_memo.get(mk)
        if got is None:
            got = tuple(r for r in parsed.rules if self._rule_applies(r[0], r[1], attrs))
            if len(self._applicable_memo) > 10_000:
                self._applicable_memo.clear()
            self._applicable_memo[mk] = got
        return got

    def _named(self, honoured: tuple) -> np.ndarray:
        """Items the honoured rules name (``(target, kind)`` pairs), a read-only mask (memoised)."""
        got = self._named_memo.get(honoured)
        if got is None:
            got = np.zeros(len(self.item_ids), dtype=bool)
            for target, kind in honoured:
                if kind == "feature":
                    got |= self._mask_of(target)
                else:
                    p = self._title_pos.get(target)
                    if p is not None:
                        got[p] = True
            got.flags.writeable = False
            if len(self._named_memo) > 1_000:
                self._named_memo.clear()
            self._named_memo[honoured] = got
        return got

    def _inputs(self, req: PromptRequest, cores: Mapping | None = None) -> _Inputs:
        """What a request's scores are built from (the per-request part of an answer, shared by the batched
        path and :meth:`_predict_one`): its core, its base scores (surface terms added), the bias strength,
        the push vectors, the rules and which of them are honoured."""
        meta = req.meta_dict
        core = cores.get(self._core_key(req, meta)[2]) if cores else None
        if core is None:
            core = self._core(req, meta)
        pool = core.pool
        base = core.base
        lines = None
        meaning = None
        if self.reads == "text":
            lines = demographic_lines(req)  # parsed once: the surface terms and the shown attributes
            surface = self._surface_noise(req, core.key, len(pool), lines)
            if surface is not None:
                base = base + surface
            meaning = self._meaning_noise(req, core.key, len(pool), lines)
            if meaning is not None:
                base = base + meaning
        # bias
        attrs, attrs_key, n_pushed_attrs = self._attrs(req, meta, lines)
        system = "\n".join(c for r, c in req.messages if r == "system")
        parsed = self._parse_system(system)
        strength = self.beta * (1.0 - self.phi if parsed.fair else 1.0)
        push_full, pushed_full = self._push_masks(attrs, attrs_key)
        # rules
        applicable = self._applicable(parsed, attrs, attrs_key) if parsed.rules else ()
        honoured = []
        for rule in applicable:
            if self.rho < 1.0:
                u = core.rule_draws.get(rule)
                if u is None:
                    attr, value, target, kind = rule
                    u = np.random.default_rng(_hash64("rule", attr, value, target, kind, *core.key)).random()
                    core.rule_draws[rule] = u
                if u >= self.rho:
                    continue
            honoured.append((rule[2], rule[3]))
        named = self._named(tuple(honoured)) if honoured else None
        k = int(req.k) if self.protocol == "open" else min(int(req.k), len(pool))
        return _Inputs(
            core,
            base,
            float(strength),
            push_full,
            pushed_full,
            named,
            n_pushed_attrs,
            parsed,
            len(applicable),
            len(honoured),
            k,
            meaning,
        )

    def _explain(self, req: PromptRequest) -> dict:
        """One request's order and truth, numpy over its pool (the per-request reference path)."""
        x = self._inputs(req)
        core, pool, base, strength, named = x.core, x.core.pool, x.base, x.strength, x.named
        push_full, pushed_full, parsed, k, meaning = x.push_full, x.pushed_full, x.parsed, x.k, x.meaning
        unbiased = base - self.demote * named[pool] if named is not None else base
        if strength > 0:
            push = push_full[pool]
            if named is not None and self.compliance == "relative":
                push = np.where(named[pool], 0.0, push)  # an honoured rule cancels the push on what it names
            score = unbiased + strength * push
        else:
            score = unbiased
        n_keep = k if self.protocol == "open" else len(pool)
        order = pool[self._top(score, n_keep)]
        order0 = pool[self._top(unbiased, k)] if strength > 0 else order[:k]
        top, top0 = order[:k], order0[:k]
        # the demographics-blind answer: no push and no rules (the same noise)
        blind = order0 if named is None else pool[self._top(base, k)]
        set_top, set_top0 = set(top.tolist()), set(top0.tolist())
        extra = {}
        if meaning is not None:  # what the meaning term moved: the same answer without it (all else kept)
            top_m = pool[self._top(score - meaning, k)]
            extra = {
                "meaning_top1_changed": bool(top[0] != top_m[0]),
                "meaning_topk_changed": bool(set_top != set(top_m.tolist())),
            }
        return {
            "order": order,
            "k": k,
            "core": core,
            "truth": {
                **extra,
                "bias_strength": float(strength),
                "n_pushed_attrs": x.n_pushed_attrs,
                "top1_changed": bool(top[0] != top0[0]),
                "topk_changed": bool(set_top != set_top0),
                "n_changed": int(len(set_top - set_top0)),
                "n_pushed_topk": int(pushed_full[top].sum()),
                "n_pushed_topk_unbiased": int(pushed_full[top0].sum()),
                "top1_unbiased": int(self.item_ids[top0[0]]),
                "top1_unfair": bool(top[0] != blind[0]),
                "top1_blind": int(self.item_ids[blind[0]]),
                "n_rules": int(len(parsed.rules)),
                "n_rules_applicable": x.n_applicable,
                "n_rules_honoured": x.n_honoured,
                "fair_prompt": bool(parsed.fair),
            },
        }

    def _corruption_draws(self, core: _Core, n: int) -> tuple:
        """(uniform draw, variant) per returned title: the noise generator continued after the noise
        draw (its saved state), memoised per answer length."""
        got = core.corr.get(n)
        if got is None:
            bits = np.random.PCG64(0)  # any seed: the saved state replaces it entirely
            bits.state = core.state
            rng = np.random.Generator(bits)
            got = core.corr[n] = (rng.random(n).tolist(), rng.integers(N_VARIANTS, size=n).tolist())
        return got

    def _corrupted(self, pos: int, variant: int) -> str:
        mk = (pos, variant)
        got = self._corrupt_memo.get(mk)
        if got is None:
            got = self._corrupt_memo[mk] = self._corrupt(pos, variant)[1]
        return got

    def _corrupt(self, pos: int, variant: int) -> tuple:
        """Corrupted version number ``variant`` (0, 1, 2) of item ``pos``: ("typo" | "no_year" | "invented", text).

        Each item has :data:`N_VARIANTS` fixed corruptions (a model's mistakes repeat), so that the set of
        strings the catalogue mapper must embed stays bounded and cached across runs.
        """
        rng = np.random.default_rng(_hash64("corrupt", self.seed, int(pos), int(variant)))
        title = self.titles[pos]
        kind = ("typo", "no_year", "invented")[int(variant) % 3]
        if kind == "no_year" and _YEAR.search(title):
            return kind, _YEAR.sub("", title)
        if kind == "invented" or not title:
            a = int(rng.integers(len(self.titles)))
            wa = _YEAR.sub("", title).split()
            wb = _YEAR.sub("", self.titles[a]).split()
            words = (wa[: max(1, len(wa) // 2)] + wb[len(wb) // 2 :]) or ["Untitled"]
            return "invented", f"{' '.join(words)} ({int(rng.integers(1930, 2001))})"
        base = _YEAR.sub("", title)
        year = title[len(base) :]
        if len(base) < 3:
            return "typo", base + base[-1:] + year
        i = int(rng.integers(len(base) - 1))
        chars = list(base)
        if rng.random() < 0.5:
            del chars[i]
        else:
            chars[i], chars[i + 1] = chars[i + 1], chars[i]
        return "typo", "".join(chars) + year

    def _predict_one(self, req: PromptRequest) -> Prediction:
        """One request's answer, numpy over its pool alone: the per-request path that :meth:`predict` answered
        every request with before its batched path.  Kept as the reference the batched path is tested
        against, answer by answer (tests/models/test_simulated_batched.py), and for the requests the batched
        path leaves to it (an answer shorter than k, a k below 1)."""
        ex = self._explain(req)
        order, k, truth = ex["order"], ex["k"], ex["truth"]
        if self.protocol == "rank":
            ranked = tuple(self.titles[p] for p in order.tolist())
            truth["n_corrupted"] = 0
            return Prediction(
                titles=ranked,
                parse_status=PARSE_NA,
                raw=_TRUTH_JSON.encode(truth),
                n_model_positions=len(ranked),
            )
        top = order[:k].tolist()
        titles = [self.titles[p] for p in top]
        corrupted = 0
        if self.h > 0:
            draws, variants = self._corruption_draws(ex["core"], len(titles))
            for i in range(len(titles)):
                if draws[i] < self.h:
                    titles[i] = self._corrupted(top[i], variants[i])
                    corrupted += 1
        truth["n_corrupted"] = corrupted
        return Prediction(titles=tuple(titles), parse_status=PARSE_NA, raw=_TRUTH_JSON.encode(truth))

    # ------------------------------------------------------------------ a batch of requests
    @staticmethod
    def _top_rows(score: np.ndarray, k: int) -> np.ndarray:
        """Per row of ``score`` (no NaN) the indices of its k largest scores, best first, ties by index: row
        by row equal to ``np.argsort(-row, kind="stable")[:k]``, as :meth:`_top` is.

        A threshold first: each row's k-th largest score among every :data:`TOP_STRIDE`-th column, at most
        the row's own k-th largest, so every score at least as large (the top k and its ties among them) is
        a candidate, about ``k * TOP_STRIDE`` per row; the candidates are then sorted by score and index."""
        n_rows, n = score.shape
        if k >= n or n <= 64:
            return np.argsort(-score, axis=1, kind="stable")[:, :k]
        sample = score[:, ::TOP_STRIDE] if n // TOP_STRIDE >= k else score
        kth = -np.partition(-sample, k - 1, axis=1)[:, k - 1]  # at most each row's k-th largest score
        flat = np.flatnonzero(score >= kth[:, None])  # the candidates, by row, then index
        rows = flat // n
        counts = np.bincount(rows, minlength=n_rows)  # at least k per row
        slot = np.arange(len(flat)) - np.repeat(np.cumsum(counts) - counts, counts)
        # each row's candidates side by side, padded with minus infinity after them (so after any candidate
        # at minus infinity too, in a stable sort); sorted by score, ties by index, the first k kept
        cand = np.full((n_rows, int(counts.max())), -np.inf)
        cand[rows, slot] = score.ravel()[flat]
        index = np.zeros(cand.shape, dtype=np.intp)
        index[rows, slot] = flat - rows * n
        best = np.argsort(-cand, axis=1, kind="stable")[:, :k]
        return np.take_along_axis(index, best, axis=1)

    def _predict_batch(self, requests: Sequence[PromptRequest]) -> list:
        """The answers to ``requests``, each equal to :meth:`_predict_one`'s, byte for byte.

        The per-request part (:meth:`_inputs`: the memoised core, the attributes, the rules) stays a loop;
        the scores, their top k (three times: with the bias, without it, demographics-blind) and the truth's
        counts are computed for the whole batch at once, with the same floating-point operations on each
        element as the per-request path (so the same order).  Open generation scores each request over the
        whole catalogue (its history at minus infinity, so that ties still go to the lower catalogue position,
        as in the request's pool); re-ranking over its candidates, requests grouped by their number.  A batch
        is taken in windows of ``BATCH_ELEMENTS // catalogue size`` requests, so that the cores and scores it
        holds at once stay near :data:`BATCH_ELEMENTS` numbers, whatever its size."""
        requests = list(requests)
        out: list = [None] * len(requests)
        n_items = len(self.item_ids)
        window = max(1, BATCH_ELEMENTS // max(1, n_items))
        for start in range(0, len(requests), window):
            part = requests[start : start + window]
            groups: dict = {}
            cores = self._cores(part)  # the window's missing cores at once (open generation)
            for i, req in enumerate(part, start):
                x = self._inputs(req, cores)
                n = len(x.core.pool)
                if x.k < 1 or (self.protocol == "open" and x.k > n):
                    # a short answer, or the reference path's error: the per-request path
                    out[i] = self._predict_one(req)
                    continue
                groups.setdefault((n_items if self.protocol == "open" else n, x.k), []).append((i, x))
            for (width, k), members in groups.items():
                step = max(1, BATCH_ELEMENTS // width)
                for j in range(0, len(members), step):
                    self._answer_chunk(members[j : j + step], width, k, out)
        return out

    def _answer_chunk(self, members: list, width: int, k: int, out: list) -> None:
        """:meth:`_predict_batch` for requests of one score width and one k: their predictions into ``out``."""
        xs = [x for _, x in members]
        n_rows = len(xs)
        rows = np.arange(n_rows)
        # the requests' push vectors and named masks, each distinct one once (most requests share them)
        slot: dict = {}
        pushes: list = []
        pushed_masks: list = []
        for x in xs:
            if id(x.push_full) not in slot:
                slot[id(x.push_full)] = len(pushes)
                pushes.append(x.push_full)
                pushed_masks.append(x.pushed_full)
        which = np.fromiter((slot[id(x.push_full)] for x in xs), dtype=np.intp, count=n_rows)
        with_named = np.fromiter((x.named is not None for x in xs), dtype=bool, count=n_rows)
        strength = np.fromiter((x.strength for x in xs), dtype=np.float64, count=n_rows)
        any_named, biased = bool(with_named.any()), strength > 0
        if self.protocol == "open":  # catalogue space: a request's pool at its items, minus infinity elsewhere
            pools = None
            base = np.full((n_rows, width), -np.inf)
            at = np.repeat(rows * width, [len(x.core.pool) for x in xs]) + np.concatenate([x.core.pool for x in xs])
            base.ravel()[at] = np.concatenate([x.base for x in xs])
            push = np.stack(pushes)[which] if biased.any() else None
            named = np.stack([x.named if x.named is not None else self._no_named for x in xs]) if any_named else None
        else:  # pool space: a request's candidates, in their order
            pools = np.stack([x.core.pool for x in xs])
            base = np.stack([x.base for x in xs])
            push = np.stack(pushes)[which[:, None], pools] if biased.any() else None
            named = (
                np.stack([x.named if x.named is not None else self._no_named for x in xs])[rows[:, None], pools]
                if any_named
                else None
            )
        # the per-request path's operations, element by element
        unbiased = base - self.demote * named if named is not None else base
        if push is not None:
            if named is not None and self.compliance == "relative":
                push = np.where(named, 0.0, push)  # an honoured rule cancels the push on what it names
            score = unbiased + strength[:, None] * push  # + 0.0 where the strength is 0: the same order
        else:
            score = unbiased
        order = self._top_rows(score, k if self.protocol == "open" else width)
        top = order[:, :k]
        top0 = top.copy()
        if push is not None:
            top0[biased] = self._top_rows(unbiased[biased], k)
        blind = top0.copy()
        if named is not None:
            blind[with_named] = self._top_rows(base[with_named], k)
        # the meaning term's truth (the testbed's `semantic` case): the same answer without that term
        with_meaning = [b for b, x in enumerate(xs) if x.meaning is not None]
        top_m = None
        if with_meaning:
            m_rows = np.asarray(with_meaning, dtype=np.intp)
            meaning = np.zeros((len(m_rows), width))
            if pools is None:  # catalogue space: each term at its request's pool (minus infinity stays elsewhere)
                pools_m = [xs[b].core.pool for b in with_meaning]
                at = np.repeat(np.arange(len(m_rows)) * width, [len(p) for p in pools_m]) + np.concatenate(pools_m)
                meaning.ravel()[at] = np.concatenate([xs[b].meaning for b in with_meaning])
            else:
                meaning[:] = np.stack([xs[b].meaning for b in with_meaning])
            top_m = self._top_rows(score[m_rows] - meaning, k)
            if pools is not None:
                top_m = np.take_along_axis(pools[m_rows], top_m, axis=1)
        if pools is not None:  # pool indices -> catalogue positions
            order, top, top0, blind = (np.take_along_axis(pools, a, axis=1) for a in (order, top, top0, blind))
        meaning_top = dict(zip(with_meaning, top_m.tolist())) if top_m is not None else {}
        stacked = np.stack(pushed_masks)
        n_pushed = stacked[which[:, None], top].sum(axis=1).tolist()
        n_pushed0 = stacked[which[:, None], top0].sum(axis=1).tolist()
        top1_unbiased = self.item_ids[top0[:, 0]].tolist()
        top1_blind = self.item_ids[blind[:, 0]].tolist()
        order_l, top_l, top0_l, blind1 = order.tolist(), top.tolist(), top0.tolist(), blind[:, 0].tolist()
        for b, (i, x) in enumerate(members):
            t, t0 = top_l[b], top0_l[b]
            set_top, set_top0 = set(t), set(t0)
            truth = {
                "bias_strength": x.strength,
                "n_pushed_attrs": x.n_pushed_attrs,
                "top1_changed": t[0] != t0[0],
                "topk_changed": set_top != set_top0,
                "n_changed": len(set_top - set_top0),
                "n_pushed_topk": n_pushed[b],
                "n_pushed_topk_unbiased": n_pushed0[b],
                "top1_unbiased": top1_unbiased[b],
                "top1_unfair": t[0] != blind1[b],
                "top1_blind": top1_blind[b],
                "n_rules": len(x.parsed.rules),
                "n_rules_applicable": x.n_applicable,
                "n_rules_honoured": x.n_honoured,
                "fair_prompt": x.parsed.fair,
            }
            tm = meaning_top.get(b)
            if tm is not None:
                truth["meaning_top1_changed"] = t[0] != tm[0]
                truth["meaning_topk_changed"] = set_top != set(tm)
            if self.protocol == "rank":
                ranked = tuple(self.titles[p] for p in order_l[b])
                truth["n_corrupted"] = 0
                out[i] = Prediction(
                    titles=ranked, parse_status=PARSE_NA, raw=_TRUTH_JSON.encode(truth), n_model_positions=len(ranked)
                )
                continue
            titles = [self.titles[p] for p in t]
            corrupted = 0
            if self.h > 0:
                draws, variants = self._corruption_draws(x.core, len(titles))
                for j in range(len(titles)):
                    if draws[j] < self.h:
                        titles[j] = self._corrupted(t[j], variants[j])
                        corrupted += 1
            truth["n_corrupted"] = corrupted
            out[i] = Prediction(titles=tuple(titles), parse_status=PARSE_NA, raw=_TRUTH_JSON.encode(truth))

    def truth(self, req: PromptRequest) -> dict:
        """What the bias and the rules did to this request's answer (module docstring)."""
        return json.loads(self._predict_batch([req])[0].raw)

    def predict(self, requests: Sequence[PromptRequest]) -> list:
        """Answer each request independently (batch composition never changes an answer): numpy over the
        batch (:meth:`_predict_batch`), each answer byte-identical to :meth:`_predict_one`'s; a batch of fewer
        than :data:`SMALL_BATCH` requests by :meth:`_predict_one` itself."""
        self.n_batches += 1
        self.n_calls += len(requests)
        if len(requests) < SMALL_BATCH:  # the per-attribute twins of one row (3), a single request
            return [self._predict_one(r) for r in requests]
        return self._predict_batch(requests)


def _checked_table(spec, inter) -> dict:
    """The bias table checked against the run's dataset (docs/SIMULATED.md): a table you wrote (a file) must
    name only the dataset's attributes, values and features; a built-in table (written for the MovieLens
    vocabularies, where a value not listed gets no push) must at least name attributes the dataset has."""
    table = load_bias_table(spec)  # read once: the recommender is built from this table
    values = getattr(inter, "attribute_values", None)
    if not values:
        return table
    name = spec if isinstance(spec, str) else "(mapping)"
    if isinstance(spec, str) and spec in NAMED_BIAS_TABLES:
        missing = [a for a in table if a not in values]
        if missing:
            raise ValueError(
                f"sim.bias_table {spec!r} is written for MovieLens's attributes ({', '.join(table)}); dataset "
                f"{inter.dataset!r} has {', '.join(values)}: pass your own table (--sim-bias-table FILE, docs/OWN_DATA.md)"
            )
        return table
    features = {f for fs in inter.items["features"] for f in fs}
    check_bias_table(table, values, features, name)
    return table


def _fingerprint(
    protocol: str,
    knobs: Mapping,
    seed: int,
    table: Mapping,
    train: pd.DataFrame,
    reads: str,
    trigger: str,
    surface: Mapping,
) -> str:
    """The recommender's fingerprint (part of the run id): its knobs, bias table and training pairs."""
    pairs = np.ascontiguousarray(train[["user_id", "item_id"]].to_numpy(dtype=np.int64))
    data_tag = hashlib.sha256(pairs.tobytes()).hexdigest()[:10]
    table_tag = hashlib.sha256(json.dumps(table, sort_keys=True).encode()).hexdigest()[:6]
    k = knobs
    fp = (
        f"{SIMULATED_MODEL}:{protocol}:{SIM_VERSION}:b{k['beta']:g}-s{k['sigma']:g}-r{k['rho']:g}"
        f"-h{k['h']:g}-phi{k['phi']:g}-d{k['demote']:g}-c{k['compliance'][0]}-f{k['n_factors']}-seed{seed}"
        f"-bt{table_tag}-train{data_tag}"
    )
    if reads == "text":  # the text-reading variant (sim-v2 fingerprints unchanged)
        tags = "".join(f"-{name[0]}{v:g}" for name, v in surface.items() if v)
        fp += f"-text-{trigger}{tags}"
    return fp


def simulated_fingerprint(cfg, inter) -> str:
    """The fingerprint :func:`simulated_from_config` would give its recommender, without building it
    (no preference fit): what a saved run's lookup needs (:func:`facterlab.reporting.experiments.find_saved_run`).
    A config the recommender would refuse gets a fingerprint all the same (no saved run can have it)."""
    sim = cfg.sim
    knobs = {
        "beta": float(sim.beta),
        "sigma": float(sim.sigma),
        "rho": float(sim.rho),
        "h": float(sim.h),
        "phi": float(sim.phi),
        "demote": float(sim.demote),
        "compliance": str(sim.compliance),
        "n_factors": int(sim.n_factors),
    }
    surface = {
        "order": float(sim.order_sd),
        "wording": float(sim.wording_sd),
        "field": float(sim.field_sd),
        "prompt": float(sim.prompt_sd),
        "temperature": float(sim.temperature),
        "meaning": float(sim.meaning_sd),
    }
    table = load_bias_table(sim.bias_table)
    # the training pairs are a function of the rows: computed once per interactions object in a process (a
    # notebook looks up dozens of runs on the same rows, through one object per row sample)
    got = _TRAIN_PAIRS.get(id(inter))
    if got is None or got[0] is not inter.rows:
        pairs = training_pairs(pd.concat([inter.calib, inter.test], ignore_index=True))
        got = _TRAIN_PAIRS[id(inter)] = (inter.rows, pairs)
        while len(_TRAIN_PAIRS) > _TRAIN_PAIRS_MAX:
            _TRAIN_PAIRS.pop(next(iter(_TRAIN_PAIRS)))
    return _fingerprint(cfg.protocol, knobs, int(sim.seed), table, got[1], str(sim.reads), str(sim.trigger), surface)


#: :func:`simulated_fingerprint`'s training pairs: id(interactions) -> (its rows frame, which the entry keeps
#: alive and a hit must be, pairs); the oldest dropped first
_TRAIN_PAIRS: dict = {}
_TRAIN_PAIRS_MAX = 16


def simulated_from_config(cfg, inter) -> SimulatedRecommender:
    """The simulated recommender of a :class:`~facterlab.config.RunConfig` (its ``sim`` section and
    protocol), fitted on the training histories of ``inter``'s calibration and test rows."""
    rows = pd.concat([inter.calib, inter.test], ignore_index=True)
    # every knob of the sim section is a keyword of the recommender, under the same name
    knobs = {f.name: getattr(cfg.sim, f.name) for f in dataclasses.fields(cfg.sim)}
    knobs["bias_table"] = _checked_table(knobs.get("bias_table"), inter)  # checked against the dataset
    return SimulatedRecommender(inter.items, training_pairs(rows), protocol=cfg.protocol, **knobs)
