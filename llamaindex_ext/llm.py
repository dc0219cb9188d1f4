"""Models both ways: any LlamaIndex LLM as the core's :class:`~cos_integrations.ChatModel`
(:class:`CoreChatModel`), and the core's model (the embedded one, or any endpoint) as a
LlamaIndex LLM (:class:`CoSChatLLM`, for a query engine's response synthesizer)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.llms import LLM, CustomLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from pydantic import PrivateAttr

from cos_integrations.model import ChatModel, ChatResult
from cos_integrations.sync import run_sync
from cos_integrations.usage import Usage

__all__ = ["CoreChatModel", "CoSChatLLM", "as_chat_model"]

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
        kwargs: dict[str, Any] = {}
        if isinstance(self.llm, CoSChatLLM):  # the core model behind it takes both as is
            kwargs = {"max_tokens": max_tokens, "json_schema": json_schema}
        resp = await self.llm.achat(msgs, **kwargs)
        return ChatResult(text=resp.message.content or "", usage=_usage_of(resp.raw))


def as_chat_model(llm: Any):
    """A core ChatModel from a LlamaIndex LLM (a core model is returned as is)."""
    if isinstance(llm, LLM):
        return CoreChatModel(llm)
    if hasattr(llm, "chat") and not isinstance(llm, LLM):
        return llm
    raise TypeError(f"expected a LlamaIndex LLM or a ChatModel, got {type(llm).__name__}")


class CoSChatLLM(CustomLLM):
    """The core's :class:`~cos_integrations.ChatModel` (the embedded local model from
    ``open_model()``, or any OpenAI-compatible endpoint) as a LlamaIndex chat ``LLM``: for
    a query engine's response synthesizer, or anywhere LlamaIndex wants an ``LLM``. Each
    call is one call of the core model (its usage in the response's ``raw``).

    Examples:
        >>> from cos_integrations.model import ChatResult
        >>> class Echo:
        ...     async def chat(self, messages, **kw):
        ...         return ChatResult("echo: " + messages[-1]["content"])
        >>> CoSChatLLM(Echo()).complete("hi").text
        'echo: hi'
    """

    context_window: int = 4096
    num_output: int = 256
    _model: Any = PrivateAttr()

    def __init__(self, model: ChatModel, **data: Any) -> None:
        super().__init__(**data)
        self._model = model

    @classmethod
    def class_name(cls) -> str:
        return "CoSChatLLM"

    @property
    def metadata(self) -> LLMMetadata:
        name = str(getattr(self._model, "model", type(self._model).__name__))
        return LLMMetadata(
            context_window=self.context_window,
            num_output=self.num_output,
            is_chat_model=True,
            model_name=name,
        )

    async def _ask(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        msgs = [{"role": m.role.value, "content": m.content or ""} for m in messages]
        res = await self._model.chat(
            msgs,
            max_tokens=kwargs.get("max_tokens") or self.num_output,
            json_schema=kwargs.get("json_schema"),
        )
        raw = {"usage": res.usage.model_dump()}
        message = ChatMessage(role=MessageRole.ASSISTANT, content=res.text)
        return ChatResponse(message=message, raw=raw)

    # the callback decorators report each call to the LLM's callback manager (LlamaIndex's
    # TokenCountingHandler reads its usage from ``raw``); ``max_tokens`` and ``json_schema``
    # reach the core model (the retriever's judge asks for its structured reply through them)
    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return run_sync(self._ask(messages, **kwargs))

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return await self._ask(messages, **kwargs)

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        res = run_sync(self._ask([ChatMessage(role=MessageRole.USER, content=prompt)], **kwargs))
        return CompletionResponse(text=res.message.content or "", raw=res.raw)

    @llm_completion_callback()
    async def acomplete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponse:
        res = await self._ask([ChatMessage(role=MessageRole.USER, content=prompt)], **kwargs)
        return CompletionResponse(text=res.message.content or "", raw=res.raw)

    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        done = self.complete(prompt)
        yield CompletionResponse(text=done.text, delta=done.text, raw=done.raw)
