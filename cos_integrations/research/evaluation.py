"""Evaluation: CoS against its baselines on real human-written QA data.

Refinement and validation use synthetic questions only (as in the paper); the dataset's
human questions are the held-out test set. Every method's summary is tested by answering
the held-out questions from it alone, with the same model, all in one call per document;
``content`` answers from the full document. ``fallback`` answers each held-out question
through the fallback retrieval path over an index of the CoS summaries.

Results per document are appended to ``OUT.docs.jsonl`` as they finish; a re-run skips
what is there (resumable). See :func:`run_eval` and ``cos eval --help``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import defaultdict
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
from cos_integrations.research.answer_cache import AnswerCache, digest
from cos_integrations.research.datasets import DatasetError, EvalDoc, EvalQA, load_dataset
from cos_integrations.research.jsonl import append_jsonl, existing, read_jsonl
from cos_integrations.research.peers import (
    PEERS,
    CallRecord,
    PeerDoc,
    PeerSetup,
    PeerUnavailable,
    load_peer,
)
from cos_integrations.research.reference import reference_summarize
from cos_integrations.research.stream_eval import StreamOptions, run_stream
from cos_integrations.serving.hit_rule import HitRule, is_grounded
from cos_integrations.serving.index import chunk_position
from cos_integrations.serving.router import DEFAULT_MAX_ERROR
from cos_integrations.summarize.config import CoSConfig
from cos_integrations.summarize.engine import ChainOfSummaries, ModelRun
from cos_integrations.summarize.prompts import ANSWERS_SCHEMA, answer_messages
from cos_integrations.summarize.questions import ParseError, parse_answers
from cos_integrations.summarize.result import IterationRecord
from cos_integrations.text import estimate_tokens
from cos_integrations.usage import Usage

__all__ = [
    "EvalDoc",
    "load_dataset",
    "run_eval",
    "METHODS",
    "DatasetError",
    "RetrievalEvalOptions",
    "RETRIEVAL_COLUMNS",
    "RETRIEVAL_METHODS",
    "retrieval_table",
    "ABLATION_COLUMNS",
    "ablation_table",
    "ingest_costs",
    "PARAPHRASE_PROMPT",
    "paraphrase",
    "repeat_stats",
    "is_retrieval",
]

METHODS = (
    "cos",
    "cos-extract",
    "zero-shot",
    "density",
    "mini",
    "reference",
    "content",
)
log = logging.getLogger(__name__)
SUMMARY_METHODS = {
    "cos": "cos",
    "cos-extract": "cos-extract",
    "zero-shot": "zero-shot",
    "density": "density",
    "mini": "mini",
}


async def _answer_all(llm: ChatModel, content: str, qas: Sequence[EvalQA]) -> tuple[float, float]:
    """Mean F1 and EM of the held-out questions answered from ``content`` in one call."""
    run = ModelRun(llm, CoSConfig(max_output_tokens=min(4096, 32 * len(qas) + 64)), None)
    raw = await run.call(
        answer_messages(content, [q.question for q in qas]), json_schema=ANSWERS_SCHEMA
    )
    try:
        answers = parse_answers(raw, len(qas))
    except ParseError:
        answers = [None] * len(qas)
    f1 = [squad_f1(a or "", q.answers, q.language) for a, q in zip(answers, qas, strict=True)]
    em = [exact_match(a or "", q.answers, q.language) for a, q in zip(answers, qas, strict=True)]
    return sum(f1) / len(f1), sum(em) / len(em)


def iteration_record(it: IterationRecord) -> dict[str, Any]:
    """One iteration as the results file keeps it (what best-iteration selection saw);
    ``benchmarks/selection_rules.py`` replays selection rules on these."""
    return {
        "index": it.index,
        "kind": str(it.kind),
        "train_score": it.train_score,
        "val_score": it.val_score,
        "accepted": it.accepted,
        "failed": it.failed,
        "words": len(it.summary.split()),
    }


async def _summarise(method: str, llm: ChatModel, doc: EvalDoc, config: CoSConfig):
    if method == "reference":
        return await reference_summarize(llm, doc.text, config, doc_id=doc.doc_id)
    engine = ChainOfSummaries(llm, config.model_copy(update={"strategy": SUMMARY_METHODS[method]}))
    return await engine.asummarize(doc.text, doc_id=doc.doc_id)


async def _one(
    method: str, llm: ChatModel, doc: EvalDoc, config: CoSConfig, *, oracle: bool = True
) -> dict[str, Any]:
    """One summary method on one document. ``seconds`` is what the summary cost (the ingest
    time a user pays), never the evaluation's own calls; ``oracle`` also answers the test
    questions from every iteration of ``cos`` (the paper's best-iteration oracle)."""
    t0 = time.monotonic()
    record: dict[str, Any] = {
        "doc_id": doc.doc_id,
        "method": method,
        "source_tokens": estimate_tokens(doc.text),
    }
    if method == "content":
        summary, usage = doc.text, Usage()
        record["seconds"] = 0.0
    else:
        result = await _summarise(method, llm, doc, config)
        record["seconds"] = time.monotonic() - t0
        summary, usage = result.summary, result.usage
        # what each call type cost (thesis, questions, answers, rewrite, ...)
        record["usage_by_task"] = {t: u.model_dump() for t, u in result.usage_by_task.items()}
        if method in ("cos", "cos-extract", "reference"):
            record["iterations"] = [iteration_record(it) for it in result.iterations]
            record["best_iteration"] = result.best_iteration
            # iteration 0 is the zero-shot thesis: did the loop change it at all?
            record["thesis_kept"] = result.summary == result.iterations[0].summary
        if oracle and doc.qas and method in ("cos", "cos-extract", "reference"):
            per_iter = []
            for it in result.iterations:  # the paper's oracle: best iteration on test questions
                if it.summary and not it.failed:
                    f1, _ = await _answer_all(llm, it.summary, doc.qas)
                    per_iter.append((it.index, f1))
            record["heldout_f1_per_iteration"] = per_iter
            record["oracle_heldout_f1"] = max((f for _, f in per_iter), default=0.0)
    # a distractor has no questions: its summary is only indexed
    f1, em = await _answer_all(llm, summary, doc.qas) if doc.qas else (None, None)
    record.update(
        heldout_f1=f1,
        heldout_em=em,
        summary=summary,
        summary_tokens=estimate_tokens(summary),
        calls=usage.calls,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cached_tokens=usage.cached_tokens,
    )
    return record


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


# The paraphrase generator of ``repeat_traffic`` (the model under test, temperature 0):
# a question asked again in other words, the way a second user would ask it.
PARAPHRASE_PROMPT = (
    "Rewrite this question in other words: change the wording and the word order, keep "
    "its meaning and exactly what it asks for, add nothing. Reply with the new question "
    "only.\n\nQuestion: {question}"
)


async def paraphrase(llm: ChatModel, question: str) -> str:
    """One model-written paraphrase of ``question`` (:data:`PARAPHRASE_PROMPT`); the
    question itself when the reply is empty or not a question."""
    res = await llm.chat(
        [{"role": "user", "content": PARAPHRASE_PROMPT.format(question=question)}],
        max_tokens=64,
    )
    said = " ".join(res.text.strip().strip('"').split())
    if said.lower().startswith("question:"):
        said = said[len("question:") :].strip()
    return said if said.endswith("?") and said != question else question


def repeat_stats(before: list[dict[str, Any]], again: list[dict[str, Any]]) -> dict[str, Any]:
    """Of the traffic questions that missed and whose answer is in the source: how many hit
    when asked again (``again``: the same questions, or their paraphrases, in order), the F1
    they had as misses, and the F1 of those that hit."""
    pairs = [
        (b, a) for b, a in zip(before, again, strict=True) if not b["hit"] and b.get("in_source")
    ]
    hits = [(b, a) for b, a in pairs if a["hit"]]
    out: dict[str, Any] = {"missed_in_source": len(pairs), "hit_again": len(hits)}
    if pairs:
        out["hit_rate_again"] = len(hits) / len(pairs)
        out["f1_as_misses"] = sum(b["f1"] for b, _ in pairs) / len(pairs)
        out["f1_again"] = sum(a["f1"] for _, a in pairs) / len(pairs)
    if hits:
        out["f1_of_new_hits"] = sum(a["f1"] for _, a in hits) / len(hits)
        out["f1_of_new_hits_as_misses"] = sum(b["f1"] for b, _ in hits) / len(hits)
    return out


RETRIEVAL_METHODS = (
    "fallback",
    "rag",
    "rag-focused",
    "rag-ordered",
    "rag-contextual",
    "right-doc",
    *PEERS,
)
METHODS += RETRIEVAL_METHODS
# what a hit's answer is compared with under ``hit_ablation``
ABLATIONS = ("summary", "chunk", "whole-chunk")


def is_retrieval(method: str) -> bool:
    """A retrieval method's record (``fallback[cos]`` included)."""
    return method.split("[", 1)[0] in RETRIEVAL_METHODS


def _usage_fields(usage: Usage) -> dict[str, int]:
    return {
        "calls": usage.calls,
        "prompt_tokens": usage.prompt_tokens,
        "cached_tokens": usage.cached_tokens,
    }


def _mark(rows: list[dict[str, Any]], doc_id: str) -> list[dict[str, Any]]:
    """Whether each question's context held its own document (``right_doc``), and, for a
    hit, whether the hit was on another document (``wrong_doc_hit``)."""
    for r in rows:
        if "docs" in r:
            r["right_doc"] = doc_id in r["docs"]
        if r.get("hit"):
            r["wrong_doc_hit"] = (r.get("hit_doc") or r.get("best_doc")) != doc_id
    return rows


def _row(q: EvalQA, answer: str | None, **extra: Any) -> dict[str, Any]:
    return {
        "question": q.question,
        "gold": q.answers,
        "answer": answer,
        "f1": squad_f1(answer or "", q.answers, q.language),
        "em": exact_match(answer or "", q.answers, q.language),
        **extra,
    }


async def _retrieval(
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
    index = _eval_index(index_dir, docs, summaries, config, options, refine_from_traffic)
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
                write({"doc_id": doc.doc_id, "method": method, "questions": rows, **_agg(rows)})
        if "fallback" in todo:
            before = [await asker.fallback(q) for q in test]
            rec: dict[str, Any] = {
                "doc_id": doc.doc_id,
                "method": label,
                "threshold": asker.retriever.threshold,  # the value used (given or calibrated)
            }
            rec["questions"] = before
            rec.update(_agg(before))
            if traffic:
                await _traffic_step(
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
        return _row(
            q,
            ans,
            context_tokens=sum(estimate_tokens(h.text) for h in items),
            docs=[h.doc_id for h in items],
            **_usage_fields(usage),
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
        return _row(
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
            **_usage_fields(usage),
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
        return _row(q, ans, context_tokens=estimate_tokens(doc.text), **_usage_fields(usage))


def _eval_index(
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


async def _traffic_step(
    rec: dict[str, Any],
    doc: EvalDoc,
    traffic: list[EvalQA],
    test: list[EvalQA],
    fallback: Callable[..., Any],
    llm: ChatModel,
    index: Any,
    config: CoSConfig,
    options: RetrievalEvalOptions,
) -> None:
    """refine_from_traffic for one document, into ``rec``: the traffic half asked (its
    misses queue refine jobs), one refine pass (then CoS rounds on documents with traffic
    when ``options.deepen``), the traffic asked again and in paraphrases when
    ``options.repeat_traffic``, and the test half asked after."""
    from cos_integrations.serving.refine import Refiner

    rec["traffic"] = [await fallback(q, traffic=True) for q in traffic]
    engine = ChainOfSummaries(llm, config)
    refiner = Refiner(
        index,
        engine,
        teach=options.refine_teach,
        retarget=options.refine_retarget,
    )
    outcomes = await refiner.arun_once()
    rec["refine"] = [
        {"doc_id": o.doc_id, "query": o.query, "status": o.status, "reason": o.reason}
        | ({"answer": o.answer} if o.answer is not None else {})
        for o in outcomes
    ]
    rec["refine_calls"] = sum(o.usage.calls for o in outcomes)
    if options.deepen:
        deepened = await refiner.adeepen_traffic(strategy=options.deepen)
        rec["deepen"] = [
            {"doc_id": o.doc_id, "status": o.status, "reason": o.reason} for o in deepened
        ]
        rec["deepen_calls"] = sum(o.usage.calls for o in deepened)
    if options.repeat_traffic:
        # the same questions again, and in other words: did the misses learn?
        for row in rec["traffic"]:
            row["in_source"] = any(is_grounded(a, doc.text) for a in row["gold"])
        rec["traffic_again"] = [await fallback(q) for q in traffic]
        rec["paraphrases"] = []
        for q in traffic if options.paraphrase_traffic else []:
            said = await paraphrase(llm, q.question)
            rec["paraphrases"].append(
                await fallback(EvalQA(question=said, answers=q.answers, language=q.language))
            )
    after = [await fallback(q) for q in test]
    rec["questions_after"] = after
    rec["test_before"] = _agg(rec["questions"])
    rec["test_after"] = _agg(after)


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


async def _peer_eval(
    name: str,
    setup: PeerSetup,
    docs: list[EvalDoc],
    test_of: Callable[[EvalDoc], list[EvalQA]],
    answer: AnswerCache,
    done: dict[tuple[str, str], dict],
    write: Callable[[dict], Any],
) -> None:
    """One peer (:mod:`.peers`) over ``docs``: built once (its model calls, tokens and
    seconds charged to every document's record as the mean a document), then each test
    question answered from what it retrieves with the same answer call as every method."""
    todo = [d for d in docs if d.qas and (d.doc_id, name) not in done]
    if not todo:
        return
    peer = load_peer(name, setup)
    before = setup.meter.snapshot()
    record = setup.record
    replayed = record.replayed_seconds if record else 0.0
    start = time.perf_counter()
    await peer.abuild([PeerDoc(d.doc_id, d.title, d.text) for d in docs])
    seconds = time.perf_counter() - start
    if record:  # replayed calls (a resumed build) cost what they took when made
        seconds += record.replayed_seconds - replayed
    spent = setup.meter.snapshot()
    n = len(docs)
    cost = {
        "seconds": seconds / n,
        "calls": (spent.calls - before.calls) / n,
        "prompt_tokens": (spent.prompt_tokens - before.prompt_tokens) / n,
        "completion_tokens": (spent.completion_tokens - before.completion_tokens) / n,
    }
    for doc in todo:
        rows = []
        for q in test_of(doc):
            items = await peer.aretrieve(q.question)
            ans, usage = await answer(q, items)
            rows.append(
                _row(
                    q,
                    ans,
                    context_tokens=sum(estimate_tokens(h.text) for h in items),
                    docs=list(dict.fromkeys(h.doc_id for h in items if h.doc_id)),
                    **_usage_fields(usage),
                )
            )
        write({"doc_id": doc.doc_id, "method": name, "questions": rows, **_agg(rows), **cost})


def _test_questions(doc: EvalDoc, split: bool) -> list[EvalQA]:
    """The questions every retrieval method is scored on: the second half when ``split``."""
    qas = doc.qas
    return qas[len(qas) // 2 :] if split and len(qas) >= 2 else qas


def _agg(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Means over one document's questions (pooled over documents by summarise_records)."""
    n = len(rows) or 1
    out: dict[str, Any] = {
        "heldout_f1": sum(r["f1"] for r in rows) / n,
        "heldout_em": sum(r["em"] for r in rows) / n,
        "context_tokens": sum(r["context_tokens"] for r in rows) / n,
        "calls_per_question": sum(r["calls"] for r in rows) / n,
        "prompt_tokens_per_question": sum(r["prompt_tokens"] for r in rows) / n,
    }
    if rows and "hit" in rows[0]:
        hits = [r["f1"] for r in rows if r["hit"]]
        misses = [r["f1"] for r in rows if not r["hit"]]
        out["hit_rate"] = len(hits) / n
        # a hit answered wrongly is the cache's failure mode: the judge trusted the summary
        out["hit_f1"] = sum(hits) / len(hits) if hits else None
        out["miss_f1"] = sum(misses) / len(misses) if misses else None
        out["wrong_hits"] = sum(f < 0.5 for f in hits) / len(hits) if hits else None
        on_wrong = [r["wrong_doc_hit"] for r in rows if r["hit"] and "wrong_doc_hit" in r]
        out["wrong_doc_hits"] = sum(on_wrong) / len(on_wrong) if on_wrong else None
    marked = [r["right_doc"] for r in rows if "right_doc" in r]
    if marked:
        out["right_doc_rate"] = sum(marked) / len(marked)
    ablated = [r for r in rows if r.get("hit") and "ablation" in r]
    if ablated:
        both = {"f1": sum(r["f1"] for r in ablated) / len(ablated)}
        both["context_tokens"] = sum(r["judge_context_tokens"] for r in ablated) / len(ablated)
        out["ablation"] = {"hits": len(ablated), "both": both} | {
            name: {
                key: sum(r["ablation"][name][key] for r in ablated) / len(ablated)
                for key in ("f1", "context_tokens")
            }
            for name in ABLATIONS
        }
    return out


def pooled(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """:func:`_agg` over question rows pooled across documents (each question counts once)."""
    return {k: v for k, v in _agg(rows).items() if v is not None} if rows else {}


KEYS = {
    "heldout_f1": "heldout_f1",
    "heldout_em": "heldout_em",
    "summary_tokens": "summary_tokens",
    "source_tokens": "source_tokens",
    "calls_per_doc": "calls",
    "prompt_tokens_per_doc": "prompt_tokens",
    "completion_tokens_per_doc": "completion_tokens",
    "cached_tokens_per_doc": "cached_tokens",
    "seconds_per_doc": "seconds",
    "oracle_heldout_f1": "oracle_heldout_f1",
    "hit_rate": "hit_rate",
    "context_tokens": "context_tokens",
    "hit_f1": "hit_f1",
    "miss_f1": "miss_f1",
}


def _outcomes(rows: list[dict[str, Any]], step: str) -> dict[str, Any]:
    """How a refine-from-traffic step's jobs ended (``STEP_outcomes``: status -> count) and
    its model calls a document (``STEP_calls_per_doc``), over the documents' records."""
    statuses: dict[str, int] = defaultdict(int)
    for r in rows:
        for o in r.get(step, []):
            statuses[o["status"]] += 1
    return {
        f"{step}_outcomes": dict(statuses),
        f"{step}_calls_per_doc": sum(r.get(f"{step}_calls", 0) for r in rows) / len(rows),
    }


def summarise_records(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Mean of every figure per method (over the documents that have it); for the
    retrieval methods, over every question (pooled), before and after refinement."""
    by_method: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        by_method[r["method"]].append(r)
    out: dict[str, dict[str, Any]] = {}
    for method, rows in by_method.items():
        agg: dict[str, Any] = {"docs": len(rows)}
        for r in rows:
            for phase in ("questions", "questions_after"):
                _mark(r.get(phase, []), r["doc_id"])
        if all("questions" in r for r in rows):
            agg.update(pooled([q for r in rows for q in r["questions"]]))
            agg["questions"] = sum(len(r["questions"]) for r in rows)
            if any("questions_after" in r for r in rows):
                agg["test_before"] = pooled([q for r in rows for q in r["questions"]])
                agg["test_after"] = pooled([q for r in rows for q in r.get("questions_after", [])])
                for step in ("refine", "deepen"):
                    if step == "refine" or any(step in r for r in rows):
                        agg.update(_outcomes(rows, step))
                if any("traffic_again" in r for r in rows):
                    traffic = [q for r in rows if "traffic_again" in r for q in r["traffic"]]
                    agg["repeat"] = repeat_stats(
                        traffic, [q for r in rows for q in r.get("traffic_again", [])]
                    )
                    said = [q for r in rows for q in r.get("paraphrases", [])]
                    if said:
                        agg["paraphrase"] = repeat_stats(traffic, said)
            out[method] = agg
            continue
        for key, field in KEYS.items():
            vals = [r[field] for r in rows if r.get(field) is not None]
            if vals:
                agg[key] = sum(vals) / len(vals)
        for phase in ("test_before", "test_after"):
            if any(phase in r for r in rows):
                agg[phase] = {
                    k: sum(r[phase][k] for r in rows if phase in r)
                    / sum(1 for r in rows if phase in r)
                    for k in ("heldout_f1", "hit_rate", "context_tokens")
                }
        iters: dict[int, list[float]] = defaultdict(list)
        for r in rows:
            for i, f in r.get("heldout_f1_per_iteration", []):
                iters[i].append(f)
        if iters:
            agg["heldout_f1_per_iteration"] = {i: sum(v) / len(v) for i, v in sorted(iters.items())}
        out[method] = agg
    return out


async def run_eval(
    llm: ChatModel,
    docs: list[EvalDoc],
    *,
    methods: Sequence[str],
    config: CoSConfig,
    out: Path,
    model_name: str,
    dataset: str,
    concurrency: int = 1,
    refine_from_traffic: bool = False,
    retrieval: RetrievalEvalOptions | None = None,
    answer_cache: Path | None = None,
    on_record: Callable[[dict], None] | None = None,
    oracle: bool = True,
    distractors: Sequence[EvalDoc] = (),
    on_progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Run every method on every document (resuming from ``OUT.docs.jsonl``) and write OUT.

    A method that fails on a document (model error, context overflow) is listed under
    ``"errors"`` and left out of the means; the other documents go on, and a re-run retries
    only what failed or is missing. The retrieval methods (``fallback``, ``rag``,
    ``right-doc``) share one index in ``OUT.index/`` built from the summaries of
    ``retrieval.summary_method`` (computed in this run, or read from
    ``retrieval.summaries_from``). ``answer_cache`` (a JSONL file) keeps every retrieval
    answer by its exact prompt, so a later run that asks the same question over the same
    context (another hit rule over the same chunks) reuses the call instead of repeating it.
    ``distractors`` are indexed beside ``docs`` (their summaries made by the retrieval's
    summary strategies, or read from ``summaries_from``) and never asked about: a
    collection of real size in which the questioned documents must still be found.
    """
    retrieval = retrieval or RetrievalEvalOptions()
    peers, wanted, plain, sources = _plan(methods, retrieval)
    run_log = _RunLog(out, model_name, config, retrieval, refine_from_traffic, on_record)
    jobs = [(m, d) for d in docs for m in plain]
    jobs += [(m, d) for d in distractors for m in plain if m in sources]
    await _summary_jobs(llm, jobs, config, oracle, concurrency, run_log)
    everything = [*docs, *distractors]
    ingest: dict[str, dict[str, Any]] = {}
    if retrieval.stream is not None:
        return await _stream(
            llm,
            docs,
            everything,
            methods,
            config,
            retrieval,
            out,
            model_name,
            dataset,
            answer_cache,
            run_log,
            on_progress,
        )
    for i, source in enumerate(sources):
        summaries = _summaries(source, retrieval.summaries_from, run_log.done, everything)
        # what the questioned documents' summaries cost (distractors may be cheaper)
        ingest[retrieval.label(source)] = ingest_costs(
            [summaries[d.doc_id] for d in docs if d.doc_id in summaries]
        )
        # rag, rag-focused and right-doc read only the chunks, the same in every index
        index_dir = run_log.index_dir(source if len(sources) > 1 else None)
        await _retrieval(
            llm,
            everything,
            summaries,
            config,
            [m for m in wanted if i == 0 or m == "fallback"],
            refine_from_traffic,
            retrieval,
            index_dir,
            run_log.done,
            run_log.write,
            model_name,
            answer_cache,
            label=retrieval.label(source),
        )
    if peers:
        split = retrieval.test_half or refine_from_traffic
        cache = AnswerCache(llm, model_name, answer_cache)
        ingest.update(
            await _peers(llm, peers, docs, everything, config, retrieval.k, split, cache, run_log)
        )
    result = {
        "model": model_name,
        "dataset": dataset,
        "docs": len(docs),
        "distractors": len(distractors),
        "config": config.model_dump(mode="json"),
        "retrieval": retrieval.model_dump(mode="json") if wanted else None,
        "methods": _summary_table(run_log.done, docs, set(methods), ingest),
        "errors": run_log.errors,
    }
    out.write_text(json.dumps(result, indent=2))
    return result


async def _stream(
    llm: ChatModel,
    docs: list[EvalDoc],
    everything: list[EvalDoc],
    methods: Sequence[str],
    config: CoSConfig,
    retrieval: RetrievalEvalOptions,
    out: Path,
    model_name: str,
    dataset: str,
    answer_cache: Path | None,
    run_log: _RunLog,
    on_progress: Callable[[str, int, int], None] | None,
) -> dict[str, Any]:
    """``retrieval.stream``: the stream's rows over one collection (its first summary
    strategy's summaries), written to OUT."""
    source = retrieval.sources[0]
    summaries = _summaries(source, retrieval.summaries_from, run_log.done, everything)

    def make_index(path: Path) -> Any:
        return _eval_index(path, everything, summaries, config, retrieval, False)

    stream = await run_stream(
        llm,
        docs,
        everything,
        summaries,
        config=config,
        retrieval=retrieval,
        options=retrieval.stream,  # type: ignore[arg-type]
        out=out,
        model_name=model_name,
        answer_cache=answer_cache,
        methods=methods,
        make_index=make_index,
        on_ask=on_progress,
    )
    result = {
        "model": model_name,
        "dataset": dataset,
        "docs": len(docs),
        "distractors": len(everything) - len(docs),
        "config": config.model_dump(mode="json"),
        "retrieval": retrieval.model_dump(mode="json"),
        "stream": stream,
        "methods": {},
        "errors": run_log.errors,
    }
    out.write_text(json.dumps(result, indent=2))
    return result


def _plan(
    methods: Sequence[str], retrieval: RetrievalEvalOptions
) -> tuple[list[str], list[str], list[str], list[str]]:
    """What a run does: the peers, our retrieval methods, the summary methods to compute
    (those asked for, and those the retrieval index is built from unless read from a
    file), and the summary strategies the retrieval indexes are built from."""
    unknown = set(methods) - set(METHODS)
    if unknown:
        raise ValueError(f"unknown methods {sorted(unknown)}; choose from {METHODS}")
    peers = [m for m in methods if m in PEERS]
    wanted = [m for m in methods if m in RETRIEVAL_METHODS and m not in PEERS]
    plain = [m for m in methods if m not in RETRIEVAL_METHODS]
    sources = retrieval.sources if wanted else []
    for source in sources:
        if retrieval.summaries_from is None and source not in plain:
            if source not in SUMMARY_METHODS and source != "reference":
                raise ValueError(f"summary_method {source!r} is not a summary method")
            plain.append(source)  # the retrieval index is built from these summaries
    return peers, wanted, plain, sources


# Options added after runs were recorded, with the value every run had before they
# existed. Both act only on refinement from traffic (retarget is a refine job's), so a
# signature leaves them out of a run without it, and out of one with it while they hold
# that old value: the records of before still resume, whatever the defaults become.
_LATER_OPTIONS: dict[tuple[str, ...], Any] = {
    ("retrieval", "refine_retarget"): 1,
    ("retrieval", "refine_check_names"): False,
}


def _comparable(signature: dict[str, Any] | None) -> dict[str, Any] | None:
    """A copy of ``signature`` without the later options that cannot have changed its run.

    Examples:
        >>> _comparable({"retrieval": {"k": 2, "refine_retarget": 3}})
        {'retrieval': {'k': 2}}
        >>> _comparable({"retrieval": {"refine_retarget": 3}, "refine_from_traffic": True})
        {'retrieval': {'refine_retarget': 3}, 'refine_from_traffic': True}
    """
    if not signature:
        return signature
    sig = json.loads(json.dumps(signature))
    traffic = bool(sig.get("refine_from_traffic"))
    for (*parents, leaf), before in _LATER_OPTIONS.items():
        node: Any = sig
        for key in parents:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and leaf in node and (not traffic or node[leaf] == before):
            del node[leaf]
    return sig


class _RunLog:
    """A run's records by ``(doc_id, method)``: read back from ``OUT.docs.jsonl`` when their
    signature matches (the model and config; for the retrieval methods also how they ran),
    appended as they finish, so a re-run does only what is missing or failed."""

    def __init__(
        self,
        out: Path,
        model_name: str,
        config: CoSConfig,
        retrieval: RetrievalEvalOptions,
        refine_from_traffic: bool,
        on_record: Callable[[dict], None] | None,
    ) -> None:
        self.out, self.on_record = out, on_record
        self.partial = out.with_suffix(out.suffix + ".docs.jsonl")
        self.signature = {"model": model_name, "config_hash": config.config_hash()}
        # the retrieval methods' figures depend on how they were run, and on the summaries
        # (the routing check on, as every run before the option had it, is left out)
        dumped = retrieval.model_dump(
            mode="json", exclude={"routing_check"} if retrieval.routing_check else None
        )
        r_signature = {**self.signature, "retrieval": dumped}
        if refine_from_traffic:
            r_signature["refine_from_traffic"] = True
        self.r_signature = _comparable(r_signature) or r_signature
        self.done: dict[tuple[str, str], dict] = {}
        self.errors: list[dict[str, str]] = []
        for rec in read_jsonl(self.partial):
            if _comparable(rec.get("signature")) == self._signature_of(rec["method"]):
                self.done[(rec["doc_id"], rec["method"])] = rec

    def _signature_of(self, method: str) -> dict:
        return self.r_signature if is_retrieval(method) else self.signature

    def write(self, rec: dict) -> None:
        rec["signature"] = self._signature_of(rec["method"])
        append_jsonl(self.partial, rec)
        self.done[(rec["doc_id"], rec["method"])] = rec
        if self.on_record:
            self.on_record(rec)

    def failed(self, doc_id: str, method: str, error: str) -> None:
        self.errors.append({"doc_id": doc_id, "method": method, "error": error})

    def index_dir(self, strategy: str | None) -> Path:
        """One index per retrieval signature (and strategy): another starts afresh."""
        name = f"{self.out.name}.index-{digest(self.r_signature)}"
        return self.out.with_name(name if strategy is None else f"{name}-{strategy}")


async def _summary_jobs(
    llm: ChatModel,
    jobs: list[tuple[str, EvalDoc]],
    config: CoSConfig,
    oracle: bool,
    concurrency: int,
    run_log: _RunLog,
) -> None:
    """Every ``(method, document)`` summary record not done yet, ``concurrency`` at a time;
    a failure is logged and left for a re-run, the others go on."""
    sem, lock = asyncio.Semaphore(concurrency), asyncio.Lock()

    async def job(method: str, doc: EvalDoc) -> None:
        if (doc.doc_id, method) in run_log.done:
            return
        async with sem:
            try:
                rec = await _one(method, llm, doc, config, oracle=oracle)
            except Exception as exc:  # one document's failure must not lose the others
                log.warning("%s %s failed: %s", doc.doc_id, method, exc)
                run_log.failed(doc.doc_id, method, str(exc))
                return  # not written: a re-run retries it
        async with lock:
            run_log.write(rec)

    await asyncio.gather(*(job(m, d) for m, d in jobs))


async def _peers(
    llm: ChatModel,
    peers: list[str],
    docs: list[EvalDoc],
    everything: list[EvalDoc],
    config: CoSConfig,
    k: int,
    split: bool,
    answers: AnswerCache,
    run_log: _RunLog,
) -> dict[str, dict[str, Any]]:
    """Each peer over every document, asked the questioned ones; its ingest costs by name.
    A missing peer package stops the run (say how to install it); another failure is
    logged and the other peers go on."""
    from cos_integrations.embedded.embeddings import LocalEmbedder

    # the peers' build calls, kept beside the run's records: a stopped build resumes
    record = CallRecord(run_log.out.with_suffix(run_log.out.suffix + ".peer-calls.jsonl"))
    setup = PeerSetup(
        llm=llm, embedder=LocalEmbedder(), k=k, context_window=config.context_tokens, record=record
    )
    ingest: dict[str, dict[str, Any]] = {}
    for name in peers:
        try:
            await _peer_eval(
                name,
                setup,
                everything,
                lambda d: _test_questions(d, split),
                answers,
                run_log.done,
                run_log.write,
            )
        except PeerUnavailable:
            raise  # nothing of it can run: say how to install it
        except Exception as exc:  # one peer's failure must not lose the others
            log.warning("peer %s failed: %s", name, exc)
            run_log.failed("*", name, f"{type(exc).__name__}: {exc}")
            continue
        ingest[name] = ingest_costs([run_log.done[(d.doc_id, name)] for d in docs])
    return ingest


def _summary_table(
    done: dict[tuple[str, str], dict],
    docs: list[EvalDoc],
    methods: set[str],
    ingest: dict[str, dict[str, Any]],
) -> dict[str, dict[str, Any]]:
    """The means per method over the questioned documents, with each row's ingest costs."""
    ids = {d.doc_id for d in docs}
    records = [r for r in done.values() if r["doc_id"] in ids]
    labels = methods | set(ingest)
    summary = summarise_records([r for r in records if r["method"] in labels])
    for label, costs in ingest.items():
        if label in summary:
            summary[label]["ingest"] = costs
    return summary


def _summaries(
    source: str,
    summaries_from: str | None,
    done: dict[tuple[str, str], dict],
    docs: list[EvalDoc],
) -> dict[str, dict]:
    """One strategy's summary records by document: read from ``summaries_from`` (an earlier
    run's ``.docs.jsonl``), or the ones this run computed."""
    if summaries_from:
        if existing(summaries_from) is None:
            raise ValueError(f"{summaries_from}: no such file (nor {summaries_from}.gz)")
        found = {}
        for rec in read_jsonl(summaries_from):
            if rec.get("method") == source and rec.get("summary"):
                found[rec["doc_id"]] = rec
        missing = [d.doc_id for d in docs if d.doc_id not in found]
        if missing:
            raise ValueError(f"{summaries_from} has no {source!r} summary for {missing[:5]}")
        return {d.doc_id: found[d.doc_id] for d in docs}
    return {d: r for (d, m), r in done.items() if m == source}


def ingest_costs(records: list[dict[str, Any]]) -> dict[str, Any]:
    """What one strategy's summaries cost a document at ingest (means over its records):
    seconds, model calls, prompt and completion tokens, and the share of documents whose
    summary is the zero-shot thesis unchanged (CoS strategies)."""
    if not records:
        return {}
    n = len(records)
    out: dict[str, Any] = {
        "docs": n,
        "seconds_per_doc": sum(r.get("seconds") or 0.0 for r in records) / n,
        "calls_per_doc": sum(r.get("calls") or 0 for r in records) / n,
        "tokens_per_doc": sum(
            (r.get("prompt_tokens") or 0) + (r.get("completion_tokens") or 0) for r in records
        )
        / n,
        "summary_tokens": sum(r.get("summary_tokens") or 0 for r in records) / n,
    }
    kept = [r["thesis_kept"] for r in records if "thesis_kept" in r]
    if kept:
        out["thesis_kept"] = sum(kept) / len(kept)
    return out


RETRIEVAL_COLUMNS = (
    "path",
    "docs",
    "questions",
    "F1",
    "EM",
    "context tok/q",
    "calls/q",
    "prompt tok/q",
    "hit rate",
    "F1 of hits",
    "F1 of misses",
    "wrong hits",
    "right doc",
    "wrong-doc hits",
    "ingest s/doc",
    "ingest calls/doc",
    "ingest tok/doc",
)


def retrieval_table(methods: dict[str, dict[str, Any]]) -> list[list[str]]:
    """The side-by-side rows (``RETRIEVAL_COLUMNS``) of the retrieval methods in a result:
    the chunk baselines, the peers, fallback before and after refinement, right-doc. The CLI and
    ``benchmarks/report.py`` both print these, so they cannot disagree."""

    def cell(v: Any, fmt: str) -> str:
        return "" if v is None else fmt.format(v)

    rows = []
    fallbacks = [n for n in methods if n.split("[", 1)[0] == "fallback"]
    order = ("rag", "rag-focused", "rag-ordered", "rag-contextual", *PEERS, *fallbacks, "right-doc")
    for name in order:
        m = methods.get(name)
        if not m or "questions" not in m:
            continue
        phases = [(name, m)]
        if "test_after" in m:
            phases = [
                (f"{name}, before refinement", m["test_before"]),
                (f"{name}, after refinement", m["test_after"]),
            ]
        for label, v in phases:
            rows.append(
                [
                    label,
                    str(m["docs"]),
                    str(m["questions"]),
                    cell(v.get("heldout_f1"), "{:.3f}"),
                    cell(v.get("heldout_em"), "{:.3f}"),
                    cell(v.get("context_tokens"), "{:.0f}"),
                    cell(v.get("calls_per_question"), "{:.2f}"),
                    cell(v.get("prompt_tokens_per_question"), "{:.0f}"),
                    cell(v.get("hit_rate"), "{:.0%}"),
                    cell(v.get("hit_f1"), "{:.3f}"),
                    cell(v.get("miss_f1"), "{:.3f}"),
                    cell(v.get("wrong_hits"), "{:.0%}"),
                    cell(v.get("right_doc_rate"), "{:.0%}"),
                    cell(v.get("wrong_doc_hits"), "{:.0%}"),
                    cell(m.get("ingest", {}).get("seconds_per_doc"), "{:.0f}"),
                    cell(m.get("ingest", {}).get("calls_per_doc"), "{:.1f}"),
                    cell(m.get("ingest", {}).get("tokens_per_doc"), "{:.0f}"),
                ]
            )
    return rows


ABLATION_COLUMNS = (
    "path",
    "hits",
    "both (shipped)",
    "summary sentences alone",
    "chunk sentences alone",
    "whole best chunk alone",
)


def ablation_table(methods: dict[str, dict[str, Any]]) -> list[list[str]]:
    """F1 (and context tokens) of the same hits answered from each part of the hit context
    (``hit_ablation``), one row per fallback strategy."""
    rows = []
    for name, m in methods.items():
        a = m.get("ablation")
        if not a:
            continue
        cells = [
            f"{a[k]['f1']:.3f} ({a[k]['context_tokens']:.0f} tok)" for k in ("both", *ABLATIONS)
        ]
        rows.append([name, str(a["hits"]), *cells])
    return rows


def plot(result: dict[str, Any], path: Path) -> None:
    """Held-out F1 against summary tokens (log scale) per method, and CoS F1 per iteration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, m in result["methods"].items():
        if "summary_tokens" in m and "heldout_f1" in m:
            a.scatter(m["summary_tokens"], m["heldout_f1"], s=50)
            a.annotate(
                name,
                (m["summary_tokens"], m["heldout_f1"]),
                xytext=(4, 4),
                textcoords="offset points",
            )
    a.set_xscale("log")
    a.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # labels overlap otherwise
    a.set_xlabel("summary tokens (log)")
    a.set_ylabel("held-out F1")
    a.set_title(f"{result['dataset']} ({result['docs']} docs)")
    for name in ("cos", "reference"):
        per = result["methods"].get(name, {}).get("heldout_f1_per_iteration")
        if per:
            xs = [int(k) for k in per]
            b.plot(xs, list(per.values()), marker="o", label=name)
    b.xaxis.get_major_locator().set_params(integer=True)
    b.set_xlabel("iteration (0 = thesis)")
    b.set_ylabel("held-out F1")
    if b.lines:
        b.legend()
    else:  # e.g. a zero-shot-only run: no iterations to draw
        b.text(0.5, 0.5, "no iterations in this run", ha="center", transform=b.transAxes)
    b.set_title("F1 per iteration")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
