"""Fallback retrieval: a verified answer when the question was answered before, else
from summaries on a hit and from full text on a miss.

The decision, the full-text fallback, the refine-queue entry and the hit/miss counters live
here once; the LlamaIndex and LangChain retrievers wrap this and only convert types.

Verified answers (:mod:`~cos_integrations.serving.answers`) come first: an exact repeat of
a question whose answer the source bore out, or a close rewording of one, is served that
answer with no model call (a rewording under its entry's bar after one short check).

Hit rule (:mod:`~cos_integrations.serving.hit_rule`): the best summary's cosine
similarity must clear ``threshold`` (by default the index's own, calibrated from the
questions it knows, else 0.80, tuned to e5); with ``judge="llm"`` the best summary's document
must also hold the collection's top source chunk (the summary and chunk searches route the
query to the same document; else it is a miss and the judge's call is saved: the chunk
search is the one a miss makes anyway), and the model must answer the query from the hit
context with a verbatim quote from it (one structured-output call, whose answer is kept, so
answering a hit costs nothing more): the quote must be in the context, the answer in the
quote, and the answer not just the question's words. ``hit_context`` chooses what the judge
reads and a hit returns: the summaries that clear the threshold (``"summaries"``), the best
summary and the best source chunk of its document (``"best+chunk"``), or their sentence
windows closest to the query by the index's embedding (``"focused"``, :func:`focus_items`).
A miss returns the top-k source chunks; an index without chunk vectors (a LlamaIndex
pipeline that emits only summaries) falls back to the candidates' stored text, chunked and
ranked on the fly.

Examples:
    >>> retriever = FallbackRetriever(index, llm=llm)                 # doctest: +SKIP
    >>> result = retriever.retrieve("When is rent due?")              # doctest: +SKIP
    >>> result.hit, [h.doc_id for h in result.items]                  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from cos_integrations.defaults import (
    ANSWER_CHECK_SIMILARITY,
    DEFAULT_HIT_CONTEXT,
    DEFAULT_K,
    DEFAULT_REFINE_MIN_ASKS,
    DEFAULT_REFINE_TEACH,
    DEFAULT_THRESHOLD,
    FOCUS_SENTENCES,
    HIT_CONTEXTS,
    REFINE_TEACH,
    HitContext,
    RefineTeach,
)
from cos_integrations.model import ChatModel
from cos_integrations.serving.answers import (
    NEIGHBOUR_MARGIN,
    VerifiedAnswers,
    best_source,
    entry_item,
)
from cos_integrations.serving.hit_rule import (
    GROUNDED_SCHEMA,
    GroundedReply,
    HitRule,
    Judge,
    answers_agree,
    choose_windows,
    is_grounded,
    parse_grounded,
    said_nothing,
    sentence_windows,
)
from cos_integrations.serving.index import CoSIndex, SearchHit
from cos_integrations.serving.router import DEFAULT_MAX_ERROR, RouteMode, Router, upper_bound
from cos_integrations.storage.answers import REPEAT, AnswerEntry
from cos_integrations.summarize.config import CoSConfig
from cos_integrations.summarize.prompts import ANSWERS_SCHEMA, answer_messages, grounded_messages
from cos_integrations.summarize.questions import ParseError, parse_answers
from cos_integrations.sync import offload, run_sync
from cos_integrations.text import estimate_tokens, split_sentences
from cos_integrations.usage import Usage

__all__ = [
    "FallbackRetriever",
    "RESULT_KEYS",
    "item_metadata",
    "RetrievalResult",
    "Citation",
    "cite",
    "Decision",
    "HitRule",
    "Judge",
    "answer_from",
    "ask",
    "ask_grounded",
    "focus_items",
    "HIT_CONTEXTS",
    "HitContext",
    "DEFAULT_THRESHOLD",
    "DEFAULT_HIT_CONTEXT",
]

if TYPE_CHECKING:
    from cos_integrations.serving.refine import BackgroundRefiner

log = logging.getLogger(__name__)

RefineMode = Literal["queue", "background", "off"]
# results held for the caller's answer (FallbackRetriever.aremember_items), at most
AWAITING_LIMIT = 1024


@dataclass(frozen=True)
class Citation:
    """Where an answer came from: the document (a page's section is ``PAGE#anchor``), its
    source path or URL with the section's anchor, its title (a section's heading path),
    whether the query hit (the summary answered) or missed (the source text did), and the
    summary version a hit read.

    Examples:
        >>> c = Citation("docs/t.html#sets", "docs/t.html#sets", "Data Structures › Sets",
        ...              True, 3)
        >>> str(c)
        'Data Structures › Sets <docs/t.html#sets> (hit, summary v3)'
    """

    doc_id: str
    source: str
    title: str
    hit: bool
    summary_version: int | None = None

    def __str__(self) -> str:
        how = (
            f"hit, summary v{self.summary_version}"
            if self.hit and self.summary_version is not None
            else ("hit" if self.hit else "miss, source text")
        )
        return f"{self.title} <{self.source}> ({how})"


def cite(hit: SearchHit, hit_flag: bool, version: int | None = None) -> Citation:
    """The :class:`Citation` of one retrieved item (``version``: the summary version of a
    hit, when the item is a chunk read beside it)."""
    meta = hit.metadata
    own = meta.get("cos_version") if hit.kind == "summary" else None
    return Citation(
        doc_id=hit.doc_id,
        source=str(meta.get("source") or hit.doc_id),
        title=str(meta.get("title") or hit.doc_id),
        hit=hit_flag,
        summary_version=int(own) if own is not None else version,
    )


@dataclass
class RetrievalResult:
    """What a query got: hit or miss, the items, and (when the model was asked) an answer.

    ``judge_answer`` is the model's answer from the hit context before the checks,
    ``quote`` the words it quoted from that context for it, and ``checks`` says which
    checks it passed (``routed``: the summary and chunk searches agreed on the document,
    checked before the judge; ``answered``, ``quoted``, ``in_quote``, ``not_echo``: the
    grounding, :func:`~cos_integrations.serving.hit_rule.grounding_checks`; ``in_source``,
    reported only: the answer occurs in the stored source), so a caller can see why a
    query missed; ``judge_error`` says why a judge's reply could not be read (a miss).
    ``served`` (``"exact"`` or ``"similar"``): the query was answered by a verified answer
    (entry ``entry_id``) with no model call; its one item is the source sentence the answer
    was verified on (``"repeat"``: an exact repeat answered as the same chunks answered it
    before, unverified; its items are those chunks); ``near`` (entry id, similarity): a
    verified question close to the query but under that entry's bar (the query went the
    usual way; the answer it gets from the source decides whether the bar must rise,
    :meth:`FallbackRetriever.aremember`).
    ``fallback`` says where a miss's items came from: ``"chunks"`` (chunk
    vectors) or ``"stored text"`` (no chunk vectors: the candidates' stored full text,
    chunked and ranked on the fly). ``not_in_source``: refinement found every candidate's
    source silent on this query before (the items are still the source chunks; no job is
    queued again).

    Examples:
        >>> chunk = SearchHit("lease.md::chunk-0", "lease.md", "Rent is due on the 1st.",
        ...                   0.86, {"doc_id": "lease.md", "source": "lease.md"}, "chunk")
        >>> result = RetrievalResult("When is rent due?", False, [chunk], "best similarity "
        ...                          "0.71 < 0.8", job_id=3, fallback="chunks")
        >>> result.hit, result.job_id, [c.doc_id for c in result.citations]
        (False, 3, ['lease.md'])
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
    quote: str | None = None
    judge_error: str | None = None
    served: str | None = None
    entry_id: int | None = None
    check: bool = False
    near: tuple[int, float] | None = None
    # a check left for the background refiner: the summary path's judge, run once the
    # caller's answer is in (FallbackRetriever.aremember)
    deferred: Callable[[], Awaitable[Decision]] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def context_tokens(self) -> int:
        return sum(estimate_tokens(h.text) for h in self.items)

    @property
    def citations(self) -> list[Citation]:
        """One :class:`Citation` per document the items came from, best first: what the
        answer cites (on a hit the summary version read; on a miss the source text)."""
        versions = {
            h.doc_id: h.metadata.get("cos_version") for h in self.items if h.kind == "summary"
        }
        seen: dict[str, Citation] = {}
        for h in self.items:
            if h.doc_id not in seen:
                seen[h.doc_id] = cite(h, self.hit, versions.get(h.doc_id))
        return list(seen.values())


