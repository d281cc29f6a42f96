"""Shared contracts between the data layer, the model backends and the FACTER core.

These are deliberately small so that fakes (deterministic test recommenders, hashing encoders) and
real backends (transformers LLMs, sentence-transformers encoders) are interchangeable.

Messages are chat messages: ``[{"role": "system", "content": ...}, {"role": "user", "content": ...}]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

Messages = list  # list[dict[str, str]] with keys "role" and "content"

# Parse statuses recorded per output (models/parsing.py)
PARSE_OK = "ok"  # a JSON array parsed
PARSE_FALLBACK = "fallback"  # parsed from fenced/numbered/bulleted lines
PARSE_EMPTY = "empty"  # nothing usable in the output
PARSE_NA = "n/a"  # not produced by text generation (likelihood ranking, fakes)
PARSE_CUT = "cut"  # longer than max_new_tokens tokens can be (a hostile server): cut, then parsed


@dataclass(frozen=True)
class PromptRequest:
    """One prediction request.

    ``candidates`` holds the candidate titles for the re-ranking protocol (None for open generation).
    ``seed`` makes sampling reproducible per row, independent of the batch it runs in.
    ``meta`` carries row information that fakes may use (user attributes, history genres); real
    backends ignore it.
    """

    messages: tuple  # tuple of (role, content) pairs, hashable
    seed: int = 0
    candidates: tuple | None = None
    k: int = 10
    meta: tuple = ()  # tuple of (key, value) pairs

    @property
    def message_dicts(self) -> list:
        """The messages as ``[{"role": ..., "content": ...}]``, the form chat templates and OpenAI servers take."""
        return [{"role": r, "content": c} for r, c in self.messages]

    @property
    def meta_dict(self) -> dict:
        """``meta`` as a new dict (the request itself keeps the hashable tuple of pairs)."""
        return dict(self.meta)

    @staticmethod
    def from_messages(messages: Sequence[dict], **kw) -> PromptRequest:
        """The request of chat ``messages``.

        Parameters
        ----------
        messages : sequence of dict
            ``{"role": ..., "content": ...}`` dicts, in order.
        **kw
            The other fields (``seed``, ``candidates``, ``k``, ``meta``).

        Returns
        -------
        PromptRequest
            The request, its messages stored as a tuple of (role, content) pairs.
        """
        return PromptRequest(messages=tuple((m["role"], m["content"]) for m in messages), **kw)


@dataclass(frozen=True)
class Prediction:
    """A recommender's answer: ranked titles (best first), with how they were obtained.

    ``n_model_positions``: for re-ranking by generation, how many positions of the permutation came
    from the model (the rest were appended in list order).  ``raw`` is the generated text, if any.
    ``n_truncated_history``: how many history titles were dropped to fit the context window.
    """

    titles: tuple
    parse_status: str = PARSE_NA
    raw: str = ""
    n_model_positions: int | None = None
    n_truncated_history: int = 0


@runtime_checkable
class Recommender(Protocol):
    """Anything that turns prompt requests into predictions.  Must be deterministic per request.

    ``plan_batches(requests)`` says which requests :meth:`predict` would run together (lists of indices
    into ``requests``), so that callers (:class:`~facterlab.models.cache.CachedRecommender`, the FACTER
    monitor's lookahead) can group their calls the same way; the default, ``None``, means "no
    preference: chunk by your own batch size".  Subclass this protocol to inherit the default.

    Optional: a ``takes_system_prompt`` attribute (read by :func:`takes_system_prompt`; True when
    absent): False for a recommender that never sees the system prompt, to which FACTER's prompt
    repair does not apply.  A minimal recommender (the adapters of :mod:`facterlab.models.custom` wrap a
    plain function or a REST endpoint):

    >>> class Popular(Recommender):
    ...     fingerprint = "popular:v1"  # part of the run id: change it whenever the answers change
    ...     takes_system_prompt = False
    ...     def predict(self, requests):
    ...         return [Prediction(titles=("Heat (1995)", "Babe (1995)")[: r.k]) for r in requests]
    >>> Popular().predict([PromptRequest.from_messages([], k=1)])[0].titles
    ('Heat (1995)',)
    """

    fingerprint: str

    def predict(self, requests: Sequence[PromptRequest]) -> list:  # list[Prediction]
        """One prediction per request, in order; the same request always gets the same answer.

        Parameters
        ----------
        requests : sequence of PromptRequest
            The requests.

        Returns
        -------
        list of Prediction
            ``len(requests)`` predictions, in the order of ``requests``.
        """
        ...

    def plan_batches(self, requests: Sequence[PromptRequest]) -> list | None:  # list[list[int]] or None
        """Index batches :meth:`predict` would run together, or ``None`` (no preference; the default)."""
        return None


def takes_system_prompt(recommender) -> bool:
    """Whether ``recommender``'s answers can follow the system prompt, so that FACTER's prompt repair
    (rules in the system prompt) applies to it: its ``takes_system_prompt`` attribute, True when it has
    none (the LLM-backed recommenders).  A user's function or REST endpoint that never sees the system
    prompt says False (:mod:`facterlab.models.custom`); the monitor, the metrics and the Simpson analysis
    apply to it all the same.

    >>> class Ranker:
    ...     takes_system_prompt = False
    >>> takes_system_prompt(Ranker()), takes_system_prompt(object())
    (False, True)
    """
    return bool(getattr(recommender, "takes_system_prompt", True))


@runtime_checkable
class Encoder(Protocol):
    """Text encoder returning L2-normalised float32 embeddings of shape (n, dim)."""

    fingerprint: str
    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of ``texts``.

        Parameters
        ----------
        texts : sequence of str
            The texts.

        Returns
        -------
        numpy.ndarray of float32, shape (len(texts), dim)
            One L2-normalised row per text.
        """
        ...


@dataclass
class MissingValue:
    """An explicit missing metric value with its reason (never a silent 0)."""

    reason: str
    value: None = field(default=None, init=False)

    def to_json(self) -> dict:
        """The JSON form of the missing value: ``{"value": null, "missing_reason": reason}``."""
        return {"value": None, "missing_reason": self.reason}


@dataclass(frozen=True)
class Rule:
    """A mined repair rule ``AVOID: (attr=value) -> (feature-only)`` or ``-> (title)``.

    ``attr`` is ``"gender"``, ``"age"``, ``"occupation"`` or, with tuple keying, ``"tuple"`` (and
    ``value`` then is ``"gender=F, age=25-34, occupation=writer"``).  ``kind`` is ``"feature"`` (a genre
    or category) or ``"title"`` (an exact item title).
    """

    attr: str
    value: str
    feature: str
    kind: str = "feature"

    def text(self) -> str:
        """The rule as a prompt shows it: ``AVOID: (attr=value) -> (feature-only)`` or ``-> (title)``.

        >>> Rule("age", "25-34", "Comedy").text()
        'AVOID: (age=25-34) -> (Comedy-only)'
        """
        target = f"{self.feature}-only" if self.kind == "feature" else self.feature
        return f"AVOID: ({self.attr}={self.value}) -> ({target})"
