"""Use any LlamaIndex LLM as the engine's :class:`~cos_integrations.ChatModel`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.llms import LLM

from cos_integrations.model import ChatResult
from cos_integrations.usage import Usage

__all__ = ["CoreChatModel", "as_chat_model"]

_ROLES = {"system": MessageRole.SYSTEM, "assistant": MessageRole.ASSISTANT}


def _usage_of(raw: Any) -> Usage:
    usage = Usage(calls=1)
    u = raw.get("usage") if isinstance(raw, dict) else getattr(raw, "usage", None)
    if u is None:
        return usage
    get = u.get if isinstance(u, dict) else (lambda k, d=None: getattr(u, k, d))
    usage.prompt_tokens = int(get("prompt_tokens", 0) or 0)
    usage.completion_tokens = int(get("completion_tokens", 0) or 0)
    details = get("prompt_tokens_details", None)
    if details is not None:
        cached = (
            details.get("cached_tokens")
            if isinstance(details, dict)
            else getattr(details, "cached_tokens", 0)
        )
        usage.cached_tokens = int(cached or 0)
    return usage


class CoreChatModel:
    """A LlamaIndex ``LLM`` (OpenAI, OpenAILike, a local server...) as the core's
    :class:`~cos_integrations.ChatModel` (``Core*``: a framework object for the core, like
    :class:`CoreEmbedder`; ``CoS*``: CoS for the framework).

    Usage is read from the provider's raw response where it reports one.

    Examples:
        >>> from llama_index.core.llms import MockLLM
        >>> import asyncio
        >>> model = CoreChatModel(MockLLM())
        >>> asyncio.run(model.chat([{"role": "user", "content": "hi"}])).usage.calls
        1
    """

    def __init__(self, llm: LLM) -> None:
        self.llm = llm

    async def chat(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        json_schema: dict | None = None,
    ) -> ChatResult:
        msgs = [
            ChatMessage(role=_ROLES.get(m["role"], MessageRole.USER), content=m["content"])
            for m in messages
        ]
        resp = await self.llm.achat(msgs)
        return ChatResult(text=resp.message.content or "", usage=_usage_of(resp.raw))


def as_chat_model(llm: Any):
    """A core ChatModel from a LlamaIndex LLM (a core model is returned as is)."""
    if isinstance(llm, LLM):
        return CoreChatModel(llm)
    if hasattr(llm, "chat") and not isinstance(llm, LLM):
        return llm
    raise TypeError(f"expected a LlamaIndex LLM or a ChatModel, got {type(llm).__name__}")