# What every item a framework retriever returns carries about the query (flat: str, int,
# bool), beside its own metadata: documented in docs/frameworks.md.
RESULT_KEYS = (
    "cos_hit",
    "cos_check",
    "cos_summary_answer",
    "cos_answer",
    "cos_quote",
    "cos_served",
    "cos_checks",
    "cos_reason",
    "cos_job_id",
    "cos_entry",
)


def item_metadata(result: RetrievalResult, item: SearchHit, citation: str) -> dict[str, Any]:
    """An item's metadata as both frameworks return it: its own, its kind and citation,
    and the query's outcome (:data:`RESULT_KEYS`): on a hit the answer already checked
    (``cos_answer``: the judge's grounded answer, or a verified answer's, with
    ``cos_quote``, the words it was read from; ``cos_served``: ``"exact"`` or ``"similar"``
    when a verified answer served it with no model call, ``"repeat"`` when the answer the
    same chunks gave the same question did (not verified: no quote); ``cos_checks``:
    the checks it passed, comma-separated), so a chain answers a hit with no second model
    call; on a miss ``cos_hit=False``, why (``cos_reason``) and the refine job it queued
    (``cos_job_id``); a check (the router's: a miss whose summary answer is compared with
    the chunks' answer the caller gives, :meth:`FallbackRetriever.aremember`) adds
    ``cos_check`` and ``cos_summary_answer``. Keys with no value are left out.

    Examples:
        >>> chunk = SearchHit("lease.md::chunk::0", "lease.md", "Rent is due on the 1st.",
        ...                   0.86, {"doc_id": "lease.md"}, "chunk")
        >>> miss = RetrievalResult("When is rent due?", False, [chunk], "below", job_id=3)
        >>> meta = item_metadata(miss, chunk, "lease.md")
        >>> meta["cos_hit"], meta["cos_job_id"], "cos_answer" in meta
        (False, 3, False)
    """
    passed = ",".join(k for k, ok in result.checks.items() if ok)
    outcome = {
        "cos_hit": result.hit,
        "cos_check": result.check or None,
        # a check's summary answer, compared with the chunks' when the caller gives it
        "cos_summary_answer": result.judge_answer if result.check else None,
        "cos_answer": result.answer if result.hit else None,
        "cos_quote": result.quote if result.hit else None,
        "cos_served": result.served,
        "cos_checks": passed or None,
        "cos_reason": result.reason,
        "cos_job_id": result.job_id,
        "cos_entry": result.entry_id,
    }
    meta = {**item.metadata, "cos_kind": item.kind, "cos_citation": citation}
    meta.pop("_node_content", None)
    return meta | {k: v for k, v in outcome.items() if v is not None}


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


async def ask_grounded(
    llm: ChatModel, query: str, items: list[SearchHit], *, max_tokens: int = 256
) -> tuple[GroundedReply, Usage]:
    """One structured-output call: the model's answer to ``query`` from the texts of
    ``items`` and the verbatim quote it gives for it (``hit_rule.GROUNDED_SCHEMA``),
    unchecked; a reply that is not the schema's JSON comes back with ``error`` set (logged),
    never as an exception."""
    res = await llm.chat(
        grounded_messages(_content(items), query),
        max_tokens=max_tokens,
        json_schema=GROUNDED_SCHEMA,
    )
    reply = parse_grounded(res.text)
    if reply.error:
        log.info("judge reply to %r unreadable (%s): %r", query, reply.error, res.text[:200])
    return reply, res.usage


