"""The tests' OpenAI-compatible server: :mod:`facterlab.testing.server` (a documented tool since issue 31)."""

from facterlab.testing.server import (  # noqa: F401 - re-exported for the tests
    MISBEHAVIOURS,
    MODEL,
    VERSION,
    OpenAIServer,
    chat_answer,
    token_logprob,
    tokens_of,
)
