"""A query engine over the CoS fallback retriever: a hit's checked answer with no second
model call, a miss answered by your LLM over the source chunks with the product's own answer
call (or by the response synthesizer you configure)."""

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
from llama_index.core.llms import LLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.settings import Settings

from .llm import CoSChatLLM
from .retriever import CoSFallbackRetriever

__all__ = ["CoSQueryEngine", "SYNTHESIZER_ARGS"]

# from_defaults' arguments that choose how LlamaIndex's response synthesizer answers: given
# any, a miss is answered by that synthesizer; given none, by the product's answer call
# (LlamaIndex's default prompt made the embedded 1.5B model answer in whole sentences: F1 0.41
# on the SQuAD stream's misses, kept and served as verified answers; BENCHMARKS.md, "What a
# framework user pays")
SYNTHESIZER_ARGS = frozenset(
    {
        "response_synthesizer",
        "response_mode",
        "text_qa_template",
        "refine_template",
        "summary_template",
        "simple_template",
        "chat_content_qa_template",
        "chat_content_refine_template",
        "output_cls",
        "multimodal",
    }
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
    as ``source_nodes`` and no further model call; on a miss, the user's ``llm`` answers
    from the source chunks with the product's own answer call (one call, a short answer:
    :meth:`CoSFallbackRetriever.aanswer`, the answer and prompt tokens of ``cos eval``'s
    core row), or the response synthesizer does when ``from_defaults`` is given one or any
    of its arguments (:data:`SYNTHESIZER_ARGS`); an answer the chunks hold is kept as a
    verified answer for the next ask, and a router's check made on the way learns from it.
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

    def __init__(
        self, retriever: CoSFallbackRetriever, answer_llm: LLM | None = None, **kwargs: Any
    ) -> None:
        """``answer_llm``: the LLM that answers a miss with the product's answer call;
        ``None``, the response synthesizer answers it (``from_defaults`` sets it)."""
        if not isinstance(retriever, CoSFallbackRetriever):
            raise TypeError(
                "CoSQueryEngine needs a llamaindex_ext.CoSFallbackRetriever (its hits carry "
                f"their answers), not {type(retriever).__name__}; over any other retriever "
                "use RetrieverQueryEngine"
            )
        super().__init__(retriever, **kwargs)
        self._answer_llm = answer_llm

    @classmethod
    def from_defaults(cls, retriever: CoSFallbackRetriever, **kwargs: Any) -> CoSQueryEngine:
        """:meth:`RetrieverQueryEngine.from_args` (``llm``: default ``Settings.llm``, or the
        core's model, e.g. ``open_model()``'s, wrapped as :class:`CoSChatLLM`;
        ``response_mode``, ``streaming``, ``use_async``, templates...), for the
        ``from_defaults`` LlamaIndex users reach for. A miss is answered by ``llm`` with
        the product's answer call unless a synthesizer or its arguments are given
        (:data:`SYNTHESIZER_ARGS`)."""
        llm = kwargs.get("llm")
        if llm is not None and not isinstance(llm, LLM):
            kwargs["llm"] = CoSChatLLM(llm)
        engine = cls.from_args(retriever, **kwargs)
        if not SYNTHESIZER_ARGS & kwargs.keys():
            engine._answer_llm = kwargs.get("llm") or Settings.llm
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

    def _answered(
        self, answer: str | None, nodes: list[NodeWithScore], *, aio: bool
    ) -> RESPONSE_TYPE:
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
            elif self._answer_llm is not None:
                answer = self.cos_retriever.answer(query_bundle.query_str, nodes, self._answer_llm)
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
            elif self._answer_llm is not None:
                answer = await self.cos_retriever.aanswer(
                    query_bundle.query_str, nodes, self._answer_llm
                )
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


def _gen(answer: str | None) -> Generator[str, None, None]:
    if answer:
        yield answer


async def _agen(answer: str | None) -> AsyncGenerator[str, None]:
    if answer:
        yield answer
