"""Fallback retrieval: answer from summaries on a hit, from full text on a miss.

The decision, the full-text fallback, the refine-queue entry and the hit/miss counters live
here once; the LlamaIndex and LangChain retrievers wrap this and only convert types.

Hit rule: the best summary's cosine similarity must clear ``threshold``; with
``judge="llm"`` the model must also find the answer in the summaries that clear it (one
call, whose answer is kept, so answering a hit costs nothing more). A hit returns the top-k
summaries; a miss returns the top-k source chunks, from the candidate documents first.

Example:
    >>> retriever = FallbackRetriever(index, llm=llm, judge="llm")   # doctest: +SKIP
    >>> result = retriever.retrieve("When is rent due?")              # doctest: +SKIP
    >>> result.hit, [h.doc_id for h in result.items]                  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from ._sync import run_sync
from .index import CoSIndex, SearchHit
from .metrics import is_grounded, is_unanswered
from .model import ChatModel
from .prompts import ANSWERS_SCHEMA, answer_messages
from .questions import ParseError, parse_answers
from .text import estimate_tokens
from .usage import Usage

__all__ = ["FallbackRetriever", "RetrievalResult", "answer_from"]

log = logging.getLogger(__name__)

Judge = Literal["score", "llm"]
RefineMode = Literal["queue", "background", "off"]


@dataclass
class RetrievalResult:
    """What a query got: hit or miss, the items, and (when the model was asked) an answer."""

    query: str
    hit: bool
    items: list[SearchHit]
    reason: str
    candidates: list[SearchHit] = field(default_factory=list)
    answer: str | None = None
    job_id: int | None = None
    not_covered: bool = False
    usage: Usage = field(default_factory=Usage)

    @property
    def context_tokens(self) -> int:
        return sum(estimate_tokens(h.text) for h in self.items)


async def answer_from(
    llm: ChatModel, query: str, items: list[SearchHit], *, max_tokens: int = 128
) -> tuple[str | None, Usage]:
    """One call: answer ``query`` from the texts of ``items``; ``None`` when the model does
    not know or gives an answer that is not in those texts (see :func:`is_grounded`)."""
    content = "\n\n".join(f"[{h.metadata.get('title') or h.doc_id}]\n{h.text}" for h in items)
    res = await llm.chat(
        answer_messages(content, [query]), max_tokens=max_tokens, json_schema=ANSWERS_SCHEMA
    )
    try:
        answer = parse_answers(res.text, 1)[0]
    except ParseError:
        answer = res.text.strip() or None
    if not is_grounded(answer, content):
        if answer and not is_unanswered(answer):
            log.info("answer %r to %r is not in the retrieved text: not a hit", answer, query)
        return None, res.usage
    return answer, res.usage


class FallbackRetriever:
    """Summaries first, full text on a miss, and a refine job for every miss.

    ``refine_on_miss``: ``"queue"`` (enqueue; a ``cos refine`` worker processes), ``"off"``,
    or ``"background"`` (``on_miss`` is called with the job id, e.g. a background worker's
    ``notify``).
    """

    def __init__(
        self,
        index: CoSIndex,
        *,
        llm: ChatModel | None = None,
        k: int = 4,
        threshold: float = 0.80,
        judge: Judge = "score",
        fallback_k: int | None = None,
        refine_on_miss: RefineMode = "queue",
        on_miss: Callable[[RetrievalResult], None] | None = None,
    ) -> None:
        if judge == "llm" and llm is None:
            raise ValueError('judge="llm" needs llm=; pass a model or use judge="score"')
        self.index = index
        self.llm = llm
        self.k = k
        self.threshold = threshold
        self.judge = judge
        self.fallback_k = fallback_k
        self.refine_on_miss = refine_on_miss
        self.on_miss = on_miss
        self.hits = 0
        self.misses = 0

    def retrieve(self, query: str, *, k: int | None = None) -> RetrievalResult:
        """Sync wrapper of :meth:`aretrieve`."""
        return run_sync(self.aretrieve(query, k=k))

    async def aretrieve(self, query: str, *, k: int | None = None) -> RetrievalResult:
        k = self.k if k is None else k
        index = self.index
        embedding = await asyncio.to_thread(index.embedder.embed_query, query)
        candidates = await asyncio.to_thread(index.search_summaries, query, k, embedding=embedding)
        if not candidates:
            return RetrievalResult(query, False, [], "empty index")
        best = candidates[0]
        relevant = [c for c in candidates if c.score >= self.threshold]
        usage = Usage()
        answer: str | None = None
        if not relevant:
            hit, reason = False, f"best similarity {best.score:.3f} < {self.threshold}"
        elif self.judge == "llm":
            assert self.llm is not None
            answer, usage = await answer_from(self.llm, query, relevant)
            hit = answer is not None
            reason = "summaries answer the query" if hit else "summaries do not answer it"
        else:
            hit, reason = True, f"best similarity {best.score:.3f} >= {self.threshold}"
        if hit:
            self.hits += 1
            # the top-k summaries, best first: a hit is decided on the best, callers get k
            items = [*candidates]
            for h in items:
                h.metadata["cos_hit"] = True
            await asyncio.to_thread(
                index.store.record_event,
                "hit",
                best.doc_id,
                query,
                context_tokens=sum(estimate_tokens(h.text) for h in items),
            )
            return RetrievalResult(query, True, items, reason, candidates, answer, usage=usage)
        return await self._miss(query, k, candidates, embedding, reason, usage)

    async def _miss(self, query, k, candidates, embedding, reason, usage) -> RetrievalResult:
        index = self.index
        fk = self.fallback_k or k
        doc_ids = list(dict.fromkeys(c.doc_id for c in candidates))
        silent = [await asyncio.to_thread(index.store.not_in_source, d, query) for d in doc_ids]
        if doc_ids and all(silent):
            # Refinement already found every candidate's source silent on this query: say
            # so without a full-text search.
            await asyncio.to_thread(index.store.record_event, "not_covered", doc_ids[0], query)
            return RetrievalResult(
                query,
                False,
                [],
                "known not to be in the source",
                candidates,
                usage=usage,
                not_covered=True,
            )
        # Candidate documents first, then the whole collection; the best chunks win, so a
        # source whose summary was not even retrieved can still answer.
        scoped = await asyncio.to_thread(
            index.search_chunks, query, fk, doc_ids=doc_ids, embedding=embedding
        )
        glob = await asyncio.to_thread(index.search_chunks, query, fk, embedding=embedding)
        merged = {h.id: h for h in [*glob, *scoped]}
        items = sorted(merged.values(), key=lambda h: -h.score)[:fk]
        for h in items:
            h.metadata["cos_hit"] = False
        self.misses += 1
        target = items[0].doc_id if items else candidates[0].doc_id
        job_id = None
        if self.refine_on_miss != "off":
            job_id = await asyncio.to_thread(index.store.enqueue, target, query)
        await asyncio.to_thread(
            index.store.record_event,
            "miss",
            target,
            query,
            context_tokens=sum(estimate_tokens(h.text) for h in items),
        )
        result = RetrievalResult(
            query, False, items, reason, candidates, job_id=job_id, usage=usage
        )
        log.info("cache miss for %r (%s); refine job %s on %s", query, reason, job_id, target)
        if self.on_miss and job_id is not None:
            self.on_miss(result)
        return result
