"""A question-answering runnable over the CoS fallback retriever: a hit's checked answer
with no second model call, a miss answered by your chat model over the source chunks with
the product's own answer call (or your prompt)."""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import BasePromptTemplate
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda

from .retriever import CoSFallbackRetriever

__all__ = ["create_cos_qa_chain", "format_docs"]


def format_docs(docs: list[Document]) -> str:
    """The documents' texts, each under its title (or document id), blank-line separated."""
    return "\n\n".join(
        f"[{d.metadata.get('title') or d.metadata.get('doc_id', '')}]\n{d.page_content}"
        for d in docs
    )


def create_cos_qa_chain(
    retriever: CoSFallbackRetriever,
    llm: Runnable,
    prompt: BasePromptTemplate | None = None,
) -> Runnable:
    """A runnable that answers a question (a string, or ``{"question": ...}``) and returns
    ``{"question", "answer", "context", "hit", "served"}``.

    On a hit, ``answer`` is the one the retriever already checked (the model judge's
    grounded answer, or a verified answer served with no call; ``context`` the documents it
    was read from), and no further model call is made. On a miss, ``llm`` answers from the
    source chunks with the product's own answer call
    (:meth:`CoSFallbackRetriever.aanswer`: a short answer as JSON, the answer and the
    prompt tokens of ``cos eval``'s core row), or with ``prompt | llm`` when ``prompt`` is
    given (it takes ``context``, :func:`format_docs`' text, and ``question``); an answer the
    chunks hold is kept as a verified answer, so the next ask of the question costs no
    call. ``invoke``, ``ainvoke``, ``batch`` and
    ``stream`` work as on any runnable; calls report their usage through the run's
    callbacks (the judge's through the retriever's nested run).

    Examples:
        >>> chain = create_cos_qa_chain(retriever, chat_model)        # doctest: +SKIP
        >>> out = chain.invoke("When is rent due?")                    # doctest: +SKIP
        >>> out["answer"], out["hit"], out["context"][0].metadata["doc_id"]  # doctest: +SKIP
        ('the 1st', True, 'lease.md')
    """
    if not isinstance(retriever, CoSFallbackRetriever):
        raise TypeError(
            "create_cos_qa_chain needs a langchain_ext.CoSFallbackRetriever (its hits carry "
            f"their answers), not {type(retriever).__name__}"
        )
    answer_chain = prompt | llm | StrOutputParser() if prompt is not None else None

    def question_of(inputs: Any) -> str:
        question = inputs.get("question") if isinstance(inputs, dict) else inputs
        if not isinstance(question, str) or not question.strip():
            raise ValueError('create_cos_qa_chain takes a question: a string or {"question": ...}')
        return question

    def outcome(question: str, docs: list[Document], answer: str | None) -> dict[str, Any]:
        meta = docs[0].metadata if docs else {}
        return {
            "question": question,
            "answer": answer,
            "context": docs,
            "hit": bool(meta.get("cos_hit")),
            "served": meta.get("cos_served"),
        }

    def checked(docs: list[Document]) -> str | None:
        meta = docs[0].metadata if docs else {}
        return meta.get("cos_answer") if meta.get("cos_hit") else None

    def run(inputs: Any, config: RunnableConfig) -> dict[str, Any]:
        question = question_of(inputs)
        docs = retriever.invoke(question, config)
        answer = checked(docs)
        if answer is None and answer_chain is None:
            answer = retriever.answer(question, docs, llm, config)
        elif answer is None:
            context = {"context": format_docs(docs), "question": question}
            answer = answer_chain.invoke(context, config)
            retriever.remember(question, docs, answer)
        return outcome(question, docs, answer)

    async def arun(inputs: Any, config: RunnableConfig) -> dict[str, Any]:
        question = question_of(inputs)
        docs = await retriever.ainvoke(question, config)
        answer = checked(docs)
        if answer is None and answer_chain is None:
            answer = await retriever.aanswer(question, docs, llm, config)
        elif answer is None:
            context = {"context": format_docs(docs), "question": question}
            answer = await answer_chain.ainvoke(context, config)
            await retriever.aremember(question, docs, answer)
        return outcome(question, docs, answer)

    return RunnableLambda(run, afunc=arun, name="cos_qa_chain")
