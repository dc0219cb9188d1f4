"""Use any LangChain chat model as the engine's :class:`~cos_integrations.ChatModel`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from cos_integrations.model import ChatResult
from cos_integrations.usage import Usage

__all__ = ["CoSChatModel", "CoreChatModel", "as_chat_model"]


def _to_lc(messages: Sequence[dict[str, str]]) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for m in messages:
        cls = {"system": SystemMessage, "assistant": AIMessage}.get(m["role"], HumanMessage)
        out.append(cls(content=m["content"]))
    return out


class CoreChatModel:
    """A LangChain ``BaseChatModel`` as the core's :class:`~cos_integrations.ChatModel`;
    ``config`` (callbacks, tags) flows into every call. (``Core*``: LangChain for the core,
    like :class:`CoreEmbedder`; ``CoS*``: CoS for LangChain, like :class:`CoSChatModel`.)

    Examples:
        >>> from langchain_core.language_models import FakeListChatModel
        >>> model = CoreChatModel(FakeListChatModel(responses=["hi"]))
        >>> import asyncio
        >>> asyncio.run(model.chat([{"role": "user", "content": "x"}])).text
        'hi'
    """

    def __init__(self, llm: BaseChatModel, config: RunnableConfig | None = None) -> None:
        self.llm = llm
        self.config = config

    def with_config(self, config: RunnableConfig | None) -> CoreChatModel:
        return CoreChatModel(self.llm, config)

    async def chat(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        json_schema: dict | None = None,
    ) -> ChatResult:
        kwargs: dict[str, Any] = {}
        if isinstance(self.llm, CoSChatModel):  # the core model behind it takes both as is
            kwargs = {"max_tokens": max_tokens, "json_schema": json_schema}
        elif max_tokens is not None and "max_tokens" in getattr(type(self.llm), "model_fields", {}):
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
    if isinstance(llm, CoSChatModel) and config is None:
        return llm.model  # no need to go through LangChain and back
    if isinstance(llm, BaseChatModel):
        return CoreChatModel(llm, config)
    if hasattr(llm, "chat"):
        return llm
    raise TypeError(f"expected a LangChain BaseChatModel or a ChatModel, got {type(llm).__name__}")


class CoSChatModel(BaseChatModel):
    """A core :class:`~cos_integrations.ChatModel` (e.g. the embedded local model) as a
    LangChain chat model, for LCEL chains without another provider package.

    Examples:
        >>> from cos_integrations.embedded.server import LocalModelServer       # doctest: +SKIP
        >>> with LocalModelServer() as server:                        # doctest: +SKIP
        ...     chat = CoSChatModel(model=server.chat_model())
        ...     chat.invoke("Say hi")
    """

    model: Any
    max_tokens: int | None = 512

    @property
    def _llm_type(self) -> str:
        return "cos-chat-model"

    @staticmethod
    def _messages(messages: list[BaseMessage]) -> list[dict[str, str]]:
        roles = {"system": "system", "ai": "assistant"}
        return [{"role": roles.get(m.type, "user"), "content": str(m.content)} for m in messages]

    def _result(self, res: ChatResult):
        from langchain_core.outputs import ChatGeneration
        from langchain_core.outputs import ChatResult as LCResult

        usage = {
            "input_tokens": res.usage.prompt_tokens,
            "output_tokens": res.usage.completion_tokens,
            "total_tokens": res.usage.prompt_tokens + res.usage.completion_tokens,
        }
        # the model's name as providers' chat models give it: LangChain's usage callback
        # (UsageMetadataCallbackHandler) counts a reply only under a model name
        name = getattr(self.model, "model", None) or getattr(self.model, "name", None)
        meta = {"model_name": str(name or self._llm_type)}
        msg = AIMessage(content=res.text, usage_metadata=usage, response_metadata=meta)
        return LCResult(generations=[ChatGeneration(message=msg)])

    def _call(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The core call's limits: ``max_tokens`` and ``json_schema`` given to ``invoke``
        (the retriever's judge asks for its structured reply through them) reach the core
        model; ``max_tokens`` defaults to the field."""
        return {
            "max_tokens": kwargs.get("max_tokens") or self.max_tokens,
            "json_schema": kwargs.get("json_schema"),
        }

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        from cos_integrations.sync import run_sync

        res = run_sync(self.model.chat(self._messages(messages), **self._call(kwargs)))
        return self._result(res)

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        return self._result(await self.model.chat(self._messages(messages), **self._call(kwargs)))