async def answer_from(
    llm: ChatModel, query: str, items: list[SearchHit], *, max_tokens: int = 128
) -> tuple[str | None, Usage]:
    """One call: answer ``query`` from the texts of ``items``; ``None`` when the model does
    not know or gives an answer that is not in those texts (see :func:`is_grounded`)."""
    answer, usage = await ask(llm, query, items, max_tokens=max_tokens)
    if not is_grounded(answer, _content(items)):
        if not said_nothing(answer):
            log.info("answer %r to %r is not in the retrieved text: not a hit", answer, query)
        return None, usage
    return answer, usage


def focus_items(
    query: str,
    items: list[SearchHit],
    *,
    embedder: Any,
    embedding: list[float] | None = None,
    limit: int = FOCUS_SENTENCES,
) -> list[SearchHit]:
    """``items`` cut to their sentence windows closest to ``query`` by ``embedder`` (the
    index's own; ``embedding``: the query's vector, when already made): windows of two
    sentences ranked by cosine similarity, the best while they fit ``limit`` sentences
    (:func:`~cos_integrations.serving.hit_rule.choose_windows`), each item's kept in their
    own order; an item with none kept is dropped. Any language: no word lists.

    Examples:
        >>> from cos_integrations.embedded.embeddings import HashingEmbedder
        >>> text = "The flat is small. It has two rooms. Rent is due on the 1st."
        >>> hit = SearchHit("s", "lease", text, 0.9, {}, "summary")
        >>> kept = focus_items("When is rent due?", [hit], embedder=HashingEmbedder(), limit=2)
        >>> kept[0].text
        'It has two rooms. Rent is due on the 1st.'
    """
    import numpy as np

    sentences = [split_sentences(h.text) for h in items]
    windows = sentence_windows(sentences)
    if not windows:
        return []
    vectors = np.asarray(
        embedder.embed_documents([" ".join(sentences[t][a:b]) for t, a, b in windows]),
        dtype=np.float32,
    )
    q = np.asarray(embedding if embedding is not None else embedder.embed_query(query))
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    scores = (vectors @ (q / max(float(np.linalg.norm(q)), 1e-12))).tolist()
    chosen = choose_windows(windows, scores, limit=limit)
    out = []
    for t, h in enumerate(items):
        kept = [s for i, s in enumerate(sentences[t]) if (t, i) in chosen]
        if kept:
            meta = {**h.metadata, "cos_focused": True}
            out.append(dataclasses.replace(h, text=" ".join(kept), metadata=meta))
    return out


@dataclass
class Decision:
    """One query's way through the hit rule: whether it hit, why, what the judge read and
    said, and the collection's top chunks when the routing check searched them (a miss
    reuses them).

    Examples:
        >>> decision = Decision(reason="best similarity 0.71 < 0.8")
        >>> decision.hit, decision.context, decision.top
        (False, [], None)
    """

    hit: bool = False
    reason: str = ""
    context: list[SearchHit] = field(default_factory=list)
    full: list[SearchHit] = field(default_factory=list)  # the context before a focused cut
    top: list[SearchHit] | None = None
    judge_answer: str | None = None
    quote: str | None = None
    judge_error: str | None = None
    checks: dict[str, bool] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    judge_tokens: int = 0


