"""Which door a served-model hint names: ``facterlab run``'s flags, ``facterlab sweep``'s ``--set``, or
the Python API's ``ModelConfig`` fields (:func:`setting_hint`), by the command the caller is in
(:func:`command`, a context variable: each thread or asyncio task has its own).

Every message of the served backend (:mod:`facterlab.models.served`, which re-exports these names)
that tells the user to change a setting writes it with :func:`setting_hint` or :func:`refusal_hint`.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

__all__ = ["command", "current_command", "RUN_FLAGS", "setting_hint", "refusal_hint"]

#: what a hint names a setting with, by the command typed (:func:`setting_hint`): "run", "sweep", or
#: None (the Python API).  A context variable, so that it belongs to the call that set it: a thread or
#: an asyncio task gets its own, and :func:`command` restores the value it found when it ends.
_COMMAND: contextvars.ContextVar[str | None] = contextvars.ContextVar("facterlab_served_command", default=None)


@contextlib.contextmanager
def command(name: str | None) -> Iterator[None]:
    """``with command("run"):`` hints in this block (and in the request threads it starts) name
    ``facterlab run``'s flags; the value before it is restored at its end, even on an error.

    >>> with command("sweep"):
    ...     setting_hint("timeout", "60")
    '--set model__timeout=60'
    >>> current_command() is None
    True
    """
    token = _COMMAND.set(name)
    try:
        yield
    finally:
        _COMMAND.reset(token)


def current_command() -> str | None:
    """The command whose flags hints name here (:func:`command`); None: the Python API."""
    return _COMMAND.get()


#: ``facterlab run``'s flags for the model settings a hint may name
RUN_FLAGS = {
    "temperature": "--temperature",
    "repetition_penalty": "--repetition-penalty",
    "tokenizer": "--tokenizer",
    "ranker": "--ranker",
    "timeout": "--timeout",
    "max_retries": "--retries",
    "concurrency": "--concurrency",
    "api_key_env": "--api-key-env",
    "server_url": "--server-url",
}


def setting_hint(name: str, value: str) -> str:
    """How the user sets model setting ``name`` to ``value`` through the door they used (:func:`command`).

    >>> setting_hint("repetition_penalty", "1")
    'model.repetition_penalty=1 (ModelConfig; REPETITION_PENALTY in a notebook)'
    """
    cmd = _COMMAND.get()
    if cmd == "run" and name in RUN_FLAGS:
        return f"{RUN_FLAGS[name]} {value}"
    if cmd == "sweep":
        return f"--set model__{name}={value}"
    return f"model.{name}={value} (ModelConfig; {name.upper()} in a notebook)"


def refusal_hint(name: str, value: Any) -> str:
    """The hint after a server's refusal of decoding field ``name`` (its default in OpenAI's API is 1)."""
    return (
        f" (this server does not take {name}, which the config sets to {value:g}: "
        f"{setting_hint(name, '1')}, or serve the model with vLLM)"
    )
