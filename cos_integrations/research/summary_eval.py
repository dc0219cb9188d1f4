"""The summary methods under test: each document's summary by each method, scored by
answering the document's held-out questions from the summary alone (one call a document),
``content`` from the whole document, with the costs of making it.

Examples:
    >>> "zero-shot" in SUMMARY_EVAL_METHODS
    True
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

from cos_integrations.metrics import exact_match, squad_f1
from cos_integrations.model import ChatModel
from cos_integrations.research.datasets import EvalDoc, EvalQA
from cos_integrations.research.jsonl import existing, read_jsonl
from cos_integrations.research.reference import reference_summarize
from cos_integrations.summarize.config import CoSConfig
from cos_integrations.summarize.engine import ChainOfSummaries, ModelRun
from cos_integrations.summarize.prompts import ANSWERS_SCHEMA, answer_messages
from cos_integrations.summarize.questions import ParseError, parse_answers
from cos_integrations.summarize.result import IterationRecord
from cos_integrations.text import estimate_tokens
from cos_integrations.usage import Usage

__all__ = [
    "SUMMARY_EVAL_METHODS",
    "SUMMARY_METHODS",
    "iteration_record",
    "evaluate_summary",
    "summary_jobs",
    "recorded_summaries",
]

log = logging.getLogger(__name__)

SUMMARY_EVAL_METHODS = (
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


async def evaluate_summary(
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


async def summary_jobs(
    llm: ChatModel,
    jobs: list[tuple[str, EvalDoc]],
    config: CoSConfig,
    oracle: bool,
    concurrency: int,
    run_log: Any,
) -> None:
    """Every ``(method, document)`` summary record not done yet, ``concurrency`` at a time;
    a failure is logged and left for a re-run, the others go on."""
    sem, lock = asyncio.Semaphore(concurrency), asyncio.Lock()

    async def job(method: str, doc: EvalDoc) -> None:
        if (doc.doc_id, method) in run_log.done:
            return
        async with sem:
            try:
                rec = await evaluate_summary(method, llm, doc, config, oracle=oracle)
            except Exception as exc:  # one document's failure must not lose the others
                log.warning("%s %s failed: %s", doc.doc_id, method, exc)
                run_log.failed(doc.doc_id, method, str(exc))
                return  # not written: a re-run retries it
        async with lock:
            run_log.write(rec)

    await asyncio.gather(*(job(m, d) for m, d in jobs))


def recorded_summaries(
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
