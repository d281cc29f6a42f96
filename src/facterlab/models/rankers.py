"""LLM recommenders for the open and re-ranking protocols (docs/FACTER.md §1.3, §5).

* ``protocol="open"``: generate, parse up to ``k`` titles (:func:`~facterlab.models.parsing.parse_titles`).
* ``protocol="rank"``, ``ranker="generate"`` (REPRO): the LLM writes a ranked JSON list of candidate
  titles; each parsed title is matched to an unused candidate (exact after normalisation, else the
  rapidfuzz ``WRatio`` best match with score >= ``FUZZY_CUTOFF``); the permutation is the matched
  candidates in model order followed by the unmatched ones in list order;
  ``n_model_positions`` = number matched.
* ``protocol="rank"``, ``ranker="likelihood"``: each candidate title ``c`` is scored by
  ``sum_j log p(c_j | prompt, c_<j)`` (the assistant turn's first tokens); candidates are ranked by the
  summed log-probability (ties: list order); ``raw`` holds the sums and per-token means as JSON.

Prompt truncation: when a prompt exceeds ``max_prompt_tokens`` (default: the context window minus
the generation budget), the oldest history titles are dropped one at a time from the user message and
the prompt is re-rendered until it fits; ``Prediction.n_truncated_history`` counts them.  The history
titles are taken from the request's ``meta["history_titles"]`` when present (oldest first), else from
the numbered/bulleted lines that follow a line mentioning "history" in the user message.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from facterlab.config import PROTOCOLS, ModelConfig, is_rest_name
from facterlab.data.titles import normalise_title
from facterlab.datatypes import Prediction, PromptRequest, Recommender
from facterlab.models.cache import CachedRecommender, PredictionCache
from facterlab.models.custom import RestRecommender
from facterlab.models.device import resolve_device
from facterlab.models.llm import DecodingParams, effective_kernel, lm_fingerprint, load_lm
from facterlab.models.parsing import PARSER_VERSION, parse_titles, ranked_by_scores
from facterlab.models.registry import resolve_llm, served_model_id
from facterlab.models.served import ServedRecommender, probe_server, served_fingerprint, server_of

__all__ = [
    "LLMRecommender",
    "make_recommender",
    "match_to_candidates",
    "truncate_history",
    "PROMPT_TOO_LONG_MSG",
    "FUZZY_CUTOFF",
]

FUZZY_CUTOFF = 85.0
PROMPT_TOO_LONG_MSG = (
    "the prompt has {n} tokens, more than the limit of {limit} (max_prompt_tokens or the "
    "context window minus the generation budget), even after dropping all {h} history titles"
)

_HIST_HEAD_RE = re.compile(r"history", re.I)
_ITEM_LINE_RE = re.compile(r"^\s*(?:\d{1,3}[.)]|[-*\u2022])\s+(.*\S)\s*$")


def match_to_candidates(titles: Sequence[str], candidates: Sequence[str], cutoff: float = FUZZY_CUTOFF) -> tuple:
    """Map parsed titles to a permutation of ``candidates``; return ``(permutation, n_matched)``.

    Exact match on :func:`facterlab.data.titles.normalise_title` (case, accents, punctuation,
    trailing year, "Matrix, The" order; the key the catalogue mapping uses too), else the
    best rapidfuzz ``WRatio`` over the still-unused candidates with score >= ``cutoff``; each candidate
    is used once; unmatched candidates follow in list order.

    >>> match_to_candidates(["fargo", "The Matrix"], ["Heat (1995)", "Matrix, The (1999)", "Fargo (1996)"])
    (('Fargo (1996)', 'Matrix, The (1999)', 'Heat (1995)'), 2)
    """
    from rapidfuzz import fuzz, process

    cands = list(candidates)
    keys = [normalise_title(c) for c in cands]
    used = [False] * len(cands)
    order = []
    for t in titles:
        k = normalise_title(t)
        hit = next((i for i, ck in enumerate(keys) if not used[i] and ck == k), None)
        if hit is None and k:
            choices = {i: keys[i] for i in range(len(cands)) if not used[i]}
            best = process.extractOne(k, choices, scorer=fuzz.WRatio, score_cutoff=cutoff)
            hit = best[2] if best else None
        if hit is not None:
            used[hit] = True
            order.append(hit)
    n = len(order)
    order += [i for i in range(len(cands)) if not used[i]]
    return tuple(cands[i] for i in order), n


def _history_from_text(user: str) -> list:
    lines = user.splitlines()
    for i, ln in enumerate(lines):
        if _HIST_HEAD_RE.search(ln) and not _ITEM_LINE_RE.match(ln):
            items: list[str] = []
            for nxt in lines[i + 1 :]:
                m = _ITEM_LINE_RE.match(nxt)
                if not m:
                    if items or nxt.strip():
                        break
                    continue
                items.append(m.group(1))
            if items:
                return items
    return []


def truncate_history(messages: Sequence[dict], history_titles: Sequence[str], n_drop: int) -> list:
    """Remove the list lines of the ``n_drop`` oldest history titles from the last user message.

    Numbered lines of the history block are renumbered from 1.

    >>> msgs = [{"role": "user", "content": "Watch history:\\n1. A\\n2. B\\n3. C\\nRecommend."}]
    >>> truncate_history(msgs, ["A", "B", "C"], 2)[0]["content"]
    'Watch history:\\n1. C\\nRecommend.'
    """
    msgs = [dict(m) for m in messages]
    ui = max(i for i, m in enumerate(msgs) if m["role"] == "user")
    lines = msgs[ui]["content"].split("\n")
    drop = list(history_titles)[:n_drop]
    removed_at = []
    for t in drop:
        for j, ln in enumerate(lines):
            m = _ITEM_LINE_RE.match(ln)
            if m and m.group(1).strip().strip('"') == t.strip():
                removed_at.append(j)
                del lines[j]
                break
        else:
            raise ValueError(f"history title {t!r} not found as a list line in the user message; cannot truncate")
    # renumber the numbered lines of the block that contained the removed lines
    if removed_at:
        start = min(removed_at)
        while start > 0 and _ITEM_LINE_RE.match(lines[start - 1]):
            start -= 1
        num = 1
        for j in range(start, len(lines)):
            mm = re.match(r"^(\s*)\d{1,3}([.)])(\s+.*)$", lines[j])
            if not mm:
                if _ITEM_LINE_RE.match(lines[j]):
                    continue
                break
            lines[j] = f"{mm.group(1)}{num}{mm.group(2)}{mm.group(3)}"
            num += 1
    msgs[ui]["content"] = "\n".join(lines)
    return msgs


def recommender_fingerprint(model_cfg: ModelConfig, protocol: str, lm_fingerprint: str, bucket: int = 32) -> str:
    """What a recommender's answers depend on: the model files and dtype (``lm_fingerprint``), the
    protocol, the ranker, the decoding parameters, the prompt limit and the parser version."""
    ranker = model_cfg.ranker_for(protocol)
    dec = (
        (
            f"T={model_cfg.temperature},p={model_cfg.top_p},n={model_cfg.max_new_tokens},"
            f"r={model_cfg.repetition_penalty},bucket={bucket}"
            + (",stop=answer" if model_cfg.stop_at_answer else "")  # only when on: no other fingerprint changes
        )
        if ranker == "generate"
        else "loglik-packed"
    )
    ident = f"{lm_fingerprint}|{protocol}|{ranker}|{dec}|mpt={model_cfg.max_prompt_tokens}|parser={PARSER_VERSION}"
    return f"{model_cfg.llm}:{protocol}:{ranker}:" + hashlib.sha256(ident.encode()).hexdigest()[:12]


def expected_fingerprint(model_cfg: ModelConfig, protocol: str) -> str:
    """The fingerprint :func:`make_recommender` would give, without loading the model (the model's files
    are hashed, and torch is asked only which device "auto" means; a served model's server is asked
    what it serves)."""
    if is_rest_name(model_cfg.llm):  # no endpoint is asked: the fingerprint is its settings'
        return RestRecommender.from_config(model_cfg).fingerprint
    if served_model_id(model_cfg.llm) is not None:
        url, model = server_of(model_cfg)
        return served_fingerprint(model_cfg, protocol, probe_server(url, model, key_env=model_cfg.api_key_env))
    dev, dtype_name = resolve_device(model_cfg.device, model_cfg.dtype)
    kernel = effective_kernel(model_cfg.linear_kernel, dev, dtype_name)
    return recommender_fingerprint(model_cfg, protocol, lm_fingerprint(resolve_llm(model_cfg.llm), dtype_name, kernel))


class LLMRecommender(Recommender):
    """A :class:`~facterlab.datatypes.Recommender` over a :class:`~facterlab.models.llm.CausalLM`."""

    takes_system_prompt = True  # FACTER's prompt repair applies (facterlab.datatypes.takes_system_prompt)

    def __init__(self, lm, model_cfg: ModelConfig, protocol: str):
        if protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {protocol!r}; choose 'open' or 'rank'")
        self.lm = lm
        self.cfg = model_cfg
        self.protocol = protocol
        self.ranker = model_cfg.ranker_for(protocol)
        self.params = DecodingParams(
            model_cfg.temperature, model_cfg.top_p, model_cfg.max_new_tokens, model_cfg.repetition_penalty
        )
        self.batch_size = int(model_cfg.batch_size)
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        self.fingerprint = recommender_fingerprint(model_cfg, protocol, lm.fingerprint, lm.bucket)
        self._fit_memo: dict = {}

    # ------------------------------------------------------------------ prompts
    def _limit(self, req: PromptRequest) -> int:
        if self.ranker == "likelihood":
            budget = max((len(self.lm.candidate_ids(c)) for c in (req.candidates or ())), default=0)
        else:
            budget = self.params.max_new_tokens
        limit = self.lm.context_window - budget
        if self.cfg.max_prompt_tokens is not None:
            limit = min(limit, int(self.cfg.max_prompt_tokens))
        return limit

    def fit_prompt(self, req: PromptRequest) -> tuple:
        """Token ids of the request's prompt, dropping the oldest history titles until it fits.

        Returns ``(ids, n_dropped)``.
        """
        key = (req.messages, req.candidates)
        if key in self._fit_memo:
            return self._fit_memo[key]
        msgs = req.message_dicts
        ids = self.lm.encode_messages(msgs)
        limit = self._limit(req)
        n_drop = 0
        if len(ids) > limit:
            hist = req.meta_dict.get("history_titles")
            if hist is None:
                users = [m["content"] for m in msgs if m["role"] == "user"]
                hist = _history_from_text(users[-1]) if users else []
            hist = list(hist)
            while len(ids) > limit and n_drop < len(hist):
                n_drop += 1
                ids = self.lm.encode_messages(truncate_history(msgs, hist, n_drop))
            if len(ids) > limit:
                raise ValueError(PROMPT_TOO_LONG_MSG.format(n=len(ids), limit=limit, h=len(hist)))
        self._fit_memo[key] = (ids, n_drop)
        return ids, n_drop

    def plan_batches(self, requests: Sequence[PromptRequest]) -> list:
        """Index batches that :meth:`predict` would run together: one length bucket each for generation;
        one prompt each for the likelihood ranker (it scores a prompt's candidates as its batch, so
        grouping prompts gains nothing and a caller should not predict rows ahead for it)."""
        if self.ranker == "likelihood":
            return [[i] for i in range(len(requests))]
        return self.lm.plan([len(self.fit_prompt(r)[0]) for r in requests], self.batch_size)

    # ------------------------------------------------------------------ predict
    def predict(self, requests: Sequence[PromptRequest]) -> list:
        """One prediction per request: each prompt fitted to the context (oldest history titles dropped),
        then generated and parsed (open: titles; rank: matched to the candidates), or, with the
        likelihood ranker, the candidates ranked by ``log p(c | x)``.

        Parameters
        ----------
        requests : sequence of PromptRequest
            The requests (protocol ``"rank"``: each with its candidates).

        Returns
        -------
        list of Prediction
            ``len(requests)`` predictions, in the order of ``requests``.
        """
        requests = list(requests)
        for r in requests:
            if self.protocol == "rank" and not r.candidates:
                raise ValueError("protocol 'rank' needs PromptRequest.candidates (candidate titles)")
        if len(self._fit_memo) > 50_000:
            self._fit_memo.clear()
        fitted = [self.fit_prompt(r) for r in requests]
        if self.ranker == "likelihood":
            return [self._likelihood(r, ids, nd) for r, (ids, nd) in zip(requests, fitted)]
        stop_k = None
        if self.cfg.stop_at_answer:  # the k the answer is parsed with below
            stop_k = [r.k if self.protocol == "open" else len(r.candidates or ()) for r in requests]
        texts = self.lm.generate(
            [f[0] for f in fitted], [r.seed for r in requests], self.params, self.batch_size, stop_k=stop_k
        )
        out = []
        for r, (_, nd), text in zip(requests, fitted, texts):
            if self.protocol == "open":
                titles, status = parse_titles(text, r.k)
                out.append(Prediction(titles=titles, parse_status=status, raw=text, n_truncated_history=nd))
            else:
                assert r.candidates is not None  # checked at the top for protocol "rank"
                titles, status = parse_titles(text, len(r.candidates))
                perm, n = match_to_candidates(titles, r.candidates)
                out.append(
                    Prediction(titles=perm, parse_status=status, raw=text, n_model_positions=n, n_truncated_history=nd)
                )
        return out

    def _likelihood(self, req: PromptRequest, ids: list, n_drop: int) -> Prediction:
        if req.candidates is None:
            raise ValueError("the likelihood ranker needs PromptRequest.candidates (candidate titles)")
        cands = list(req.candidates)
        scores = self.lm.score_candidates(ids, [self.lm.candidate_ids(c) for c in cands])
        return ranked_by_scores(cands, scores, n_drop)


def make_recommender(model_cfg: ModelConfig, protocol: str, cache=True, progress: bool = False, items=None):
    """Build the LLM recommender for ``protocol`` ("open" | "rank") from a :class:`ModelConfig`
    (``llm="openai:<model id>"``: :class:`~facterlab.models.served.ServedRecommender` at ``server_url``;
    ``llm="rest:<name>"``: :class:`~facterlab.models.custom.RestRecommender` at ``server_url``).

    ``cache``: ``True`` (SQLite cache under ``cache_dir()``), ``False``, a path, or a
    :class:`~facterlab.models.cache.PredictionCache`.  An unknown model name fails before torch loads.
    ``items``: the catalogue, with which a REST endpoint's answered item ids are named (without it, only
    titles and the re-ranking candidates' ids can be).
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; choose 'open' or 'rank'")
    rec: Recommender
    if is_rest_name(model_cfg.llm):  # rest:<name> at model_cfg.server_url
        rec = RestRecommender.from_config(model_cfg, items)
    elif served_model_id(model_cfg.llm) is not None:  # openai:<model id> at model_cfg.server_url
        rec = ServedRecommender(model_cfg, protocol, match=match_to_candidates, llm_recommender=LLMRecommender)
    else:
        resolve_llm(model_cfg.llm)  # fail fast on unknown names, before heavy imports
        lm = load_lm(
            model_cfg.llm,
            model_cfg.device,
            model_cfg.dtype,
            model_cfg.trust_remote_code,
            linear_kernel=model_cfg.linear_kernel,
        )
        rec = LLMRecommender(lm, model_cfg, protocol)
    if cache is False or cache is None:
        return rec
    store: PredictionCache | None
    store = cache if isinstance(cache, PredictionCache) else PredictionCache(None if cache is True else cache)
    return CachedRecommender(rec, store, batch_size=model_cfg.batch_size, progress=progress)
