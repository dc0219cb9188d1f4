"""Fallback retrieval: answer from summaries on a hit, from full text on a miss.

The decision, the full-text fallback, the refine-queue entry and the hit/miss counters live
here once; the LlamaIndex and LangChain retrievers wrap this and only convert types.

Hit rule: the best summary's cosine similarity must clear ``threshold`` (by default the
index's own, calibrated from the questions it knows, see ``CoSIndex.calibrate_threshold``,
else 0.80, tuned to e5); with
``judge="llm"`` the model must also answer the query from the hit context (one call, whose
answer is kept, so answering a hit costs nothing more), and the answer must pass the
checks: it occurs in that context (always), it is not the question's own words
(``reject_echo``), one sentence of the context holds both the answer and most of the question's key
words (``require_support``: it catches a plausible name picked from an unrelated sentence),
and the answer occurs in the source chunk of that document closest to the query
(``verify_chunk``: two cheap signals that must agree; a vector search, no model call).
Before the judge is asked, the best summary's document must also hold the top source chunk
of the whole collection (``verify_route``, on by default with the model judge): the summary
search and the chunk search must route the query to the same document, else it is a miss
and the judge's call is saved (the chunk search is the one a miss makes anyway).
``hit_context`` chooses what the judge reads and a hit returns: the summaries that
clear the threshold (``"summaries"``), the best one (``"best"``), the best summary and
the best source chunk of its document (``"best+chunk"``), or only those sentences of the
two that hold at least half of the query's key words, at most four
(``"focused"``, see :func:`~cos_integrations.metrics.focus_sentences`: the sentences the
support check could accept as an answer's evidence; when none does, the query is a miss
and the judge is not asked). A miss returns the top-k source chunks; an index without
chunk vectors (a LlamaIndex pipeline that emits only summaries) falls back to the
candidates' stored text, chunked and ranked on the fly.

Example:
    >>> retriever = FallbackRetriever(index, llm=llm, judge="llm")   # doctest: +SKIP
    >>> result = retriever.retrieve("When is rent due?")              # doctest: +SKIP
    >>> result.hit, [h.doc_id for h in result.items]                  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from .config import CoSConfig
from .defaults import (
    DEFAULT_HIT_CONTEXT,
    DEFAULT_REJECT_ECHO,
    DEFAULT_REQUIRE_SUPPORT,
    DEFAULT_THRESHOLD,
    DEFAULT_VERIFY_CHUNK,
    DEFAULT_VERIFY_ROUTE,
    FOCUS_SENTENCES,
    HIT_CONTEXTS,
    HitContext,
)
from .index import CoSIndex, SearchHit
from .metrics import echoes_question, focus_sentences, is_grounded, is_supported, is_unanswered
from .model import ChatModel
from .prompts import ANSWERS_SCHEMA, answer_messages
from .questions import ParseError, parse_answers
from .sync import run_sync
from .text import estimate_tokens
from .usage import Usage

__all__ = [
    "FallbackRetriever",
    "RetrievalResult",
    "answer_from",
    "ask",
    "focus_items",
    "HIT_CONTEXTS",
    "HitContext",
    "DEFAULT_THRESHOLD",
    "DEFAULT_HIT_CONTEXT",
    "DEFAULT_REJECT_ECHO",
    "DEFAULT_REQUIRE_SUPPORT",
    "DEFAULT_VERIFY_CHUNK",
    "DEFAULT_VERIFY_ROUTE",
]

if TYPE_CHECKING:
    from .refine import BackgroundRefiner

log = logging.getLogger(__name__)

Judge = Literal["score", "llm"]
RefineMode = Literal["queue", "background", "off"]


@dataclass
class RetrievalResult:
    """What a query got: hit or miss, the items, and (when the model was asked) an answer.

    ``judge_answer`` is the model's answer from the hit context before the checks, and
    ``checks`` says which checks it passed (``routed``: the summary and chunk searches
    agreed on the document, checked before the judge; ``focused``: a ``"focused"`` hit
    context found a sentence that speaks of the query, also before the judge;
    ``in_context``, ``not_echo``,
    ``supported``, ``in_chunk``, and ``in_source``, reported only: the answer occurs
    anywhere in the stored source, which ``in_chunk`` implies), so a caller can see why a
    query missed.
    ``fallback`` says where a miss's items came from: ``"chunks"`` (chunk vectors) or
    ``"stored text"`` (no chunk vectors: the candidates' stored full text, chunked and
    ranked on the fly).
    """

    query: str
    hit: bool
    items: list[SearchHit]
    reason: str
    candidates: list[SearchHit] = field(default_factory=list)
    answer: str | None = None
    job_id: int | None = None
    # refinement already found every candidate's source silent on this query
    not_in_source: bool = False
    usage: Usage = field(default_factory=Usage)
    judge_answer: str | None = None
    judge_context_tokens: int = 0
    checks: dict[str, bool] = field(default_factory=dict)
    fallback: str | None = None

    @property
    def not_covered(self) -> bool:
        """The name before 0.2 of :attr:`not_in_source`."""
        return self.not_in_source

    @property
    def context_tokens(self) -> int:
        return sum(estimate_tokens(h.text) for h in self.items)


def _content(items: list[SearchHit]) -> str:
    return "\n\n".join(f"[{h.metadata.get('title') or h.doc_id}]\n{h.text}" for h in items)


async def ask(
    llm: ChatModel, query: str, items: list[SearchHit], *, max_tokens: int = 128
) -> tuple[str | None, Usage]:
    """One call: the model's answer to ``query`` from the texts of ``items`` (``None`` for
    an empty reply), unchecked. Plain chunk RAG is this call over the top-k chunks."""
    res = await llm.chat(
        answer_messages(_content(items), [query]),
        max_tokens=max_tokens,
        json_schema=ANSWERS_SCHEMA,
    )
    try:
        answer = parse_answers(res.text, 1)[0]
    except ParseError:
        answer = res.text.strip() or None
    return answer, res.usage


async def answer_from(
    llm: ChatModel, query: str, items: list[SearchHit], *, max_tokens: int = 128
) -> tuple[str | None, Usage]:
    """One call: answer ``query`` from the texts of ``items``; ``None`` when the model does
    not know or gives an answer that is not in those texts (see :func:`is_grounded`)."""
    answer, usage = await ask(llm, query, items, max_tokens=max_tokens)
    if not is_grounded(answer, _content(items)):
        if answer and not is_unanswered(answer):
            log.info("answer %r to %r is not in the retrieved text: not a hit", answer, query)
        return None, usage
    return answer, usage


def focus_items(
    query: str, items: list[SearchHit], *, limit: int = FOCUS_SENTENCES
) -> list[SearchHit]:
    """``items`` cut to their sentences that speak of ``query`` (at most ``limit`` in all,
    see :func:`~cos_integrations.metrics.focus_sentences`): what a ``"focused"`` hit
    context reads. Items with no such sentence are dropped; the rest keep their id, score
    and metadata, with ``cos_focused=True``.

    Example:
        >>> hit = SearchHit("c1", "d", "Rain fell. Rent is due on the 1st.", 0.9, {}, "chunk")
        >>> [h.text for h in focus_items("When is rent due?", [hit])]
        ['Rent is due on the 1st.']
    """
    kept = focus_sentences(query, [h.text for h in items], limit=limit)
    return [
        dataclasses.replace(h, text=" ".join(sents), metadata={**h.metadata, "cos_focused": True})
        for h, sents in zip(items, kept, strict=True)
        if sents
    ]


class FallbackRetriever:
    """Summaries first, full text on a miss, and a refine job for every miss.

    ``refine_on_miss``: ``"queue"`` (enqueue; a ``cos refine`` worker processes), ``"off"``,
    or ``"background"`` (enqueue, and a :class:`~cos_integrations.refine.BackgroundRefiner`
    owned by this retriever, started on the first miss, refines with ``llm`` and
    ``refine_config`` (default: the index's config) while queries go on; :meth:`close`
    stops it). ``on_miss(result)`` is called for every miss that queued a job. A call may
    pass its own ``llm=`` (e.g. one bound to a framework run's callbacks); the counters
    ``hits`` and ``misses`` stay on this retriever. ``hit_context``, ``reject_echo``,
    ``require_support``, ``verify_chunk`` and ``verify_route`` (``None``: on for
    ``judge="llm"``, off for ``judge="score"``) shape the hit decision (see the module
    docstring); ``k`` summaries are searched either way.

    Example:
        >>> retriever = FallbackRetriever(index, llm=llm, judge="llm", k=2)  # doctest: +SKIP
        >>> retriever.retrieve("When is rent due?").hit                      # doctest: +SKIP
        True
    """

    def __init__(
        self,
        index: CoSIndex,
        *,
        llm: ChatModel | None = None,
        k: int = 4,
        threshold: float | None = None,
        judge: Judge = "score",
        fallback_k: int | None = None,
        refine_on_miss: RefineMode = "queue",
        on_miss: Callable[[RetrievalResult], None] | None = None,
        hit_context: HitContext | None = None,
        reject_echo: bool = DEFAULT_REJECT_ECHO,
        require_support: bool = DEFAULT_REQUIRE_SUPPORT,
        verify_chunk: bool = DEFAULT_VERIFY_CHUNK,
        verify_route: bool | None = DEFAULT_VERIFY_ROUTE,
        refine_config: CoSConfig | None = None,
    ) -> None:
        if judge == "llm" and llm is None:
            raise ValueError('judge="llm" needs llm=; pass a model or use judge="score"')
        if refine_on_miss not in ("queue", "background", "off"):
            raise ValueError(
                f"refine_on_miss must be queue, background or off, not {refine_on_miss!r}"
            )
        if refine_on_miss == "background" and llm is None:
            raise ValueError('refine_on_miss="background" needs llm= to refine with')
        if hit_context is None:
            # what was measured best for the model judge; a similarity-only hit has no
            # judge and returns the top-k summaries (the retriever's k contract)
            hit_context = DEFAULT_HIT_CONTEXT if judge == "llm" else "summaries"
        if hit_context not in HIT_CONTEXTS:
            raise ValueError(f"hit_context must be one of {HIT_CONTEXTS}, not {hit_context!r}")
        self.index = index
        self.llm = llm
        self.k = k
        self.threshold = threshold  # None: the index's (calibrated, else 0.80), read live
        self.judge = judge
        self.fallback_k = fallback_k
        self.refine_on_miss = refine_on_miss
        self.on_miss = on_miss
        self.hit_context = hit_context
        self.reject_echo = reject_echo
        self.require_support = require_support
        self.verify_chunk = verify_chunk
        self.verify_route = verify_route
        self.refine_config = refine_config
        self.hits = 0
        self.misses = 0
        self._background: BackgroundRefiner | None = None

    @property
    def routes(self) -> bool:
        """Whether the routing check applies (``verify_route``, or its default for the
        judge: on for ``"llm"``, off for ``"score"``)."""
        return self.judge == "llm" if self.verify_route is None else self.verify_route

    @property
    def threshold(self) -> float:
        """The similarity a query's best summary must reach before the judge is asked: the
        value given, else the index's (:attr:`CoSIndex.threshold`: calibrated, or 0.80)."""
        return self._threshold if self._threshold is not None else self.index.threshold

    @threshold.setter
    def threshold(self, value: float | None) -> None:
        self._threshold = value

    def retrieve(
        self, query: str, *, k: int | None = None, llm: ChatModel | None = None
    ) -> RetrievalResult:
        """Sync wrapper of :meth:`aretrieve`."""
        return run_sync(self.aretrieve(query, k=k, llm=llm))

    async def aretrieve(
        self, query: str, *, k: int | None = None, llm: ChatModel | None = None
    ) -> RetrievalResult:
        """Decide hit or miss for ``query`` (``k`` summaries searched, default ``self.k``);
        ``llm`` overrides the retriever's model for this call's judge."""
        k = self.k if k is None else k
        llm = llm or self.llm
        index = self.index
        embedding = await asyncio.to_thread(index.embedder.embed_query, query)
        candidates = await asyncio.to_thread(index.search_summaries, query, k, embedding=embedding)
        if not candidates:
            return RetrievalResult(query, False, [], "empty index")
        best = candidates[0]
        relevant = [c for c in candidates if c.score >= self.threshold]
        usage = Usage()
        answer: str | None = None
        judge_answer: str | None = None
        checks: dict[str, bool] = {}
        context: list[SearchHit] = []
        full: list[SearchHit] = []  # the context before a "focused" cut
        top: list[SearchHit] | None = None  # the whole collection's top chunks, if searched
        hit, reason = False, ""
        if relevant and self.routes:
            top = await asyncio.to_thread(
                index.search_chunks, query, self.fallback_k or k, embedding=embedding
            )
            if top:  # no chunk vectors: nothing to agree with, the check does not apply
                checks["routed"] = top[0].doc_id == best.doc_id
        if not relevant:
            hit, reason = False, f"best similarity {best.score:.3f} < {self.threshold}"
        elif checks.get("routed") is False:
            assert top is not None
            hit = False
            reason = (
                f"routing disagrees: the best summary is {best.doc_id}'s, the top source "
                f"chunk {top[0].doc_id}'s"
            )
        else:
            context = full = await self._context(query, relevant, embedding, top)
            if self.hit_context == "focused":
                context = focus_items(query, full)
                checks["focused"] = bool(context)
                if not context:
                    reason = (
                        "no sentence of the best summary or its chunk holds half of the "
                        "query's key words"
                    )
        if context and self.judge == "llm":
            assert llm is not None
            judge_answer, usage = await ask(llm, query, context)
            checks |= await asyncio.to_thread(
                self._checks, judge_answer, query, context, embedding, full
            )
            failed = [name for name in self._required() if not checks.get(name)]
            hit = not failed
            answer = judge_answer if hit else None
            reason = (
                "summaries answer the query"
                if hit
                else f"summaries do not answer it ({', '.join(failed)} failed)"
            )
        elif context:
            hit, reason = True, f"best similarity {best.score:.3f} >= {self.threshold}"
        judged = self.judge == "llm" and bool(context)
        judge_tokens = sum(estimate_tokens(h.text) for h in context) if judged else 0
        if hit:
            self.hits += 1
            # "summaries": callers get the top-k summaries, best first (the hit was decided
            # on those that clear the threshold); otherwise what the answer came from
            items = [*candidates] if self.hit_context == "summaries" else context
            for h in items:
                h.metadata["cos_hit"] = True
            await asyncio.to_thread(
                index.store.record_event,
                "hit",
                best.doc_id,
                query,
                context_tokens=sum(estimate_tokens(h.text) for h in items),
            )
            return RetrievalResult(
                query,
                True,
                items,
                reason,
                candidates,
                answer,
                usage=usage,
                judge_answer=judge_answer,
                judge_context_tokens=judge_tokens,
                checks=checks,
            )
        res = await self._miss(query, k, candidates, embedding, reason, usage, top)
        res.judge_answer, res.checks, res.judge_context_tokens = judge_answer, checks, judge_tokens
        return res

    def _required(self) -> list[str]:
        names = ["in_context"]
        if self.reject_echo:
            names.append("not_echo")
        if self.require_support:
            names.append("supported")
        if self.verify_chunk:
            names.append("in_chunk")
        return names

    async def _context(
        self,
        query: str,
        relevant: list[SearchHit],
        embedding: list[float],
        top: list[SearchHit] | None = None,
    ) -> list[SearchHit]:
        """What the judge reads and a hit returns (see ``hit_context``); ``top``, the
        collection's top chunks when the routing check searched them: its first chunk is
        then the best summary's document's best chunk, so no second search is made."""
        if self.hit_context == "summaries":
            return relevant
        best = relevant[0]
        # "focused" starts from best+chunk and keeps their sentences on the query
        if self.hit_context == "best":
            return [best]
        if top and top[0].doc_id == best.doc_id:
            return [best, top[0]]
        chunk = await asyncio.to_thread(self._best_chunk, query, best.doc_id, embedding)
        return [best, *chunk]

    def _best_chunk(self, query: str, doc_id: str, embedding: list[float]) -> list[SearchHit]:
        """The source chunk of ``doc_id`` closest to the query (chunk vectors, or the stored
        text chunked now when the index has none); empty when the document has no text."""
        chunks = self.index.search_chunks(query, 1, doc_ids=[doc_id], embedding=embedding)
        if not chunks:
            chunks = self.index.rank_stored_text(query, 1, doc_ids=[doc_id], embedding=embedding)
        return chunks[:1]

    def _checks(
        self,
        answer: str | None,
        query: str,
        context: list[SearchHit],
        embedding: list[float],
        full: list[SearchHit] | None = None,
    ) -> dict[str, bool]:
        """Every check on the judge's answer (cheap, no model call); the decision uses
        those this retriever requires, and the rest are reported for diagnosis.
        ``in_chunk`` is reported when the context holds a chunk or ``verify_chunk`` asks
        for one (only then is the extra vector search made); it reads the whole chunk
        (``full``: the context before a ``"focused"`` cut)."""
        content = _content(context)
        in_context = is_grounded(answer, content)
        sources = []
        for doc_id in dict.fromkeys(h.doc_id for h in context):
            doc = self.index.store.get_document(doc_id)
            if doc is not None:
                sources.append(doc.text)
        checks = {
            "in_context": in_context,
            "not_echo": not echoes_question(answer, query),
            "in_source": in_context and is_grounded(answer, "\n".join(sources)),
            "supported": in_context and is_supported(answer, query, content),
        }
        # the best summary's document: its chunk closest to the query should hold the
        # answer too (already in the context for best+chunk)
        chunk = [h for h in full or context if h.kind == "chunk"][:1]
        best = next((h for h in full or context if h.kind == "summary"), None)
        if not chunk and self.verify_chunk and best is not None and in_context:
            chunk = self._best_chunk(query, best.doc_id, embedding)
        if chunk or self.verify_chunk:
            checks["in_chunk"] = in_context and bool(chunk) and is_grounded(answer, chunk[0].text)
        return checks

    async def _miss(
        self, query, k, candidates, embedding, reason, usage, top=None
    ) -> RetrievalResult:
        index = self.index
        fk = self.fallback_k or k
        doc_ids = list(dict.fromkeys(c.doc_id for c in candidates))
        silent = [await asyncio.to_thread(index.store.not_in_source, d, query) for d in doc_ids]
        if doc_ids and all(silent):
            # Refinement already found every candidate's source silent on this query: say
            # so without a full-text search.
            await asyncio.to_thread(index.store.record_event, "not_in_source", doc_ids[0], query)
            return RetrievalResult(
                query,
                False,
                [],
                "known not to be in the source",
                candidates,
                usage=usage,
                not_in_source=True,
            )
        # Candidate documents first, then the whole collection; the best chunks win, so a
        # source whose summary was not even retrieved can still answer.
        scoped = await asyncio.to_thread(
            index.search_chunks, query, fk, doc_ids=doc_ids, embedding=embedding
        )
        glob = top
        if glob is None:
            glob = await asyncio.to_thread(index.search_chunks, query, fk, embedding=embedding)
        merged = {h.id: h for h in [*glob, *scoped]}
        items = sorted(merged.values(), key=lambda h: -h.score)[:fk]
        fallback = "chunks"
        if not items:
            # No chunk vectors (e.g. a pipeline that indexed only summaries): the stored
            # full text of the candidate documents, chunked and ranked now.
            items = await asyncio.to_thread(
                index.rank_stored_text, query, fk, doc_ids=doc_ids, embedding=embedding
            )
            fallback = "stored text"
            reason += "; no chunk vectors: ranked the candidates' stored text"
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
            query, False, items, reason, candidates, job_id=job_id, usage=usage, fallback=fallback
        )
        log.info("cache miss for %r (%s); refine job %s on %s", query, reason, job_id, target)
        if job_id is not None:
            if self.refine_on_miss == "background":
                self._background_refiner().notify()
            if self.on_miss:
                self.on_miss(result)
        return result

    def _background_refiner(self) -> BackgroundRefiner:
        if self._background is None:
            from .engine import ChainOfSummaries
            from .refine import BackgroundRefiner, Refiner

            assert self.llm is not None
            engine = ChainOfSummaries(self.llm, self.refine_config or self.index.config)
            self._background = BackgroundRefiner(Refiner(self.index, engine))
        return self._background

    @property
    def background(self) -> BackgroundRefiner | None:
        """The background refiner of ``refine_on_miss="background"``, once started."""
        return self._background

    def close(self) -> None:
        """Stop the background refiner, if one was started (queued jobs stay in the store)."""
        if self._background is not None:
            self._background.close()
            self._background = None
