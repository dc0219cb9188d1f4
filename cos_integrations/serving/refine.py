"""Miss-triggered refinement: a query the summary could not answer teaches the summary.

One round for a job ``(doc_id, query)`` (two to seven model calls):

1. answer the query from the full source with a verbatim quote (one structured-output call,
   ``hit_rule.GROUNDED_SCHEMA``, as the hit judge). If the model says the source does not
   answer it, close the job as ``not_in_source`` and remember it (a later miss of the query
   still reads the source chunks, but queues no job again), and with ``retarget`` > 1 queue
   the query for the next document of the collection's chunk ranking for it that is not
   known silent and has not taken it (the fallback's next document), up to ``retarget``
   documents. A reply whose quote is not in the source, or whose answer is not in its quote,
   is ``rejected`` (unsupported), not recorded as silence;
2. keep the answer as a verified answer (:mod:`~cos_integrations.serving.answers`: the
   query's next ask, or a close rewording, is served it with no model call) and add the
   pair to the document's question bank (origin ``miss``, refinement split);
3. evaluate the current summary on the bank, then teach it the query (``teach``):
   ``"extract"`` appends the source's own sentences that the quote covers
   (:func:`~cos_integrations.serving.hit_rule.quoted_sentences`; no model-written text),
   ``"rewrite"`` asks the model to rewrite the summary from the source to cover the query
   (and other unanswered refinement questions, up to ``iq``) and, if that still misses, for
   one sentence stating the answer; ``"both"`` tries the first, then the second. Each
   candidate is evaluated on the bank; when nothing taught it (but the summary did not
   already hold the quoted sentences), the job is ``rejected`` and the query goes on to the
   next document as in step 1 (the source's answer was likely a sibling passage's fact);
4. publish only if the query is now answered and validation did not drop by more than
   ``epsilon``: a compare-and-swap on the version in SQLite, then delete-and-add of the
   summary vector in Chroma. A crash between the two is repaired by the next ingest or
   worker run (``CoSIndex.repair``), because the store is the truth.

Examples:
    >>> refiner = Refiner(index, ChainOfSummaries(llm))       # doctest: +SKIP
    >>> outcomes = refiner.run_once()                         # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from cos_integrations.defaults import (
    DEFAULT_DEEPEN_STRATEGY,
    DEFAULT_REFINE_MIN_ASKS,
    DEFAULT_REFINE_RETARGET,
    DEFAULT_REFINE_TEACH,
    REFINE_TEACH,
    DeepenStrategy,
    RefineTeach,
)
from cos_integrations.errors import CoSError
from cos_integrations.metrics import normalize_answer
from cos_integrations.serving.answers import VerifiedAnswers
from cos_integrations.serving.hit_rule import (
    GROUNDED_SCHEMA,
    GroundedReply,
    grounding_checks,
    is_grounded,
    parse_grounded,
    quoted_sentences,
)
from cos_integrations.serving.index import CoSIndex
from cos_integrations.storage.refine_queue import (
    ALREADY_HELD,
    STILL_MISSES,
    UNSUPPORTED,
    RefineJob,
)
from cos_integrations.summarize.engine import ChainOfSummaries, Evaluation, ModelRun
from cos_integrations.summarize.guard import summary_flags
from cos_integrations.summarize.prompts import fact_messages, source_grounded_messages
from cos_integrations.summarize.questions import ParseError, QAPair, parse_summary
from cos_integrations.sync import run_sync
from cos_integrations.text import complete_sentences
from cos_integrations.usage import Usage

__all__ = ["Refiner", "RefineOutcome", "BackgroundRefiner"]

log = logging.getLogger(__name__)


@dataclass
class RefineOutcome:
    """What happened to one job (``status``: published, suggested, rejected,
    not_in_source, conflict, failed or dead; ``reason`` says why).

    Examples:
        >>> done = RefineOutcome(7, "lease.md", "When is rent due?", "published",
        ...                      answer="the 1st", version=2)
        >>> done.status, done.usage.calls
        ('published', 0)
    """

    job_id: int
    doc_id: str
    query: str
    status: str  # published | suggested | rejected | not_in_source | conflict | failed | dead
    reason: str = ""
    answer: str | None = None
    version: int | None = None
    usage: Usage = field(default_factory=Usage)


class Refiner:
    """Leases refine jobs from the store and runs one refinement round for each.

    Safe to run in several processes at once: jobs are leased in SQLite, versions are
    published by compare-and-swap, and a crashed worker's lease expires for another.
    ``teach``: how a round teaches the summary a missed query: ``"extract"`` appends the
    source's own sentence that answers it (no model-written text), ``"rewrite"`` asks the
    model for a rewrite (then for one sentence stating the answer), ``"both"`` tries the
    first, then the second; see the module docstring. ``retarget``: in how many documents
    of the collection's chunk ranking for a query its answer is looked for, the job's first
    (1: the job's only). ``min_asks``: take only jobs whose question missed at least that
    often (2: refine where a question came back without a verified answer; 1: on its first
    miss).

    Examples:
        >>> refiner = Refiner(index, ChainOfSummaries(llm), teach="extract")  # doctest: +SKIP
        >>> [o.status for o in refiner.run_once()]                         # doctest: +SKIP
        ['published']
    """

    def __init__(
        self,
        index: CoSIndex,
        engine: ChainOfSummaries,
        *,
        epsilon: float = 0.05,
        lease_seconds: float = 900.0,
        max_attempts: int = 3,
        worker_id: str | None = None,
        teach: RefineTeach = DEFAULT_REFINE_TEACH,
        retarget: int = DEFAULT_REFINE_RETARGET,
        min_asks: int = DEFAULT_REFINE_MIN_ASKS,
    ) -> None:
        if min_asks < 1:
            raise ValueError(f"min_asks must be at least 1, not {min_asks}")
        if teach not in REFINE_TEACH:
            raise ValueError(f"teach must be one of {REFINE_TEACH}, not {teach!r}")
        if retarget < 1:
            raise ValueError(f"retarget must be at least 1 (the job's document), not {retarget}")
        self.index = index
        self.teach = teach
        self.retarget = retarget
        self.min_asks = min_asks
        self.engine = engine
        self.epsilon = epsilon
        self.lease_seconds = lease_seconds
        self.max_attempts = max_attempts
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"

    def run_once(self, max_jobs: int | None = None) -> list[RefineOutcome]:
        """Sync wrapper of :meth:`arun_once`."""
        return run_sync(self.arun_once(max_jobs))

    async def arun_once(self, max_jobs: int | None = None) -> list[RefineOutcome]:
        """Process jobs until the queue is empty (or ``max_jobs`` were taken)."""
        await asyncio.to_thread(self.index.repair)
        outcomes: list[RefineOutcome] = []
        while max_jobs is None or len(outcomes) < max_jobs:
            job = await asyncio.to_thread(
                self.index.store.lease,
                self.worker_id,
                lease_seconds=self.lease_seconds,
                min_asks=self.min_asks,
            )
            if job is None:
                break
            outcomes.append(await self.arefine(job))
        return outcomes

    def deepen_candidates(self, limit: int | None = None) -> list[str]:
        """Documents that got traffic and whose summary no Chain of Summaries round has
        tested yet (no synthetic question bank: a zero-shot summary), the most misses
        first, then the most hits; what :meth:`adeepen` works on in the tiered mode."""
        rows = self.index.store.query(
            "SELECT e.doc_id, SUM(CASE WHEN e.kind='miss' THEN 1 ELSE 0 END),"
            " SUM(CASE WHEN e.kind='hit' THEN 1 ELSE 0 END) FROM events e"
            " WHERE e.doc_id IS NOT NULL AND e.kind IN ('hit', 'miss') AND NOT EXISTS"
            " (SELECT 1 FROM questions q WHERE q.doc_id=e.doc_id AND q.origin='synthetic')"
            " GROUP BY e.doc_id ORDER BY 2 DESC, 3 DESC, e.doc_id"
        )
        ids = [r[0] for r in rows]
        return ids[:limit] if limit is not None else ids

    def deepen(
        self, limit: int | None = None, *, strategy: DeepenStrategy = DEFAULT_DEEPEN_STRATEGY
    ) -> list[RefineOutcome]:
        """Sync wrapper of :meth:`adeepen_traffic`."""
        return run_sync(self.adeepen_traffic(limit, strategy=strategy))

    async def adeepen_traffic(
        self, limit: int | None = None, *, strategy: DeepenStrategy = DEFAULT_DEEPEN_STRATEGY
    ) -> list[RefineOutcome]:
        """:meth:`adeepen` the :meth:`deepen_candidates`, one after the other."""
        candidates = await asyncio.to_thread(self.deepen_candidates, limit)
        return [await self.adeepen(doc_id, strategy=strategy) for doc_id in candidates]

    async def adeepen(
        self, doc_id: str, *, strategy: DeepenStrategy = DEFAULT_DEEPEN_STRATEGY
    ) -> RefineOutcome:
        """Chain of Summaries rounds on a document's current summary
        (:meth:`ChainOfSummaries.adeepen`, the queries it missed joining the bank); the
        best round is published (compare-and-swap) when it beat the current summary on
        validation. The bank is stored either way, so the document is deepened once and
        later refinements validate against it. Never raises for model or parse errors.
        Job id 0: a deepening is not a queued job."""
        store = self.index.store
        doc = store.get_document(doc_id)
        current = store.current_summary(doc_id)
        if doc is None or current is None:
            return RefineOutcome(0, doc_id, "", "rejected", "no document or no summary")
        missed = [q for q in store.questions(doc_id) if q.origin == "miss"]
        try:
            result = await self.engine.adeepen(
                doc.text,
                current.text,
                questions=missed,
                doc_id=doc_id,
                strategy=strategy,
            )
        except (CoSError, ParseError, OSError, ValueError) as exc:
            log.warning("deepening %s failed: %s", doc_id, exc)
            return RefineOutcome(0, doc_id, "", "failed", str(exc))
        for q in result.questions:
            if q.origin != "miss":
                store.add_question(doc_id, q)
        if result.best_iteration == 0 or not result.summary:
            return RefineOutcome(
                0,
                doc_id,
                "",
                "rejected",
                f"no round beat the current summary ({result.stop_reason})",
                usage=result.usage,
            )
        best = result.best
        version = store.publish_version(
            doc_id,
            result.summary,
            expected_version=current.version,
            created_by=strategy,
            reason=f"deepen: round {result.best_iteration} of {len(result.iterations) - 1}",
            val_score=best.val_score if best else None,
            train_score=best.train_score if best else None,
            summary_tokens=result.summary_tokens,
            flags=summary_flags(result.summary, doc.text),
            config_hash=self.engine.config.config_hash(),
        )
        if version is None:
            return RefineOutcome(
                0, doc_id, "", "conflict", "another version was published first", usage=result.usage
            )
        pinned = store.get_document(doc_id).pinned  # type: ignore[union-attr]
        if not pinned:
            await asyncio.to_thread(self.index.sync_document, doc_id)
        status = "suggested" if pinned else "published"
        return RefineOutcome(
            0, doc_id, "", status, f"version {version}", version=version, usage=result.usage
        )

    async def arefine(self, job: RefineJob) -> RefineOutcome:
        """One refinement round for a leased job; never raises for model or parse errors."""
        store = self.index.store
        try:
            outcome = await self._round(job)
        except (CoSError, ParseError, OSError) as exc:
            status = store.fail_job(
                job.id, self.worker_id, str(exc), max_attempts=self.max_attempts
            )
            log.warning("refine job %s (%s) failed: %s", job.id, job.doc_id, exc)
            return RefineOutcome(
                job.id, job.doc_id, job.query, "dead" if status == "dead" else "failed", str(exc)
            )
        if outcome.status == "conflict":
            store.requeue_job(job.id, self.worker_id, "version changed during refinement")
        else:
            store.finish_job(
                job.id, self.worker_id, outcome.status, outcome.reason, version=outcome.version
            )
        return outcome

    async def _round(self, job: RefineJob) -> RefineOutcome:
        """One refine job: does the source answer the query; if so the query joins the
        bank, the summary is taught (:attr:`teach`), and the result is published unless
        validation dropped (compare-and-swap, then the vector)."""
        store = self.index.store

        def outcome(status: str, reason: str, *rest: Any, usage: Usage | None = None):
            return RefineOutcome(
                job.id, job.doc_id, job.query, status, reason, *rest, usage=usage or Usage()
            )

        doc = store.get_document(job.doc_id)
        if doc is None:
            return outcome("rejected", "document deleted")
        current = store.current_summary(job.doc_id)
        if current is None:
            return outcome("rejected", "no summary yet")
        run = ModelRun(self.engine.llm, self.engine.config, job.doc_id)
        source = self._source_for(doc.text, job)
        reply = await self._read(source, job.query, run)
        if reply.error or not reply.answered:
            if reply.error:  # the model did not say the source is silent: nothing recorded
                return outcome("rejected", f"unreadable reply: {reply.error}", usage=run.usage)
            why = "the source does not answer the query"
            why += await asyncio.to_thread(self._send_on, job)
            return outcome("not_in_source", why, usage=run.usage)
        failed = [k for k, ok in grounding_checks(reply, job.query, source).items() if not ok]
        if failed:  # an answer the source does not bear out: not taught, not "silent"
            why = f"{UNSUPPORTED} ({', '.join(failed)} failed)"
            return outcome("rejected", why, reply.answer, usage=run.usage)
        answer, quote = reply.answer or "", reply.quote or ""
        await asyncio.to_thread(self._keep_answer, job, answer, quote, source)
        pair = QAPair(question=job.query, answers=[answer], split="train", origin="miss")
        store.add_question(job.doc_id, pair)
        # the missed question first: small models answering many questions in one call
        # drift into "I don't know" by the end of the list
        bank = [pair, *[q for q in store.questions(job.doc_id) if q.key != pair.key]]
        before = await self.engine.evaluate(current.text, bank, run)
        if not before.parsed:
            raise ParseError("unparseable answers for the current summary")
        taught = await self._teach(job, pair, quote, current.text, source, bank, before, run)
        if isinstance(taught, str):  # nothing taught it: why
            if taught != ALREADY_HELD:  # the source's answer taught nothing: the next document
                taught += await asyncio.to_thread(self._send_on, job)
            return outcome("rejected", taught, answer, usage=run.usage)
        new_text, after = taught
        drop = (before.val or 0.0) - (after.val or 0.0)
        if drop > self.epsilon:
            why = f"validation dropped by {drop:.3f} > {self.epsilon}"
            return outcome("rejected", why, answer, usage=run.usage)
        version = self._publish(job, current.version, doc.text, new_text, after)
        if version is None:
            why = "another version was published first"
            return outcome("conflict", why, answer, usage=run.usage)
        pinned = store.get_document(job.doc_id).pinned  # type: ignore[union-attr]
        if not pinned:
            await asyncio.to_thread(self.index.sync_document, job.doc_id)
        status = "suggested" if pinned else "published"
        return outcome(status, f"version {version}", answer, version, usage=run.usage)

    def _keep_answer(self, job: RefineJob, answer: str, quote: str, source: str) -> None:
        """The source's grounded answer, kept as a verified answer: the next ask of the
        query (or a close rewording) is served it with no model call."""
        similarity = self.index.hit_rule.answer_similarity
        VerifiedAnswers(self.index).remember(
            job.query,
            answer,
            "refine",
            doc_id=job.doc_id,
            text=source,
            quote=quote,
            bar=similarity if similarity is not None else 1.0,
        )

    async def _read(self, source: str, query: str, run: ModelRun) -> GroundedReply:
        """One model reading of ``source`` for ``query``: its answer and verbatim quote
        (unchecked; ``error`` set when the reply was not the schema's JSON)."""
        raw = await run.call(
            source_grounded_messages(source, query),
            json_schema=GROUNDED_SCHEMA,
            max_tokens=256,
            task="source_answer",
        )
        return parse_grounded(raw)

    async def _teach(
        self,
        job: RefineJob,
        pair: QAPair,
        quote: str,
        summary: str,
        source: str,
        bank: list[QAPair],
        before: Evaluation,
        run: ModelRun,
    ) -> tuple[str, Evaluation] | str:
        """The taught summary and its evaluation (:attr:`teach`: the source's own sentences
        the quote covers, a rewrite, or the sentences then the rewrite); when nothing taught
        it, why (the last way tried)."""
        taught: tuple[str, Evaluation] | str = "nothing tried"
        if self.teach in ("extract", "both"):
            taught = await self._extracted(summary, source, job.query, quote, bank, run)
        if isinstance(taught, str) and self.teach in ("rewrite", "both"):
            answer = pair.answers[0]
            rewritten = await self._rewritten(job, pair, answer, summary, source, bank, before, run)
            taught = rewritten or "the rewrite still does not answer the query"
        return taught

    def _publish(
        self, job: RefineJob, expected: int, source: str, text: str, after: Evaluation
    ) -> int | None:
        """Compare-and-swap the taught summary in as the next version (``None``: another
        version was published first)."""
        engine, cfg = self.engine, self.engine.config
        return self.index.store.publish_version(
            job.doc_id,
            text,
            expected_version=expected,
            created_by="refine",
            reason=f"miss: {job.query}",
            val_score=after.val,
            train_score=after.train,
            summary_tokens=engine.count_tokens(text),
            flags=summary_flags(text, source),
            config_hash=cfg.config_hash(),
        )

    async def _rewritten(
        self,
        job: RefineJob,
        pair: QAPair,
        answer: str,
        summary: str,
        source: str,
        bank: list[QAPair],
        before: Evaluation,
        run: ModelRun,
    ) -> tuple[str, Evaluation] | None:
        """The model's rewrite covering the query (and up to ``iq - 1`` other unanswered
        refinement questions), or else one sentence it writes stating the answer, appended;
        with its evaluation on ``bank``, when it answers the query; ``None`` otherwise."""
        engine, cfg = self.engine, self.engine.config
        others = [
            q
            for q in bank
            if q.split == "train" and q.key != pair.key and not before.answered(q.question)
        ][: max(0, cfg.questions_per_iteration - 1)]
        asked = [pair, *others]
        draft = cfg.strategy == "cos-draft"
        msgs = engine.rewrite_prompt(source, summary, [q.question for q in asked], draft=draft)
        new_text, _ = await engine.rewrite(msgs, summary, run, draft=draft)
        if new_text:
            after = await engine.evaluate(new_text, bank, run)
            if not after.parsed:
                raise ParseError("unparseable answers for the rewritten summary")
            got = next((sc.answer for sc in after.scores if sc.question == job.query), None)
            log.info(
                "refine %s: rewrite %r answers %r with %r (expected %r)",
                job.doc_id,
                new_text,
                job.query,
                got,
                answer,
            )
            if after.answered(job.query):
                return new_text, after
        # Small models often re-copy the document and run out of room before the new
        # fact. Fall back to one sentence stating the answer, appended to the summary.
        raw = await run.call(fact_messages(source, job.query, answer), max_tokens=80, task="fact")
        fact = complete_sentences(parse_summary(raw).split("\n")[0])
        if fact and is_grounded(fact, source):
            candidate = f"{summary.rstrip()} {fact}"
            ev = await engine.evaluate(candidate, bank, run)
            if ev.parsed and ev.answered(job.query):
                log.info("refine %s: appended %r", job.doc_id, fact)
                return candidate, ev
        return None

    async def _extracted(
        self,
        summary: str,
        source: str,
        query: str,
        quote: str,
        bank: list[QAPair],
        run: ModelRun,
    ) -> tuple[str, Evaluation] | str:
        """The summary with the source's sentences that the quote covers appended
        (:func:`~cos_integrations.serving.hit_rule.quoted_sentences`), and its evaluation on
        ``bank``, when that summary answers the query; otherwise why not: the quote covers
        no whole sentence of the source (:data:`UNSUPPORTED`), the summary already holds
        them (:data:`ALREADY_HELD`), or the summary with them still misses
        (:data:`STILL_MISSES`)."""
        sentences = quoted_sentences(quote, source)
        if not sentences:
            return UNSUPPORTED
        held = normalize_answer(summary)
        new = [s.strip() for s in sentences if normalize_answer(s) not in held]
        if not new:
            return ALREADY_HELD
        candidate = " ".join([summary.rstrip(), *new])
        ev = await self.engine.evaluate(candidate, bank, run)
        if not ev.parsed:
            raise ParseError("unparseable answers for the summary with the source's sentences")
        if not ev.answered(query):
            return STILL_MISSES
        log.info("refine: appended the source's sentences %r", new)
        return candidate, ev

    def _send_on(self, job: RefineJob) -> str:
        """:meth:`_retarget`, said as the tail of the job's reason ("" when not queued)."""
        queued = self._retarget(job)
        if queued is None:
            return ""
        return f"; queued for {queued[0]} (job {queued[1]}), next in the chunk ranking"

    def _retarget(self, job: RefineJob) -> tuple[str, int] | None:
        """A job whose document's source is silent, or whose answer taught nothing: queue
        its query for the next document of the collection's chunk ranking for it (among the
        first :attr:`retarget`) that is not known silent on it and did not take it already;
        that document and the job id, or ``None`` (retarget 1, no such document, or another
        document's summary was already taught the query)."""
        store = self.index.store
        if self.retarget <= 1:
            return None
        taken = store.outcomes(job.query)
        if any(status in ("published", "suggested") for status in taken.values()):
            return None
        hits = self.index.search_chunks(job.query, 4 * self.retarget)
        for doc_id in list(dict.fromkeys(h.doc_id for h in hits))[: self.retarget]:
            if doc_id == job.doc_id or store.not_in_source(doc_id, job.query):
                continue
            if taken.get(doc_id, "pending") not in ("pending", "leased"):
                continue  # taken before, and done with
            job_id = store.enqueue(doc_id, job.query)
            if job_id is not None:
                return doc_id, job_id
        return None

    def _source_for(self, text: str, job: RefineJob) -> str:
        """The full source, or its best chunks when it does not fit the context."""
        budget = self.engine.source_budget
        if self.engine.count_tokens(text) <= budget:
            return text
        hits = self.index.search_chunks(job.query, 12, doc_ids=[job.doc_id])
        parts, used = [], 0
        for h in hits:
            t = self.engine.count_tokens(h.text)
            if used + t > budget:
                break
            parts.append(h.text)
            used += t
        return "\n\n".join(parts)


class BackgroundRefiner:
    """Runs a :class:`Refiner` in a background thread while the application serves.

    ``notify()`` wakes it (the retrievers call it on a miss); ``submit(work)`` hands it
    other work off the caller's latency (a router's check: the summary path judged once
    the caller's answer is in), run before the next refine job; ``close()`` finishes the
    work in hand and stops. Jobs it does not reach stay queued in the store; submitted work
    it does not reach is dropped (a check not made).

    Examples:
        >>> bg = BackgroundRefiner(Refiner(index, engine))   # doctest: +SKIP
        >>> retriever = FallbackRetriever(index, on_miss=lambda r: bg.notify())  # doctest: +SKIP
        >>> bg.close()                                       # doctest: +SKIP
    """

    def __init__(self, refiner: Refiner, *, idle_poll: float = 5.0) -> None:
        self.refiner = refiner
        self.idle_poll = idle_poll
        self.outcomes: list[RefineOutcome] = []
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._work: deque[Callable[[], Awaitable[Any]]] = deque()
        self._thread = threading.Thread(target=self._loop, name="cos-refiner", daemon=True)
        self._thread.start()

    def notify(self, *_: object) -> None:
        self._idle.clear()
        self._wake.set()

    def submit(self, work: Callable[[], Awaitable[Any]]) -> None:
        """Run ``work()`` (a coroutine function) on this thread, before the next refine
        job; an error it raises is logged, never the caller's."""
        self._work.append(work)
        self.notify()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.idle_poll)
            self._wake.clear()
            while not self._stop.is_set():
                if self._work:
                    work = self._work.popleft()
                    try:
                        run_sync(work())
                    except Exception:
                        log.exception("background work failed")
                    continue
                outcomes = run_sync(self.refiner.arun_once(max_jobs=1))
                if not outcomes:
                    break
                self.outcomes.extend(outcomes)
            if not self._work:  # work submitted as the queue emptied: not idle yet
                self._idle.set()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until the queue was found empty after the last ``notify()``."""
        return self._idle.wait(timeout)

    def close(self, timeout: float | None = 60.0) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)

    def __enter__(self) -> BackgroundRefiner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
