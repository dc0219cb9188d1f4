"""A query engine over the CoS fallback retriever: a hit's checked answer with no second
model call, a miss answered by the response synthesizer over the source chunks."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Generator
from typing import Any

from llama_index.core.base.response.schema import (
    RESPONSE_TYPE,
    AsyncStreamingResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.callbacks.schema import CBEventType, EventPayload
from llama_index.core.llms import LLM, ChatMessage, MessageRole
from llama_index.core.prompts import ChatPromptTemplate
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import NodeWithScore, QueryBundle

from cos_integrations.summarize.prompts import SHORT_ANSWER_SYSTEM

from .llm import CoSChatLLM
from .retriever import CoSFallbackRetriever

__all__ = ["CoSQueryEngine", "QA_TEMPLATE"]

# A miss's answer prompt (the response synthesizer's ``text_qa_template``): a short answer
# from the context, LangChain's QA_PROMPT in LlamaIndex's variables. LlamaIndex's default asks
# for no length: with the embedded 1.5B model it answered in whole sentences, which scored
# F1 0.41 on misses against the short answer's 0.61 on the SQuAD stream, and were kept and served
# as verified answers (BENCHMARKS.md, "What a framework user pays")
QA_TEMPLATE = ChatPromptTemplate(
    message_templates=[
        ChatMessage(role=MessageRole.SYSTEM, content=SHORT_ANSWER_SYSTEM + "\n\n{context_str}"),
        ChatMessage(role=MessageRole.USER, content="{query_str}"),
    ]
)


def _checked(nodes: list[NodeWithScore]) -> str | None:
    """The answer a hit already has (the judge's grounded answer, or a verified answer's):
    ``cos_answer`` of the first node of a hit; ``None`` on a miss."""
    meta = nodes[0].node.metadata if nodes else {}
    return meta.get("cos_answer") if meta.get("cos_hit") else None


class CoSQueryEngine(RetrieverQueryEngine):
    """``RetrieverQueryEngine`` over :class:`~llamaindex_ext.CoSFallbackRetriever`: on a
    hit, the response is the answer the retriever already checked against what it read
    (the model judge's, or a verified answer's served with no call), with the hit's nodes
    as ``source_nodes`` and no further model call; on a miss, the response synthesizer
    answers from the source chunks (the user's ``llm``, one call in the default ``compact``
    mode, asked for a short answer: :data:`QA_TEMPLATE`, unless ``text_qa_template=`` is
    given), and a short answer the chunks hold is kept as a verified answer for the next
    ask; a router's check made on the way learns from that answer.
    The response's ``metadata`` says which (``cos_hit``, ``cos_served``, ``cos_job_id``).

    Setup:
        .. code-block:: python

            from llamaindex_ext import CoSFallbackRetriever, CoSQueryEngine

            retriever = CoSFallbackRetriever.from_defaults(persist_dir="./index", llm=llm)
            engine = CoSQueryEngine.from_defaults(retriever, llm=llm)  # Settings.llm if None

    Query (sync, async, streaming):
        .. code-block:: python

            response = engine.query("When is rent due?")
            str(response), response.metadata["cos_hit"], response.source_nodes
            response = await engine.aquery("When is rent due?")
            streaming = CoSQueryEngine.from_defaults(retriever, llm=llm, streaming=True)
            streaming.query("When is rent due?").print_response_stream()
    """

    def __init__(self, retriever: CoSFallbackRetriever, **kwargs: Any) -> None:
        if not isinstance(retriever, CoSFallbackRetriever):
            raise TypeError(
                "CoSQueryEngine needs a llamaindex_ext.CoSFallbackRetriever (its hits carry "
                f"their answers), not {type(retriever).__name__}; over any other retriever "
                "use RetrieverQueryEngine"
            )
        super().__init__(retriever, **kwargs)

    @classmethod
    def from_defaults(cls, retriever: CoSFallbackRetriever, **kwargs: Any) -> CoSQueryEngine:
        """:meth:`RetrieverQueryEngine.from_args` (``llm``: default ``Settings.llm``, or the
        core's model, e.g. ``open_model()``'s, wrapped as :class:`CoSChatLLM`;
        ``response_mode``, ``streaming``, ``use_async``, templates...), for the
        ``from_defaults`` LlamaIndex users reach for."""
        llm = kwargs.get("llm")
        if llm is not None and not isinstance(llm, LLM):
            kwargs["llm"] = CoSChatLLM(llm)
        kwargs.setdefault("text_qa_template", QA_TEMPLATE)
        engine = cls.from_args(retriever, **kwargs)
        manager = kwargs.get("callback_manager")
        if manager is not None and kwargs.get("response_synthesizer") is None:
            # from_args builds the synthesizer on Settings.callback_manager, and the
            # synthesizer gives its manager to the LLM: the caller's handlers (a
            # TokenCountingHandler) would not see the miss's call
            engine._response_synthesizer.callback_manager = manager
        return engine  # type: ignore[return-value]

    @property
    def cos_retriever(self) -> CoSFallbackRetriever:
        return self._retriever  # type: ignore[return-value]

    def _streaming(self) -> bool:
        return bool(getattr(self._response_synthesizer, "_streaming", False))

    def _answered(self, answer: str, nodes: list[NodeWithScore], *, aio: bool) -> RESPONSE_TYPE:
        meta = _outcome(nodes)
        if not self._streaming():
            return Response(answer, source_nodes=nodes, metadata=meta)
        if aio:
            return AsyncStreamingResponse(_agen(answer), source_nodes=nodes, metadata=meta)
        return StreamingResponse(_gen(answer), source_nodes=nodes, metadata=meta)

    @staticmethod
    def _synthesized(nodes: list[NodeWithScore], response: Any) -> Any:
        response.metadata = {**(response.metadata or {}), **_outcome(nodes)}
        return response

    def _query(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        with self.callback_manager.event(
            CBEventType.QUERY, payload={EventPayload.QUERY_STR: query_bundle.query_str}
        ) as query_event:
            nodes = self.retrieve(query_bundle)
            answer = _checked(nodes)
            if answer is not None:
                response = self._answered(answer, nodes, aio=False)
            else:
                synthesized = self._response_synthesizer.synthesize(query=query_bundle, nodes=nodes)
                response = self._synthesized(nodes, synthesized)
                if isinstance(response, Response) and response.response:
                    self.cos_retriever.remember(query_bundle.query_str, nodes, response.response)
            query_event.on_end(payload={EventPayload.RESPONSE: response})
        return response

    async def _aquery(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        with self.callback_manager.event(
            CBEventType.QUERY, payload={EventPayload.QUERY_STR: query_bundle.query_str}
        ) as query_event:
            nodes = await self.aretrieve(query_bundle)
            answer = _checked(nodes)
            if answer is not None:
                response = self._answered(answer, nodes, aio=True)
            else:
                synthesized = await self._response_synthesizer.asynthesize(
                    query=query_bundle, nodes=nodes
                )
                response = self._synthesized(nodes, synthesized)
                if isinstance(response, Response) and response.response:
                    await self.cos_retriever.aremember(
                        query_bundle.query_str, nodes, response.response
                    )
            query_event.on_end(payload={EventPayload.RESPONSE: response})
        return response


def _outcome(nodes: list[NodeWithScore]) -> dict[str, Any]:
    meta = nodes[0].node.metadata if nodes else {}
    keys = ("cos_hit", "cos_served", "cos_job_id", "cos_reason")
    return {k: meta[k] for k in keys if k in meta} | {"cos_hit": bool(meta.get("cos_hit"))}


def _gen(answer: str) -> Generator[str, None, None]:
    yield answer


async def _agen(answer: str) -> AsyncGenerator[str, None]:
    yield answer
