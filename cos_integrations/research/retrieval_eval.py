"""The retrieval methods under test over one index of every document: ``fallback`` (the
product), ``rag`` and its variants, ``right-doc`` and the frameworks' peers, each question
answered with the same answer call; refinement from traffic and its repeats.

Examples:
    >>> RetrievalEvalOptions().k
    2
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from cos_integrations.defaults import (
    DEFAULT_K,
    DEFAULT_REFINE_RETARGET,
    DEFAULT_REFINE_TEACH,
    RefineTeach,
)
from cos_integrations.metrics import exact_match, squad_f1
from cos_integrations.model import ChatModel
from cos_integrations.research.answer_cache import AnswerCache
from cos_integrations.research.datasets import EvalDoc, EvalQA
from cos_integrations.research.peers import (
    PEERS,
)
from cos_integrations.research.reporting import aggregate
from cos_integrations.research.stream_eval import StreamOptions
from cos_integrations.research.traffic_eval import traffic_step
from cos_integrations.serving.hit_rule import HitRule
from cos_integrations.serving.index import chunk_position
from cos_integrations.serving.router import DEFAULT_MAX_ERROR
from cos_integrations.summarize.config import CoSConfig
from cos_integrations.text import estimate_tokens
from cos_integrations.usage import Usage

__all__ = [
    "answer_row",
    "usage_fields",
    "RetrievalEvalOptions",
    "RETRIEVAL_METHODS",
    "is_retrieval",
    "retrieval_rows",
    "eval_index",
]

log = logging.getLogger(__name__)


class RetrievalEvalOptions(BaseModel):
    """How ``fallback``, ``rag`` and ``right-doc`` are run (part of their records' signature);
    the hit rule defaults to the product's (``HitRule(judge="llm")``).

    ``summaries_from`` reuses recorded summaries (``OUT.docs.jsonl`` of an earlier run,
    records of ``summary_method``) instead of computing them, so retrieval variants can be
    compared over the very same summaries.
    """

    k: int = Field(DEFAULT_K, ge=1, description="summaries searched; chunks returned by rag/misses")
    rule: HitRule = Field(
        default_factory=lambda: HitRule(judge="llm"),
        description="fallback's hit rule (the product's, with the model judge); a threshold "
        "of None is calibrated on the traffic half's questions (test_half), like an index "
        "calibrates on its question banks",
    )
    summary_method: str = Field(
        default_factory=lambda: CoSConfig.shipped().strategy,
        description="whose summaries the index holds (default: what the shipped ingest "
        'makes, "zero-shot"); several, comma-separated ("zero-shot,cos"): one index '
        "each over the same chunks, and one fallback row each, named fallback[STRATEGY]",
    )
    summaries_from: str | None = None
    test_half: bool = Field(
        True,
        description="ask only the second half of each document's questions (the first "
        "half calibrates fallback's threshold, as an index calibrates on its questions)",
    )
    refine_teach: RefineTeach = Field(
        DEFAULT_REFINE_TEACH,
        description="refine_from_traffic: how a round teaches a summary (Refiner(teach=))",
    )
    refine_retarget: int = Field(
        DEFAULT_REFINE_RETARGET,
        ge=1,
        description="refine_from_traffic: in how many documents of the chunk ranking a "
        "refine job looks for a query's answer (Refiner(retarget=))",
    )
    deepen: Literal["cos", "cos-extract"] | None = Field(
        None,
        description="refine_from_traffic: after the refine jobs, run Chain of Summaries rounds "
        "on the documents that got traffic (the tiered mode's later tier, Refiner.adeepen)",
    )
    repeat_traffic: bool = Field(
        False,
        description="refine_from_traffic: after refinement, ask the traffic questions again, "
        "and a model-written paraphrase of each (PARAPHRASE_PROMPT)",
    )
    paraphrase_traffic: bool = Field(
        True,
        description="repeat_traffic: ask a paraphrase of each traffic question too (one "
        "more call and one more ask a question; off: the same questions again only)",
    )
    max_error: float | None = Field(
        DEFAULT_MAX_ERROR,
        description="fallback: the router's bound on served summary answers that disagree "
        "with the source (FallbackRetriever max_error); None: no router",
    )
    routing_check: bool = Field(
        True,
        description="fallback: the model judge's routing check (FallbackRetriever "
        "route_check); off only to measure what it does",
    )
    stream: StreamOptions | None = Field(
        None,
        description="run a stream of asks where questions come back instead of each test "
        "question once (research/stream_eval.py)",
    )
    hit_ablation: bool = Field(
        False,
        description="fallback: answer every hit again from its summary sentences alone, its "
        "chunk sentences alone and its document's whole best chunk alone (what the "
        "summary adds on a hit)",
    )

    @property
    def sources(self) -> list[str]:
        """The summary strategies of ``summary_method``, in the order given."""
        return list(dict.fromkeys(m.strip() for m in self.summary_method.split(",") if m.strip()))

    def label(self, source: str) -> str:
        """The fallback row of one strategy: ``fallback`` when there is one strategy."""
        return "fallback" if len(self.sources) <= 1 else f"fallback[{source}]"


RETRIEVAL_METHODS = (
    "fallback",
    "rag",
    "rag-focused",
    "rag-ordered",
    "rag-contextual",
    "right-doc",
    # the product through each framework's piece: stream rows only (framework_eval.py)
    "fallback+llamaindex",
    "fallback+langchain",
    *PEERS,
)


def is_retrieval(method: str) -> bool:
    """A retrieval method's record (``fallback[cos]`` included)."""
    return method.split("[", 1)[0] in RETRIEVAL_METHODS


def usage_fields(usage: Usage) -> dict[str, int]:
    return {
        "calls": usage.calls,
        "prompt_tokens": usage.prompt_tokens,
        "cached_tokens": usage.cached_tokens,
    }


def answer_row(q: EvalQA, answer: str | None, **extra: Any) -> dict[str, Any]:
    return {
        "question": q.question,
        "gold": q.answers,
        "answer": answer,
        "f1": squad_f1(answer or "", q.answers, q.language),
        "em": exact_match(answer or "", q.answers, q.language),
        **extra,
    }


async def retrieval_rows(
    llm: ChatModel,
    docs: list[EvalDoc],
    summaries: dict[str, dict],
    config: CoSConfig,
    methods: Sequence[str],
    refine_from_traffic: bool,
    options: RetrievalEvalOptions,
    index_dir: Path,
    done: dict[tuple[str, str], dict],
    write: Callable[[dict], Any],
    model_name: str,
    answer_cache: Path | None,
    label: str = "fallback",
) -> None:
    """``rag``, ``rag-focused``, ``fallback`` and ``right-doc`` over ONE index holding
    every evaluated document (summaries and chunks), so retrieval has to find the right
    document.

    Each question is answered in its own call with the same answer prompt: ``rag`` from the
    top-k chunks of the whole collection, ``rag-focused`` from their sentences on the
    question (the control for the ``"focused"`` hit context), ``fallback`` through
    :class:`FallbackRetriever` (a miss answers from the chunks it returns), ``right-doc``
    from the whole right document (the ceiling). Per question the records keep the answer,
    F1/EM, whether it hit, the retrieved context tokens (the judge's context included),
    calls and prompt tokens, and the judge's unchecked answer with its checks, so hit rules
    can be replayed without a model (``benchmarks/hit_rules.py``). The index persists in
    ``index_dir`` so a re-run resumes with the refinements already made. With
    ``refine_from_traffic`` the first half of each document's questions is traffic (its
    misses queue refine jobs, run before the re-test) and the second half is the test set of
    every method. ``label`` names the fallback records (``fallback[cos]`` when several
    summary strategies are compared, each over its own index).
    """
    index = eval_index(index_dir, docs, summaries, config, options, refine_from_traffic)
    contextual = (
        await _contextual_chunks(index, docs, summaries) if "rag-contextual" in methods else None
    )
    asker = _Asker(llm, index, options, AnswerCache(llm, model_name, answer_cache), contextual)
    for doc in docs:
        if doc.doc_id not in summaries or not doc.qas:
            continue  # a distractor is indexed, never asked about
        todo = [m for m in methods if (doc.doc_id, label if m == "fallback" else m) not in done]
        if not todo:
            continue
        qas = doc.qas
        split = (refine_from_traffic or options.test_half) and len(qas) >= 2
        traffic, test = (qas[: len(qas) // 2], qas[len(qas) // 2 :]) if split else ([], qas)
        if not refine_from_traffic:
            traffic = []  # the test half alone, comparable with a refine-from-traffic run
        # each method's questions in a row, so llama.cpp's prompt cache keeps the context
        for method, ask in asker.chunk_methods(doc).items():
            if method in todo:
                rows = [await ask(q) for q in test]
                write(
                    {"doc_id": doc.doc_id, "method": method, "questions": rows, **aggregate(rows)}
                )
        if "fallback" in todo:
            before = [await asker.fallback(q) for q in test]
            rec: dict[str, Any] = {
                "doc_id": doc.doc_id,
                "method": label,
                "threshold": asker.retriever.threshold,  # the value used (given or calibrated)
            }
            rec["questions"] = before
            rec.update(aggregate(before))
            if traffic:
                await traffic_step(
                    rec, doc, traffic, test, asker.fallback, llm, index, config, options
                )
            write(rec)


class _Asker:
    """One question answered by each retrieval method over one index, with the same answer
    prompt (``AnswerCache``); each returns the question's record row."""

    def __init__(
        self,
        llm: ChatModel,
        index: Any,
        options: RetrievalEvalOptions,
        answer: AnswerCache,
        contextual: ContextualChunks | None,
    ) -> None:
        from cos_integrations.serving.retrieval import FallbackRetriever

        self.index, self.options, self.answer, self.contextual = index, options, answer, contextual
        self.retriever = FallbackRetriever(
            index,
            llm=llm,
            rule=options.rule,
            k=options.k,
            route_check=options.routing_check,
            max_error=options.max_error,
        )

    def chunk_methods(self, doc: EvalDoc) -> dict[str, Callable[[EvalQA], Any]]:
        """The methods that read chunks (or the whole document), by name, in asking order."""
        return {
            "right-doc": lambda q: self.right_doc(q, doc),
            "rag": self.rag,
            "rag-focused": lambda q: self.rag(q, focused=True),
            "rag-ordered": lambda q: self.rag(q, ordered=True),
            "rag-contextual": lambda q: self.rag(q, contextual=True),
        }

    async def rag(
        self, q: EvalQA, *, focused: bool = False, ordered: bool = False, contextual: bool = False
    ) -> dict[str, Any]:
        from cos_integrations.serving.retrieval import focus_items

        k = self.options.k
        if contextual and self.contextual is not None:
            # the same chunks, found by their embeddings with the summary in front
            items = await asyncio.to_thread(self.contextual.search, q.question, k)
        else:
            items = await asyncio.to_thread(self.index.search_chunks, q.question, k)
        if ordered:
            # DOS RAG: the same top-k chunks put back in document order
            items = sorted(items, key=chunk_position)
        if focused:
            # the control for the "focused" hit context: rag's top-k chunks cut to the
            # same sentences on the query (all of them when none speaks of it)
            limit = self.options.rule.focus_sentences
            embedder = self.index.embedder
            items = focus_items(q.question, items, embedder=embedder, limit=limit) or items
        ans, usage = await self.answer(q, items)
        return answer_row(
            q,
            ans,
            context_tokens=sum(estimate_tokens(h.text) for h in items),
            docs=[h.doc_id for h in items],
            **usage_fields(usage),
        )

    async def fallback(self, q: EvalQA, *, traffic: bool = False) -> dict[str, Any]:
        # only traffic may queue refinement: a test question that taught the summary
        # its own answer would be measured on what it leaked
        self.retriever.refine_on_miss = "queue" if traffic else "off"
        res = await self.retriever.aretrieve(q.question)
        checked = res.check  # the router's check (aremember records it)
        usage = Usage().add(res.usage)
        ans = res.answer
        context = res.judge_context_tokens
        if ans is None and res.items:
            # a miss answers from the chunks it returned; a hit of judge="score" (no model
            # call to decide) answers from the summaries it returned
            ans, more = await self.answer(q, res.items)
            usage.add(more)
            context += res.context_tokens
            # as the product: the answer kept when the source bears it out, a check's
            # outcome recorded (FallbackRetriever.aanswer does the same)
            await self.retriever.aremember(res, ans)
        extra: dict[str, Any] = {}
        if self.options.hit_ablation and res.hit and res.candidates:
            extra["ablation"] = await self.ablate(q, res.items, res.candidates[0].doc_id)
        best = res.candidates[0] if res.candidates else None
        second = res.candidates[1] if len(res.candidates) > 1 else None
        return answer_row(
            q,
            ans,
            hit=res.hit,
            context_tokens=context,
            best_score=best.score if best else None,
            best_doc=best.doc_id if best else None,
            # where a hit went (an answered miss may go past the best summary's document)
            hit_doc=res.items[0].doc_id if res.hit and res.items else None,
            # the runner-up: a margin rule can be replayed from the records
            second_score=second.score if second else None,
            second_doc=second.doc_id if second else None,
            judge_answer=res.judge_answer,
            judge_f1=squad_f1(res.judge_answer or "", q.answers, q.language),
            served=res.served,
            checked=checked,
            to_chunks=res.checks.get("router") is False,
            quote=res.quote,
            judge_context_tokens=res.judge_context_tokens,
            checks=res.checks,
            docs=[h.doc_id for h in res.items],
            **usage_fields(usage),
            **extra,
        )

    async def ablate(self, q: EvalQA, items: list, doc_id: str) -> dict[str, dict[str, Any]]:
        """The same hit answered from parts of its context (not charged to the method)."""
        whole = await asyncio.to_thread(self.index.search_chunks, q.question, 1, doc_ids=[doc_id])
        parts = {
            "summary": [h for h in items if h.kind == "summary"],
            "chunk": [h for h in items if h.kind == "chunk"],
            "whole-chunk": whole[:1],
        }
        out: dict[str, dict[str, Any]] = {}
        for name, part in parts.items():
            ans = (await self.answer(q, part))[0] if part else None
            out[name] = {
                "answer": ans,
                "f1": squad_f1(ans or "", q.answers, q.language),
                "context_tokens": sum(estimate_tokens(h.text) for h in part),
            }
        return out

    async def right_doc(self, q: EvalQA, doc: EvalDoc) -> dict[str, Any]:
        from cos_integrations.serving.index import SearchHit

        item = SearchHit(doc.doc_id, doc.doc_id, doc.text, 1.0, {"title": doc.title}, "doc")
        ans, usage = await self.answer(q, [item])
        return answer_row(q, ans, context_tokens=estimate_tokens(doc.text), **usage_fields(usage))


def eval_index(
    index_dir: Path,
    docs: list[EvalDoc],
    summaries: dict[str, dict],
    config: CoSConfig,
    options: RetrievalEvalOptions,
    refine_from_traffic: bool,
) -> Any:
    """One index of every document with a summary (its recorded summary published as
    version 1, the vectors written in bulk), resumed when it exists, and its threshold
    calibrated on the questions it "knows" (the traffic half, never the test half)."""
    from cos_integrations.embedded.embeddings import LocalEmbedder
    from cos_integrations.serving.index import CoSIndex

    index = CoSIndex(index_dir, embedder=LocalEmbedder(), config=config)
    for doc in docs:
        rec = summaries.get(doc.doc_id)
        if not rec or index.store.get_document(doc.doc_id) is not None:
            continue
        index.store.upsert_document(doc.doc_id, doc.text, title=doc.title)
        index.store.publish_version(
            doc.doc_id,
            rec["summary"],
            expected_version=None,
            created_by=rec.get("method") or options.summary_method,
            reason="eval",
            summary_tokens=rec.get("summary_tokens") or estimate_tokens(rec["summary"]),
        )
    # the new documents, and any a stopped run published without its vectors
    index.sync_documents(index.store.needs_index())
    if options.rule.threshold is None and (options.test_half or refine_from_traffic):
        known = [
            (d.doc_id, q.question)
            for d in docs
            if d.doc_id in summaries
            for q in d.qas[: len(d.qas) // 2]
        ]
        index.calibrate_threshold(known)
    return index


class ContextualChunks:
    """``rag-contextual``: the index's own chunks, each embedded with its document's summary
    in front (Contextual Retrieval; Summary-Augmented Chunking, arXiv 2510.06999) and
    returned as the plain chunk, so the answer prompt is rag's. An exact cosine search in
    memory (at an evaluation's size the same top-k as Chroma's).

    Examples:
        >>> chunks = await _contextual_chunks(index, docs, summaries)   # doctest: +SKIP
        >>> chunks.search("Who won?", 2)[0].kind                        # doctest: +SKIP
        'chunk'
    """

    def __init__(self, embedder: Any, hits: list[Any], vectors: list[list[float]]) -> None:
        import numpy as np

        self.embedder = embedder
        self.hits = hits
        m = np.asarray(vectors, dtype=np.float32)
        self.matrix = m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)

    def search(self, query: str, k: int) -> list[Any]:
        import numpy as np

        from cos_integrations.serving.index import SearchHit

        q = np.asarray(self.embedder.embed_query(query), dtype=np.float32)
        scores = self.matrix @ (q / max(float(np.linalg.norm(q)), 1e-12))
        top = np.argsort(-scores)[:k]
        return [
            SearchHit(h.id, h.doc_id, h.text, float(scores[i]), h.metadata, "chunk")
            for i, h in ((int(i), self.hits[int(i)]) for i in top)
        ]


async def _contextual_chunks(
    index: Any, docs: list[EvalDoc], summaries: dict[str, dict]
) -> ContextualChunks:
    """Every chunk of ``docs`` in ``index``, embedded as ``SUMMARY\n\nCHUNK``."""
    from cos_integrations.serving.index import SearchHit

    hits: list[SearchHit] = []
    texts: list[str] = []
    for doc in docs:
        if doc.doc_id not in summaries:
            continue
        got = index.chunks.get(where={"doc_id": doc.doc_id}, include=["documents", "metadatas"])
        rows = sorted(
            zip(got["ids"], got["documents"], got["metadatas"], strict=True),
            key=lambda r: chunk_position(SearchHit(r[0], doc.doc_id, "", 0.0, {}, "chunk")),
        )
        for cid, text, meta in rows:
            hits.append(SearchHit(cid, doc.doc_id, text, 0.0, dict(meta or {}), "chunk"))
            texts.append(f"{summaries[doc.doc_id]['summary']}\n\n{text}")
    vectors = await asyncio.to_thread(index.embedder.embed_documents, texts)
    return ContextualChunks(index.embedder, hits, vectors)
