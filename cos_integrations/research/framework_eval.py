"""What a framework user pays: the product asked through LlamaIndex's
:class:`~llamaindex_ext.CoSQueryEngine` and LangChain's
:func:`~langchain_ext.create_cos_qa_chain`, as their README snippets build them, with
prompt tokens and calls counted by the frameworks' own callbacks (LlamaIndex
``TokenCountingHandler``, LangChain ``UsageMetadataCallbackHandler``), not by the core.

Each is a stream row of ``cos eval --stream`` (``fallback+llamaindex``,
``fallback+langchain``) beside the core's ``fallback``: the same stream, a fresh copy of
the same index, the same refine passes; a miss is answered by each piece's default, the
product's own answer call through the framework's chat model
(``CoSFallbackRetriever.aanswer``), a hit and a served verified answer by what the
retriever already has.
:func:`compare_rows` says how far each stays from the core row, ask by ask.

Examples:
    >>> sorted(FRAMEWORK_ROWS)
    ['fallback+langchain', 'fallback+llamaindex']
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from cos_integrations.model import ChatModel
from cos_integrations.usage import Usage

__all__ = ["FRAMEWORK_ROWS", "framework_asker", "compare_rows", "Asker"]

# a stream row's ask: the question -> (answer, usage, what the row records beside them)
Asker = Callable[[str], Awaitable[tuple[str | None, Usage, dict[str, Any]]]]


def _llamaindex(index: Any, llm: ChatModel, retrieval: Any) -> Asker:
    from llama_index.core.callbacks import CallbackManager, TokenCountingHandler

    from llamaindex_ext import CoSChatLLM, CoSFallbackRetriever, CoSQueryEngine

    # usage comes from each reply's raw usage (what the server counted); the tokenizer
    # would count only a reply without one, and str.split keeps it offline (tiktoken's
    # default downloads its encoding)
    counter = TokenCountingHandler(tokenizer=str.split)
    manager = CallbackManager([counter])
    chat = CoSChatLLM(llm, callback_manager=manager)  # as Settings.llm would be
    retriever = CoSFallbackRetriever(
        index,
        llm=chat,
        similarity_top_k=retrieval.k,
        rule=retrieval.rule,
        max_error=retrieval.max_error,
        callback_manager=manager,
    )
    engine = CoSQueryEngine.from_defaults(retriever, llm=chat, callback_manager=manager)

    async def ask(question: str) -> tuple[str | None, Usage, dict[str, Any]]:
        counter.reset_counts()
        response = await engine.aquery(question)
        meta = response.metadata or {}
        usage = Usage(
            calls=len(counter.llm_token_counts), prompt_tokens=counter.prompt_llm_token_count
        )
        answer = str(response.response).strip() if response.response else None
        return answer, usage, {"hit": bool(meta.get("cos_hit")), "served": meta.get("cos_served")}

    return ask


def _langchain(index: Any, llm: ChatModel, retrieval: Any) -> Asker:
    from langchain_core.callbacks import BaseCallbackHandler, UsageMetadataCallbackHandler

    from langchain_ext import CoSChatModel, CoSFallbackRetriever, create_cos_qa_chain

    class Calls(BaseCallbackHandler):
        """Model calls in a run (each chat model run's end)."""

        def __init__(self) -> None:
            self.count = 0

        def on_llm_end(self, response: Any, **kwargs: Any) -> None:
            self.count += 1

    chat = CoSChatModel(model=llm)
    retriever = CoSFallbackRetriever.from_persist_dir(
        str(index.path),
        llm=chat,
        embeddings=index.embedder,
        k=retrieval.k,
        rule=retrieval.rule,
        max_error=retrieval.max_error,
    )
    chain = create_cos_qa_chain(retriever, chat)

    async def ask(question: str) -> tuple[str | None, Usage, dict[str, Any]]:
        tokens, calls = UsageMetadataCallbackHandler(), Calls()
        out = await chain.ainvoke(question, config={"callbacks": [tokens, calls]})
        prompt = sum(u.get("input_tokens", 0) for u in tokens.usage_metadata.values())
        answer = (out["answer"] or "").strip() or None
        extra = {"hit": out["hit"], "served": out["served"]}
        return answer, Usage(calls=calls.count, prompt_tokens=prompt), extra

    return ask


FRAMEWORK_ROWS: dict[str, Callable[[Any, ChatModel, Any], Asker]] = {
    "fallback+llamaindex": _llamaindex,
    "fallback+langchain": _langchain,
}


def framework_asker(name: str, index: Any, llm: ChatModel, retrieval: Any) -> Asker:
    """The ask of stream row ``name`` over ``index`` (a :class:`CoSIndex`), every model call
    through ``llm`` (the stream's recorded model) as the framework's chat model."""
    return FRAMEWORK_ROWS[name](index, llm, retrieval)


def compare_rows(core: list[dict[str, Any]], row: list[dict[str, Any]]) -> dict[str, Any]:
    """A framework row against the core's ``fallback``, ask by ask: on the asks both took
    the same way (served, hit, or miss), how often the answers are the same and how far the
    prompt tokens and calls differ; and how many asks went another way."""

    def way(r: dict[str, Any]) -> str:
        return "served" if r.get("served") else "hit" if r.get("hit") else "miss"

    out: dict[str, Any] = {"asks": len(row)}
    for kind in ("served", "hit", "miss"):
        pairs = [(c, r) for c, r in zip(core, row, strict=True) if way(c) == way(r) == kind]
        if not pairs:
            out[kind] = {"asks": 0}
            continue
        out[kind] = {
            "asks": len(pairs),
            "same_answer": sum(
                (c["answer"] or "").strip() == (r["answer"] or "").strip() for c, r in pairs
            ),
            "f1": sum(r["f1"] for _, r in pairs) / len(pairs),
            "core_f1": sum(c["f1"] for c, _ in pairs) / len(pairs),
            "tokens_diff": sum(r["prompt_tokens"] - c["prompt_tokens"] for c, r in pairs)
            / len(pairs),
            "max_abs_tokens_diff": max(
                abs(r["prompt_tokens"] - c["prompt_tokens"]) for c, r in pairs
            ),
            "calls": sum(r["calls"] for _, r in pairs),
            "core_calls": sum(c["calls"] for c, _ in pairs),
        }
    out["other_way"] = sum(way(c) != way(r) for c, r in zip(core, row, strict=True))
    return out
