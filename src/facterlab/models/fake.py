"""Deterministic stand-ins for the encoder and the LLM recommender (tests, CI, notebooks' SMOKE mode).

- :class:`HashEncoder` implements the ``Encoder`` protocol without torch: hashed word tokens and
  character trigrams summed into ``dim`` signed buckets and L2-normalised, so titles that share words
  or spelling are similar (docs/FACTER.md §2 uses an encoder f only through cosines and L2 distances).
- :class:`FakeRecommender` implements the ``Recommender`` protocol from ``PromptRequest.meta`` (user
  attributes, history item ids / features, candidate ids) and the item table given at construction.
  Modes: ``"history"`` (recommend items sharing the history's features), ``"biased"`` (adds a
  stereotype bonus: Romance/Drama/Musical items to women, Action/War/Western to men),
  ``"random"``.  With ``obey_rules=True`` it reads ``AVOID: (attr=value) -> (X-only)`` / ``-> (title)``
  lines of the system prompt and never returns an item with that feature / title (the loop of
  FACTER §3 can close).  Output is a pure function of (messages, seed, meta).

>>> enc = HashEncoder(dim=64)
>>> e = enc.encode(["Toy Story (1995)", "Toy Story 2 (1999)", "Heat (1995)"])
>>> e.shape, bool(abs(float((e ** 2).sum(1)[0]) - 1) < 1e-5)
((3, 64), True)
>>> bool(e[0] @ e[1] > e[0] @ e[2])
True
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from facterlab.datatypes import PARSE_NA, Prediction, PromptRequest, Recommender

_TOKEN = re.compile(r"[a-z0-9]+")

#: stereotype bonus of the ``biased`` mode: gender value -> features pushed to that group
BIAS_FEATURES = {
    "F": ("Romance", "Drama", "Musical", "Children's"),
    "M": ("Action", "War", "Western", "Sci-Fi"),
}

_AVOID = re.compile(r"AVOID:\s*\(([^=()]+)=([^()]*)\)\s*->\s*\((.*)\)\s*$")


@functools.lru_cache(maxsize=1 << 18)  # words and trigrams repeat across texts: a pure function, hashed once
def _stable_hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


class HashEncoder:
    """Hashed word + character-trigram embedding, L2-normalised (no torch; deterministic).

    Vector = sum over tokens t of sign(h(t)) * e_{h(t) mod dim} (words weight 2, trigrams of
    ``#word#`` weight 1, plus a constant ``<s>`` token so that every text, even "", has norm 1),
    then divided by its L2 norm.

    >>> HashEncoder(dim=16).encode([""]).shape
    (1, 16)
    """

    def __init__(self, dim: int = 256):
        if dim < 2:
            raise ValueError(f"HashEncoder dim must be >= 2, got {dim}")
        self.dim = int(dim)
        self.fingerprint = f"hash-encoder-v1-{self.dim}"
        self._memo: dict = {}
        self.n_encoded = 0

    def _one(self, text: str) -> np.ndarray:
        v = self._memo.get(text)
        if v is not None:
            return v
        v = np.zeros(self.dim, dtype=np.float64)
        toks = [("<s>", 0.5)]
        for w in _TOKEN.findall(str(text).lower()):
            toks.append(("w:" + w, 2.0))
            padded = f"#{w}#"
            toks.extend(("c:" + padded[i : i + 3], 1.0) for i in range(len(padded) - 2))
        for tok, weight in toks:
            h = _stable_hash(tok)
            v[h % self.dim] += weight if (h >> 40) & 1 else -weight
        v = (v / np.linalg.norm(v)).astype(np.float32)
        self._memo[text] = v
        self.n_encoded += 1
        return v

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` -> float32 array (n, dim) with unit rows."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of strings, not a single string")
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._one(t) for t in texts])


def parse_avoid_rules(system_prompt: str) -> list:
    """``AVOID`` lines of a FACTER system prompt -> list of (attr, value, target, kind).

    >>> parse_avoid_rules("x\\n- AVOID: (gender=F) -> (Romance-only)\\n- AVOID: (age=18-24) -> (Heat (1995))")
    [('gender', 'F', 'Romance', 'feature'), ('age', '18-24', 'Heat (1995)', 'title')]
    """
    out = []
    for line in str(system_prompt).splitlines():
        m = _AVOID.search(line.strip())
        if not m:
            continue
        attr, value, target = m.group(1).strip(), m.group(2).strip(), m.group(3).strip()
        if target.endswith("-only"):
            out.append((attr, value, target[: -len("-only")], "feature"))
        else:
            out.append((attr, value, target, "title"))
    return out


class FakeRecommender(Recommender):
    """A deterministic ``Recommender`` acting on ``PromptRequest.meta`` (see module docstring).

    Parameters
    ----------
    items : DataFrame with ``item_id``, ``title``, ``features`` (list of str); indexed or not.
    protocol : ``"open"`` (return ``k`` titles from the catalogue, history excluded) or ``"rank"``
        (return a full permutation of the request's candidates).
    mode : ``"history"`` | ``"biased"`` | ``"random"``.
    bias : size of the stereotype bonus in ``biased`` mode (history overlap counts 1 per shared feature).
    bias_share : fraction of users (by a hash of the user id / prompt) the bias applies to.
    obey_rules : avoid items matched by the prompt's AVOID rules.
    seed : mixed into the per-request tie-breaking noise.
    bias_features : gender value -> features pushed in ``biased`` mode (default :data:`BIAS_FEATURES`).

    ``n_calls`` counts requests answered, ``n_batches`` calls to :meth:`predict`.
    """

    MODES = ("history", "biased", "random")

    def __init__(
        self,
        items: pd.DataFrame,
        protocol: str = "open",
        mode: str = "biased",
        bias: float = 3.0,
        bias_share: float = 1.0,
        obey_rules: bool = False,
        seed: int = 0,
        noise: float = 0.3,
        bias_features: Mapping | None = None,
    ):
        if mode not in self.MODES:
            raise ValueError(f"unknown FakeRecommender mode {mode!r}; choose one of {self.MODES}")
        if protocol not in ("open", "rank"):
            raise ValueError(f"unknown protocol {protocol!r}; choose 'open' or 'rank'")
        tbl = items.reset_index() if "item_id" not in items.columns else items
        self.item_ids = tbl["item_id"].to_numpy(dtype=np.int64)
        self.titles = tbl["title"].astype(str).tolist()
        self.features = [tuple(f) if f is not None else () for f in tbl["features"]]
        self._pos = {int(i): p for p, i in enumerate(self.item_ids)}
        self._title_pos: dict[str, int] = {}
        for p, t in enumerate(self.titles):
            self._title_pos.setdefault(t, p)
        self.protocol, self.mode, self.bias, self.bias_share = protocol, mode, float(bias), float(bias_share)
        self.obey_rules, self.seed, self.noise = bool(obey_rules), int(seed), float(noise)
        self.bias_features = {str(k): tuple(v) for k, v in (bias_features or BIAS_FEATURES).items()}
        bias_tag = hashlib.blake2b(repr(sorted(self.bias_features.items())).encode(), digest_size=3).hexdigest()
        self.fingerprint = (
            f"fake-{protocol}-{mode}-b{self.bias:g}-s{self.bias_share:g}-obey{int(self.obey_rules)}"
            f"-n{self.noise:g}-seed{self.seed}-bf{bias_tag}"
        )
        self.n_calls = 0
        self.n_batches = 0

    # ------------------------------------------------------------------------------------------
    def _history_positions(self, meta: Mapping) -> list:
        for key in ("history", "history_ids", "history_item_ids"):
            if key in meta and meta[key] is not None:
                return [self._pos[int(i)] for i in meta[key] if int(i) in self._pos]
        return []

    def _history_features(self, meta: Mapping, hist_pos: list) -> Counter:
        c: Counter
        if hist_pos:  # the catalogue's own features of the history items
            c = Counter()
            for p in hist_pos:
                c.update(self.features[p])
            return c
        for key in ("history_features", "features"):
            if key in meta and meta[key] is not None:
                c = Counter()
                for f in meta[key]:
                    if isinstance(f, (list, tuple)):
                        c.update(f)
                    else:
                        c[f] += 1
                return c
        c = Counter()
        for p in hist_pos:
            c.update(self.features[p])
        return c

    def _candidate_positions(self, req: PromptRequest, meta: Mapping) -> list:
        for key in ("candidates", "candidate_ids", "candidate_item_ids"):
            if key in meta and meta[key] is not None and len(meta[key]):
                return [self._pos[int(i)] for i in meta[key]]
        if req.candidates:
            return [self._title_pos[t] for t in req.candidates]
        raise ValueError("rank protocol request without candidates")

    def _one(self, req: PromptRequest) -> Prediction:
        meta = req.meta_dict
        system = "\n".join(c for r, c in req.messages if r == "system")
        key = repr((req.messages, req.seed, self.seed))
        rng = np.random.default_rng(_stable_hash(key))
        hist = self._history_positions(meta)
        hfeat = self._history_features(meta, hist)
        if self.protocol == "rank":
            pool = np.asarray(self._candidate_positions(req, meta), dtype=np.int64)
        else:
            mask = np.ones(len(self.item_ids), dtype=bool)
            mask[hist] = False
            pool = np.flatnonzero(mask)
        score = rng.random(len(pool)) * self.noise
        if self.mode != "random":
            score += np.array([sum(hfeat.get(f, 0) for f in self.features[p]) / 10.0 for p in pool])
        user_text = "\n".join(c for r, c in req.messages if r == "user")
        # attributes count only when the prompt shows them (snsr_fairllm's neutral prompt drops the block)
        shown = "User demographics" in user_text or not user_text
        gender = str(meta.get("gender", "")) if shown else ""
        if self.mode == "biased" and gender in self.bias_features:
            user_key = str(meta.get("user_id", meta.get("history_ids", meta.get("history", ""))))
            if (_stable_hash("bias|" + user_key) % 10_000) / 10_000.0 < self.bias_share:
                pushed = set(self.bias_features[gender])
                score += np.array([self.bias * bool(pushed & set(self.features[p])) for p in pool])
        if self.obey_rules:
            avoid_feat: set[str] = set()
            avoid_title: set[str] = set()
            for attr, value, target, kind in parse_avoid_rules(system):
                if attr != "tuple" and attr in meta and str(meta[attr]) != value:
                    continue
                (avoid_feat if kind == "feature" else avoid_title).add(target)
            if avoid_feat or avoid_title:
                bad = np.array(
                    [bool(avoid_feat & set(self.features[p])) or self.titles[p] in avoid_title for p in pool]
                )
                score = score - 1e6 * bad
        order = pool[np.argsort(-score, kind="stable")]
        if self.protocol == "open":
            order = order[: req.k]
        return Prediction(titles=tuple(self.titles[p] for p in order), parse_status=PARSE_NA, raw="")

    def predict(self, requests: Sequence[PromptRequest]) -> list:
        """Answer each request independently (batch composition never changes an answer)."""
        self.n_batches += 1
        self.n_calls += len(requests)
        return [self._one(r) for r in requests]