class FallbackRetriever:
    """Verified answers first, then summaries, full text on a miss, and a refine job for
    every miss.

    An exact repeat of a question already answered from the source, or a question close
    enough to one (``HitRule.answer_similarity``, :mod:`~cos_integrations.serving.answers`),
    is served that answer with no model call (``answers=False`` switches the layer off).
    An answer the caller then gives a miss from its chunks is kept the same way when the
    source bears it out (:meth:`aremember`; :meth:`aanswer` does both), as are a hit's
    answer found in the source and a refine job's.

    ``rule`` (a :class:`~cos_integrations.serving.hit_rule.HitRule`) decides a hit; ``None``: the
    index's (:attr:`CoSIndex.hit_rule`, the one it was calibrated with, else ``HitRule()``),
    its judge left out the model's when the retriever has ``llm`` (:meth:`HitRule.for_model`).
    ``refine_on_miss``: ``"queue"`` (enqueue; a ``cos refine`` worker processes), ``"off"``,
    or ``"background"`` (enqueue, and a
    :class:`~cos_integrations.serving.refine.BackgroundRefiner` owned by this retriever,
    started on the first miss, refines with ``llm``, ``refine_config`` (default: the index's config)
    and ``refine_teach`` while queries go on, taking the jobs whose question missed
    ``refine_min_asks`` times, and judging the summary side of the router's checks off the
    caller's latency once the caller's answer is in; :meth:`close` stops it). ``on_miss(result)``
    is called for every miss that queued a job. A call may pass its own ``llm=`` (e.g. one
    bound to a framework run's callbacks); the counters ``hits`` and ``misses`` stay on
    this retriever. ``k`` summaries are searched either way.
    ``route_check=False`` switches off the routing check of the model judge (the best
    summary's document must hold the collection's top source chunk): only to measure what
    the check does (BENCHMARKS.md, "The routing check").

    Examples:
        >>> rule = HitRule(judge="llm")
        >>> retriever = FallbackRetriever(index, llm=llm, rule=rule, k=2)  # doctest: +SKIP
        >>> retriever.retrieve("When is rent due?").hit                    # doctest: +SKIP
        True
    """

    def __init__(
        self,
        index: CoSIndex,
        *,
        llm: ChatModel | None = None,
        k: int = DEFAULT_K,
        rule: HitRule | None = None,
        fallback_k: int | None = None,
        refine_on_miss: RefineMode = "queue",
        on_miss: Callable[[RetrievalResult], None] | None = None,
        refine_config: CoSConfig | None = None,
        refine_teach: RefineTeach = DEFAULT_REFINE_TEACH,
        route_check: bool = True,
        answers: bool = True,
        refine_min_asks: int = DEFAULT_REFINE_MIN_ASKS,
        max_error: float | None = DEFAULT_MAX_ERROR,
    ) -> None:
        if refine_on_miss not in ("queue", "background", "off"):
            raise ValueError(
                f"refine_on_miss must be queue, background or off, not {refine_on_miss!r}"
            )
        if refine_on_miss == "background" and llm is None:
            raise ValueError('refine_on_miss="background" needs llm= to refine with')
        if refine_teach not in REFINE_TEACH:
            raise ValueError(f"refine_teach must be one of {REFINE_TEACH}, not {refine_teach!r}")
        self.index = index
        self.llm = llm
        self.k = k
        self.fallback_k = fallback_k
        self.refine_on_miss = refine_on_miss
        self.on_miss = on_miss
        self.refine_config = refine_config
        self.refine_teach = refine_teach
        self.refine_min_asks = refine_min_asks
        self.route_check = route_check
        self.hits = 0
        self.misses = 0
        self.served = 0  # asks answered by a verified answer (counted in hits too)
        self.answers = answers
        self.verified = VerifiedAnswers(index)
        self.router = Router(max_error) if max_error is not None else None
        self._background: BackgroundRefiner | None = None
        self._rule: HitRule | None = None
        self.rule = rule
        # results whose answer teaches the retriever (a check, a rewording near an entry),
        # by query, until the caller's answer comes back (aremember_items); bounded
        self._awaiting: OrderedDict[str, RetrievalResult] = OrderedDict()

    @property
    def rule(self) -> HitRule:
        """The hit rule in force: the one given, else the index's (read live), its judge
        resolved for this retriever (:meth:`HitRule.for_model`: the model judge when it
        has ``llm``)."""
        rule = self._rule if self._rule is not None else self.index.hit_rule
        return rule.for_model(self.llm is not None)

    @rule.setter
    def rule(self, rule: HitRule | None) -> None:
        if rule is not None and rule.judge == "llm" and self.llm is None:
            raise ValueError('judge="llm" needs llm=; pass a model or use judge="score"')
        self._rule = rule

    @property
    def threshold(self) -> float:
        """The similarity a query's best summary must reach before the judge is asked: the
        rule's, else the index's (:attr:`CoSIndex.threshold`: calibrated, or 0.80)."""
        rule = self.rule
        return rule.threshold if rule.threshold is not None else self.index.threshold

    def retrieve(
        self, query: str, *, k: int | None = None, llm: ChatModel | None = None
    ) -> RetrievalResult:
        """Sync wrapper of :meth:`aretrieve` (its store and vector reads run in place, not
        in worker threads: one call, one thing at a time)."""
        return run_sync(self.aretrieve(query, k=k, llm=llm), inline=True)

    async def aretrieve(
        self, query: str, *, k: int | None = None, llm: ChatModel | None = None
    ) -> RetrievalResult:
        """Decide hit or miss for ``query`` (``k`` summaries searched, default ``self.k``);
        ``llm`` overrides the retriever's model for this call's judge.

        A verified answer serves an exact repeat or a close rewording with no model call;
        else route (the summary search, and the chunk search when the rule checks routing),
        decide (threshold, routing, hit context, judge), then answer from the hit context
        or fall back to source chunks and queue a refine job."""
        k = self.k if k is None else k
        rule = self.rule
        model = llm or self.llm
        embedding, near, candidates = await offload(self._search, query, k, rule)
        near_entry = None
        if near is not None:
            entry, score, how = near
            if how == REPEAT:
                items = await self._repeated(query, k, entry, candidates, embedding)
                if items:
                    return await self._serve(query, entry, score, how, items=items)
            elif how == "exact" or self.verified.serves(entry, query, score, self._bar()):
                return await self._serve(query, entry, score, how)
            elif self.verified.same_numbers(entry, query):
                near_entry = (entry.id, score)
        result = await self._decide(query, k, rule, model, embedding, candidates)
        # a close verified question not close enough to serve: the answer this question
        # gets from the source tells whether the entry's bar must rise (aremember)
        result.near = near_entry
        if result.check or near_entry is not None:
            self._awaiting[query] = result
            self._awaiting.move_to_end(query)
            while len(self._awaiting) > AWAITING_LIMIT:
                self._awaiting.popitem(last=False)
        return result

    async def aremember_items(
        self, query: str, items: list[SearchHit], answer: str | None, *, hit: bool = False
    ) -> AnswerEntry | None:
        """:meth:`aremember` for a caller that kept only the query and the items it was
        given (a framework's documents or nodes): with the retrieval's own result when this
        retriever still holds it (a router's check, a rewording near a verified answer:
        what the answer teaches), else one made from ``items`` (``hit``: whether they were
        a hit).

        Examples:
            >>> res = await retriever.aretrieve("When is rent due?")      # doctest: +SKIP
            >>> await retriever.aremember_items(res.query, res.items, "the 1st")  # doctest: +SKIP
        """
        result = self._awaiting.pop(query, None)
        if result is None:  # what the items' metadata says of a check (item_metadata)
            meta = items[0].metadata if items else {}
            summary_answer = meta.get("cos_summary_answer")
            # a deferred check has no summary answer yet: nothing to compare here
            check = bool(meta.get("cos_check")) and summary_answer is not None
            result = RetrievalResult(
                query, hit, items, "", judge_answer=summary_answer, check=check
            )
        return await self.aremember(result, answer)

    async def aanswer_items(
        self, query: str, items: list[SearchHit], llm: ChatModel, *, hit: bool = False
    ) -> tuple[str | None, Usage]:
        """A miss answered from ``items`` (the source chunks this retriever returned) with
        the product's answer call (:func:`ask`, the one ``cos eval``'s rows make) through
        ``llm``, then kept as :meth:`aremember_items` keeps it: what a framework's query
        engine or chain asks on a miss, so its answer and its cost are the core's. No
        items, no call: ``(None, Usage())``.

        Examples:
            >>> res = await retriever.aretrieve("When is rent due?")      # doctest: +SKIP
            >>> await retriever.aanswer_items(res.query, res.items, model)  # doctest: +SKIP
            ('the 1st', Usage(calls=1, ...))
        """
        if not items:
            return None, Usage()
        answer, usage = await ask(llm, query, items)
        await self.aremember_items(query, items, answer, hit=hit)
        return answer, usage

    async def _decide(
        self,
        query: str,
        k: int,
        rule: HitRule,
        model: ChatModel | None,
        embedding: list[float],
        candidates: list[SearchHit],
    ) -> RetrievalResult:
        """The summary path and the chunks: route, decide, answer from the hit context or
        fall back to the source chunks."""
        if not candidates:
            return RetrievalResult(query, False, [], "empty index")
        decision = await self._route(query, candidates, embedding, k, rule)
        mode = await self._mode(query, decision, rule)
        if mode == "check" and self.refine_on_miss == "background":
            # off the caller's latency: the chunks now, no judge call; the summary path is
            # judged on the refiner's thread once the caller's answer is in (aremember)
            decision.reason = "a check: the chunks answer it, the summary's answer is compared"
            result = await self._miss(query, k, candidates, embedding, decision)
            later = Decision(top=decision.top, checks=dict(decision.checks))
            result.check = True
            # judged with the retriever's model: the caller's run is over by then
            result.deferred = functools.partial(
                self._judged, query, candidates, embedding, rule, k, later, self.llm or model
            )
            return result
        if not decision.reason:
            await self._judged(query, candidates, embedding, rule, k, decision, model)
        if decision.hit and mode != "check":
            return await self._hit(query, candidates, decision, rule, embedding)
        if decision.hit:
            decision.reason += "; a check: the chunks answer it, the summary's answer is compared"
        result = await self._miss(query, k, candidates, embedding, decision)
        # a check: the judge's hit is compared with the chunks' answer when the caller
        # gives it (aremember), and the chunks are what it gets
        result.check = mode == "check" and decision.hit
        return result

    async def _judged(
        self,
        query: str,
        candidates: list[SearchHit],
        embedding: list[float],
        rule: HitRule,
        k: int,
        decision: Decision,
        model: ChatModel | None,
    ) -> Decision:
        """The summary path's side of ``decision``: the hit context from the candidates
        past the threshold, and the judge's reply on it (the rule's checks decide)."""
        relevant = [c for c in candidates if c.score >= self.threshold]
        await self._build_context(query, decision, relevant, embedding, rule, k)
        if decision.context:
            await self._judge(query, decision, model, rule)
        return decision

    def _defer_check(self, result: RetrievalResult, answer: str | None) -> None:
        """Hand a deferred check to the background refiner: judge the summary path, and
        when it would have served, record its answer against the chunks' ``answer``."""
        judge, result.deferred = result.deferred, None
        if judge is None:
            return

        async def compare() -> None:
            decision = await judge()
            if decision.hit:
                result.judge_answer = decision.judge_answer
                await self._record_check(result, answer)

        self._background_refiner().submit(compare)

    async def _mode(self, query: str, decision: Decision, rule: HitRule) -> RouteMode:
        """The router's way for a question the summary path would take (past the threshold
        and the routing, the model judge): ``"summary"``, ``"chunks"`` (the decision
        becomes a miss: no judge call) or ``"check"``. Without a router, ``"summary"``."""
        if self.router is None or decision.reason or rule.judge != "llm":
            return "summary"
        checks, disagreements = await offload(self.index.store.check_counts)
        mode = self.router.mode(query, checks, disagreements)
        if mode == "chunks":
            bound = upper_bound(disagreements, checks)
            decision.reason = (
                f"the summaries' answers disagreed with the source's in {disagreements} of "
                f"{checks} checks (bound {bound:.0%} > {self.router.max_error:.0%}): the chunks"
            )
            decision.checks["router"] = False
        return mode

    def _search(
        self, query: str, k: int, rule: HitRule
    ) -> tuple[list[float], tuple[AnswerEntry, float, str] | None, list[SearchHit]]:
        """One worker-thread hop: a verified answer for an exact repeat (no embedding, no
        search), else the query's embedding, the verified answer nearest to it (from
        ``ANSWER_CHECK_SIMILARITY`` on, ``"similar"``; an exact repeat's unverified answer,
        ``"repeat"``) and its top-``k`` summaries."""
        exact = self.verified.exact(query) if self.answers else None
        if exact is not None and exact.origin != REPEAT:
            return [], (exact, 1.0, "exact"), []
        embedding = self.index.embedder.embed_query(query)
        near = None
        if exact is not None:  # a repeat: served only when the same chunks come back
            near = (exact, 1.0, REPEAT)
        elif self.answers and rule.answer_similarity is not None:
            found = self.verified.nearest(embedding, ANSWER_CHECK_SIMILARITY)
            near = (*found, "similar") if found is not None else None
        return embedding, near, self.index.search_summaries(query, k, embedding=embedding)

    async def _repeated(
        self,
        query: str,
        k: int,
        entry: AnswerEntry,
        candidates: list[SearchHit],
        embedding: list[float],
    ) -> list[SearchHit]:
        """The source chunks a miss of ``query`` would read now, when they are the ones
        ``entry`` (a repeat) was read from; else none (the question goes the usual way)."""
        doc_ids = list(dict.fromkeys(c.doc_id for c in candidates))
        items, _ = await self._fallback_items(query, self.fallback_k or k, doc_ids, embedding, None)
        read = await offload(self.verified.read_of, items)
        return items if items and read == entry.citation else []

    async def _serve(
        self,
        query: str,
        entry: AnswerEntry,
        score: float,
        how: str,
        *,
        items: list[SearchHit] | None = None,
    ) -> RetrievalResult:
        """An entry's answer, served: counted as a hit (and an ``answer`` event, or a
        ``repeat``), its source sentence as the one item (a repeat's: its chunks)."""
        store = self.index.store
        doc = await offload(store.get_document, entry.doc_id)
        item = entry_item(
            entry,
            score,
            how,
            source=(doc.source if doc else "") or entry.doc_id,
            title=(doc.title if doc else "") or entry.doc_id,
        )
        served = items or [item]
        for h in served:
            h.metadata["cos_hit"] = True
        self.hits += 1
        self.served += 1
        await offload(store.note_served, entry.id)
        # an event an ask: "answer" for a verified answer, "repeat" for a repeat's
        kind = REPEAT if how == REPEAT else "answer"
        await offload(store.record_event, kind, entry.doc_id, query)
        reason = {
            "exact": "a verified answer to the same question",
            REPEAT: "the answer the same chunks gave the same question (not verified)",
        }.get(how, f"a verified answer to a question {score:.3f} close")
        return RetrievalResult(
            query,
            True,
            served,
            reason,
            answer=entry.answer,
            quote=entry.quote or None,
            served=how,
            entry_id=entry.id,
        )

    def remember(self, result: RetrievalResult, answer: str | None) -> AnswerEntry | None:
        """Sync wrapper of :meth:`aremember`."""
        return run_sync(self.aremember(result, answer), inline=True)

    async def aremember(self, result: RetrievalResult, answer: str | None) -> AnswerEntry | None:
        """Keep ``answer``, which the caller gave ``result``'s miss from its items, as a
        verified answer when a sentence of those items holds it and that sentence is in
        its document's current source; the next ask of the question (or a close rewording)
        is then served it with no model call. ``None``: not kept (a hit, no answer, not in
        the items, or the layer is off)."""
        if result.check and result.deferred is not None:
            self._defer_check(result, answer)
        elif result.check:
            await self._record_check(result, answer)
        if result.near is not None and not result.hit and not said_nothing(answer):
            await self._learn_bar(result, answer)
        if not self.answers or result.hit or said_nothing(answer):
            return None
        found = best_source(answer, result.query, [(h.doc_id, h.text) for h in result.items])
        if found is None:  # not verified: kept for the question's exact repeats only
            await offload(self.verified.remember_repeat, result.query, answer, result.items)
            return None
        doc_id, sentence = found
        return await self._keep(result.query, answer, "miss", doc_id, sentence)

    async def _learn_bar(self, result: RetrievalResult, answer: str | None) -> None:
        """A question close to an entry, answered from the source: when its answer differs
        from the entry's, the entry asks something else at that similarity, and its bar
        rises above it (once)."""
        entry_id, score = result.near or (0, 0.0)
        result.near = None
        found = await offload(self.index.store.answers_by_id, [entry_id])
        entry = found.get(entry_id)
        if entry is None or answers_agree(answer or "", [entry.answer]):
            return
        log.info("%r asks something else than %r: its bar rises", result.query, entry.question)
        await offload(self.index.store.raise_bar, entry_id, min(score + NEIGHBOUR_MARGIN, 1.0))

    async def _record_check(self, result: RetrievalResult, answer: str | None) -> None:
        """A check's outcome: the judge's hit against the chunks' ``answer`` (once)."""
        result.check = False
        agree = answers_agree(result.judge_answer, [answer or ""])
        best = (result.candidates or result.items or [None])[0]
        await offload(
            self.index.store.record_check,
            best.doc_id if best else "",
            result.query,
            best.score if best and best.kind == "summary" else 0.0,
            result.judge_answer,
            answer,
            agree,
        )

    async def _keep(
        self,
        query: str,
        answer: str | None,
        origin: str,
        doc_id: str,
        text: str,
        *,
        quote: str | None = None,
        version: int | None = None,
        embedding: list[float] | None = None,
    ) -> AnswerEntry | None:
        """:meth:`VerifiedAnswers.remember` in a worker thread, at this rule's bar."""
        return await offload(
            self.verified.remember,
            query,
            answer,
            origin,
            doc_id=doc_id,
            text=text,
            quote=quote,
            version=version,
            bar=self._bar(),
            embedding=embedding,
        )

    def answer(self, query: str, *, k: int | None = None, llm: ChatModel | None = None):
        """Sync wrapper of :meth:`aanswer`."""
        return run_sync(self.aanswer(query, k=k, llm=llm), inline=True)

    async def aanswer(
        self, query: str, *, k: int | None = None, llm: ChatModel | None = None
    ) -> RetrievalResult:
        """:meth:`aretrieve`, and on a miss the model's answer from the chunks it returned
        (one call, the answer prompt of plain chunk RAG, :func:`ask`), kept as a verified
        answer when the source bears it out (:meth:`aremember`). The result's ``answer``
        is the answer either way; ``usage`` counts every call made.

        Examples:
            >>> result = await retriever.aanswer("When is rent due?")   # doctest: +SKIP
            >>> result.answer, result.hit, result.served                 # doctest: +SKIP
            ('the 1st', True, 'exact')
        """
        result = await self.aretrieve(query, k=k, llm=llm)
        model = llm or self.llm
        if result.answer is None and result.items and model is not None:
            answer, usage = await ask(model, query, result.items)
            result.usage.add(usage)
            result.answer = answer
            if not result.hit:
                await self.aremember(result, answer)
        return result

    def _bar(self) -> float:
        similarity = self.rule.answer_similarity
        return similarity if similarity is not None else 1.0

    async def _route(
        self,
        query: str,
        candidates: list[SearchHit],
        embedding: list[float],
        k: int,
        rule: HitRule,
    ) -> Decision:
        """The threshold and the routing check: a :class:`Decision` with a ``reason`` is
        already a miss."""
        best, threshold = candidates[0], self.threshold
        decision = Decision()
        if best.score < threshold:
            decision.reason = f"best similarity {best.score:.3f} < {threshold}"
            return decision
        if rule.routes and self.route_check:
            decision.top = await offload(
                self.index.search_chunks, query, self.fallback_k or k, embedding=embedding
            )
            if decision.top:  # no chunk vectors: nothing to agree with, the check does not apply
                decision.checks["routed"] = decision.top[0].doc_id == best.doc_id
                if not decision.checks["routed"]:
                    decision.reason = (
                        f"routing disagrees: the best summary is {best.doc_id}'s, the top "
                        f"source chunk {decision.top[0].doc_id}'s"
                    )
        return decision

    async def _build_context(
        self,
        query: str,
        decision: Decision,
        relevant: list[SearchHit],
        embedding: list[float],
        rule: HitRule,
        k: int,
    ) -> None:
        """What the judge reads and a hit returns (``rule.context``) from ``relevant``, the
        summaries it may use, best first; the collection's top chunks, when the routing
        check searched them, spare a second search (their first is then the best summary's
        document's best chunk). ``"best+chunk"`` is ``k`` passages, as a retriever's ``k``
        promises: the best summary and its document's ``k - 1`` best chunks (the
        collection's next ones when it has fewer); at ``k = 1`` its best chunk alone."""
        threshold = self.threshold
        best, top = relevant[0], decision.top
        wanted = max(k - 1, 1) if rule.context == "best+chunk" else 1
        if rule.context == "summaries":
            full = relevant
        elif rule.context == "best":
            full = [best]
        elif wanted == 1 and top and top[0].doc_id == best.doc_id:
            full = [best, top[0]]
        else:
            chunks = await offload(
                self._best_chunks,
                query,
                best.doc_id,
                embedding,
                best.metadata.get("cos_chunks"),
                wanted,
            )
            full = [best, *chunks]
        if rule.context == "best+chunk":
            full = full[:k] if k > 1 else full[1:2] or full[:1]
        decision.full = decision.context = full
        if rule.context == "focused":
            decision.context = await offload(
                focus_items,
                query,
                full,
                embedder=self.index.embedder,
                embedding=embedding,
                limit=rule.focus_sentences,
            )
            if not decision.context:
                decision.reason = "the best summary and its chunk hold no sentence"
        if decision.context and rule.judge == "score":
            decision.hit = True
            decision.reason = f"best similarity {best.score:.3f} >= {threshold}"

    async def _judge(
        self,
        query: str,
        decision: Decision,
        llm: ChatModel | None,
        rule: HitRule,
    ) -> None:
        """The model answers from the hit context; the rule's checks decide (judge "llm")."""
        if rule.judge != "llm":
            return
        if llm is None:
            raise ValueError('judge="llm" needs llm=; pass a model or use judge="score"')
        context = decision.context
        reply, decision.usage = await ask_grounded(llm, query, context)
        decision.judge_answer, decision.quote = reply.answer, reply.quote
        decision.judge_error = reply.error
        decision.judge_tokens = sum(estimate_tokens(h.text) for h in context)
        decision.checks |= await offload(self._checks, reply, query, context, rule)
        failed = rule.failed(decision.checks)
        decision.hit = not failed
        decision.reason = (
            "summaries answer the query"
            if decision.hit
            else f"summaries do not answer it ({', '.join(failed)} failed)"
            if not reply.error
            else f"the judge's reply was unreadable ({reply.error})"
        )

    async def _hit(
        self,
        query: str,
        candidates: list[SearchHit],
        decision: Decision,
        rule: HitRule,
        embedding: list[float],
    ) -> RetrievalResult:
        """Count and record a hit; ``"summaries"`` returns the top-k summaries, best first
        (the hit was decided on those that clear the threshold), otherwise what the answer
        came from. A judge's answer that the document's source holds is kept as a verified
        answer."""
        self.hits += 1
        best = candidates[0]
        items = [*candidates] if rule.context == "summaries" else decision.context
        for h in items:
            h.metadata["cos_hit"] = True
        await offload(
            self.index.store.record_event,
            "hit",
            best.doc_id,
            query,
            context_tokens=sum(estimate_tokens(h.text) for h in items),
        )
        if self.answers and decision.checks.get("in_source"):
            doc = await offload(self.index.store.get_document, best.doc_id)
            if doc is not None:
                version = best.metadata.get("cos_version")
                await self._keep(
                    query,
                    decision.judge_answer,
                    "hit",
                    best.doc_id,
                    doc.text,
                    quote=decision.quote,
                    version=version,
                    embedding=embedding,
                )
        return RetrievalResult(
            query,
            True,
            items,
            decision.reason,
            candidates,
            decision.judge_answer if rule.judge == "llm" else None,
            usage=decision.usage,
            judge_answer=decision.judge_answer,
            judge_context_tokens=decision.judge_tokens,
            checks=decision.checks,
            quote=decision.quote,
        )

    def _best_chunks(
        self,
        query: str,
        doc_id: str,
        embedding: list[float],
        count: int | None = None,
        n: int = 1,
    ) -> list[SearchHit]:
        """The ``n`` source chunks of ``doc_id`` closest to the query (chunk vectors, read by
        id when ``count`` says how many, or the stored text chunked now when the index has
        none); past one, topped up with the collection's closest chunks when the document
        has fewer; empty when the document has no text."""
        counts = {doc_id: int(count)} if isinstance(count, int) and count > 0 else None
        chunks = self.index.search_chunks(
            query, n, doc_ids=[doc_id], embedding=embedding, chunk_counts=counts
        )
        if not chunks:
            chunks = self.index.rank_stored_text(query, n, doc_ids=[doc_id], embedding=embedding)
        if n > 1 and len(chunks) < n:
            seen = {h.id for h in chunks}
            more = self.index.search_chunks(query, n + len(chunks), embedding=embedding)
            chunks += [h for h in more if h.id not in seen]
        return chunks[:n]

    def _checks(
        self, reply: GroundedReply, query: str, context: list[SearchHit], rule: HitRule
    ) -> dict[str, bool]:
        """The rule's checks on the judge's reply (:meth:`HitRule.check`), with the full
        text of the context's documents from the store (``in_source``, reported only)."""
        sources = []
        for doc_id in dict.fromkeys(h.doc_id for h in context):
            doc = self.index.store.get_document(doc_id)
            if doc is not None:
                sources.append(doc.text)
        return rule.check(reply, query, _content(context), sources="\n".join(sources))

    async def _miss(
        self,
        query: str,
        k: int,
        candidates: list[SearchHit],
        embedding: list[float],
        decision: Decision,
    ) -> RetrievalResult:
        """Fall back to source chunks (or the candidates' stored text), queue a refine job
        for the document they came from, and record the miss."""
        reason, usage, top = decision.reason, decision.usage, decision.top
        judged = {
            "judge_answer": decision.judge_answer,
            "judge_context_tokens": decision.judge_tokens,
            "checks": decision.checks,
            "quote": decision.quote,
            "judge_error": decision.judge_error,
        }
        doc_ids = list(dict.fromkeys(c.doc_id for c in candidates))
        fk = self.fallback_k or k
        items, fallback = await self._fallback_items(query, fk, doc_ids, embedding, top)
        if fallback == "stored text":
            reason += "; no chunk vectors: ranked the candidates' stored text"
        target = items[0].doc_id if items else candidates[0].doc_id
        # Refinement already found every candidate's source silent on this query: the
        # chunks are still read (an answer is never worse for it), no job is queued again
        silent = await self._all_silent(doc_ids, query)
        if silent:
            reason += "; known not to be in the candidates' sources"
        job_id = await self._queue_miss(target, query, items, silent=silent)
        result = RetrievalResult(
            query,
            False,
            items,
            reason,
            candidates,
            job_id=job_id,
            usage=usage,
            fallback=fallback,
            not_in_source=silent,
            **judged,
        )
        log.info("cache miss for %r (%s); refine job %s on %s", query, reason, job_id, target)
        if job_id is not None:
            if self.refine_on_miss == "background":
                self._background_refiner().notify()
            if self.on_miss:
                self.on_miss(result)
        return result

    async def _all_silent(self, doc_ids: list[str], query: str) -> bool:
        """Whether every candidate document's source is known not to answer ``query``."""
        store = self.index.store
        silent = [await offload(store.not_in_source, d, query) for d in doc_ids]
        return bool(doc_ids) and all(silent)

    async def _fallback_items(
        self,
        query: str,
        fk: int,
        doc_ids: list[str],
        embedding: list[float],
        top: list[SearchHit] | None,
    ) -> tuple[list[SearchHit], str]:
        """The source chunks a miss answers from, and where they came from (``"chunks"``,
        or ``"stored text"`` when the index holds no chunk vectors)."""
        index = self.index
        # Candidate documents first, then the whole collection; the best chunks win, so a
        # source whose summary was not even retrieved can still answer.
        scoped = await offload(index.search_chunks, query, fk, doc_ids=doc_ids, embedding=embedding)
        glob = top
        if glob is None:
            glob = await offload(index.search_chunks, query, fk, embedding=embedding)
        merged = {h.id: h for h in [*glob, *scoped]}
        items = sorted(merged.values(), key=lambda h: -h.score)[:fk]
        fallback = "chunks"
        if not items:
            # No chunk vectors (e.g. a pipeline that indexed only summaries): the stored
            # full text of the candidate documents, chunked and ranked now.
            items = await offload(
                index.rank_stored_text, query, fk, doc_ids=doc_ids, embedding=embedding
            )
            fallback = "stored text"
        for h in items:
            h.metadata["cos_hit"] = False
        return items, fallback

    async def _queue_miss(
        self, target: str, query: str, items: list[SearchHit], *, silent: bool = False
    ) -> int | None:
        """Count and record the miss on ``target`` (one event an ask: ``not_in_source`` when
        refinement found the sources silent on it, else ``miss``); queue its refine job (its
        id, or ``None`` when refinement is off or the query is known not to be in the
        sources)."""
        self.misses += 1
        store = self.index.store
        job_id = None
        if self.refine_on_miss != "off" and not silent:
            job_id = await offload(store.enqueue, target, query)
        tokens = sum(estimate_tokens(h.text) for h in items)
        kind = "not_in_source" if silent else "miss"
        await offload(store.record_event, kind, target, query, context_tokens=tokens)
        return job_id

    def _background_refiner(self) -> BackgroundRefiner:
        if self._background is None:
            from cos_integrations.serving.refine import BackgroundRefiner, Refiner
            from cos_integrations.summarize.engine import ChainOfSummaries

            if self.llm is None:  # __init__ checks it; a caller may have cleared it since
                raise ValueError('refine_on_miss="background" needs llm= to refine with')
            engine = ChainOfSummaries(self.llm, self.refine_config or self.index.config)
            refiner = Refiner(
                self.index, engine, teach=self.refine_teach, min_asks=self.refine_min_asks
            )
            self._background = BackgroundRefiner(refiner)
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
