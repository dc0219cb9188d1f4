"""Use any LangChain chat model as the engine's :class:`~cos_integrations.ChatModel`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from cos_integrations.model import ChatResult
from cos_integrations.usage import Usage

__all__ = ["LangChainChatModel", "as_chat_model"]


def _to_lc(messages: Sequence[dict[str, str]]) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for m in messages:
        cls = {"system": SystemMessage, "assistant": AIMessage}.get(m["role"], HumanMessage)
        out.append(cls(content=m["content"]))
    return out


class LangChainChatModel:
    """Adapts a LangChain ``BaseChatModel``; ``config`` (callbacks, tags) flows into every call.

    Example:
        >>> from langchain_core.language_models import FakeListChatModel
        >>> model = LangChainChatModel(FakeListChatModel(responses=["hi"]))
        >>> import asyncio
        >>> asyncio.run(model.chat([{"role": "user", "content": "x"}])).text
        'hi'
    """

    def __init__(self, llm: BaseChatModel, config: RunnableConfig | None = None) -> None:
        self.llm = llm
        self.config = config

    def with_config(self, config: RunnableConfig | None) -> LangChainChatModel:
        return LangChainChatModel(self.llm, config)

    async def chat(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        json_schema: dict | None = None,
    ) -> ChatResult:
        kwargs: dict[str, Any] = {}
        if max_tokens is not None and "max_tokens" in getattr(type(self.llm), "model_fields", {}):
            kwargs["max_tokens"] = max_tokens
        reply = await self.llm.ainvoke(_to_lc(messages), config=self.config, **kwargs)
        text = reply.content if isinstance(reply.content, str) else str(reply.content)
        usage = Usage(calls=1)
        meta = getattr(reply, "usage_metadata", None) or {}
        if meta:
            usage.prompt_tokens = int(meta.get("input_tokens", 0))
            usage.completion_tokens = int(meta.get("output_tokens", 0))
            details = meta.get("input_token_details") or {}
            usage.cached_tokens = int(details.get("cache_read", 0) or 0)
        return ChatResult(text=text, usage=usage)


def as_chat_model(llm: Any, config: RunnableConfig | None = None):
    """A core ChatModel from a LangChain chat model (or a core model, returned as is)."""
    if isinstance(llm, BaseChatModel):
        return LangChainChatModel(llm, config)
    if hasattr(llm, "chat"):
        return llm
    raise TypeError(f"expected a LangChain BaseChatModel or a ChatModel, got {type(llm).__name__}")
