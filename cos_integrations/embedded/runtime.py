"""Choosing the model and the embedder the same way everywhere (CLI, examples, retrievers).

Order: an explicit base URL or endpoint wins; then ``COS_BASE_URL`` / ``OPENAI_API_KEY``
(with ``COS_MODEL``); then the embedded local model (``--local-model`` / ``COS_LOCAL_MODEL``,
default ``default``). Each prints which one is used.

Examples:
    >>> with open_model(echo=print) as llm:          # doctest: +SKIP
    ...     cos = ChainOfSummaries(llm)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from cos_integrations.model import ChatModel, OpenAIChatModel

__all__ = ["open_model", "describe_choice"]


def describe_choice(
    model: str | None = None, base_url: str | None = None, local_model: str | None = None
) -> str:
    """``"endpoint"`` or ``"local"``: which kind of model :func:`open_model` would use."""
    if local_model:
        return "local"
    if base_url or os.environ.get("COS_BASE_URL") or os.environ.get("OPENAI_API_KEY"):
        return "endpoint"
    return "local"


@contextmanager
def open_model(
    model: str | None = None,
    *,
    base_url: str | None = None,
    local_model: str | None = None,
    n_ctx: int = 8192,
    echo: Callable[[str], None] | None = None,
    **client_kwargs: object,
) -> Iterator[ChatModel]:
    """Yield a ready :class:`ChatModel`; a local server is started and stopped around it."""
    say = echo or (lambda _msg: None)
    if describe_choice(model, base_url, local_model) == "endpoint":
        llm = OpenAIChatModel(model, base_url=base_url, **client_kwargs)  # type: ignore[arg-type]
        say(f"model: {llm.model} at {llm.base_url or 'the OpenAI API'}")
        yield llm
        return
    from cos_integrations.embedded.server import LocalModelServer

    # one server per machine: attach to a running one of this model, or wait for another
    # model's to finish, rather than start a second llama.cpp on the same cores
    server = LocalModelServer(local_model, n_ctx=n_ctx, share=True)
    say(f"model: embedded {server.label} (starting llama.cpp on 127.0.0.1)")
    with server:
        say(f"model server ready at {server.base_url} (log: {server.log_path})")
        yield server.chat_model(**client_kwargs)
