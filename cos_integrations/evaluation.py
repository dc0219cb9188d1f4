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
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from .config import CoSConfig
from .engine import ChainOfSummaries, _Run
from .metrics import exact_match, squad_f1
from .model import ChatModel
from .prompts import ANSWERS_SCHEMA, answer_messages
from .questions import ParseError, QAPair, parse_answers
from .reference import reference_summarize
from .text import estimate_tokens
from .usage import Usage

__all__ = ["EvalDoc", "load_dataset", "run_eval", "METHODS", "DatasetError"]

METHODS = ("cos", "zero-shot", "density", "mini", "reference", "content", "fallback")
log = logging.getLogger(__name__)
SUMMARY_METHODS = {"cos": "cos", "zero-shot": "zero-shot", "density": "density", "mini": "mini"}


class DatasetError(ValueError):
    """A malformed line in an evaluation dataset (the message names the line)."""


class EvalQA(BaseModel):
    question: str
    answers: list[str] = Field(min_length=1)


class EvalDoc(BaseModel):
    """One dataset line: ``{"doc_id", "title", "text", "qas": [{"question", "answers"}]}``."""

    doc_id: str
    title: str = ""
    text: str = Field(min_length=1)
    qas: list[EvalQA] = Field(min_length=1)


def load_dataset(path: str | Path, *, limit: int | None = None) -> list[EvalDoc]:
    """Read and validate a JSONL dataset; raises :class:`DatasetError` naming the bad line."""
    docs: list[EvalDoc] = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                docs.append(EvalDoc.model_validate_json(line))
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(x) for x in first.get("loc", ()))
                raise DatasetError(
                    f"{path}, line {number}: {where or 'line'}: {first['msg']}"
                ) from None
            if limit and len(docs) >= limit:
                break
    if not docs:
        raise DatasetError(f"{path}: no documents")
    return docs


async def _answer_all(llm: ChatModel, content: str, qas: Sequence[EvalQA]) -> tuple[float, float]:
    """Mean F1 and EM of the held-out questions answered from ``content`` in one call."""
    run = _Run(llm, CoSConfig(max_output_tokens=min(4096, 32 * len(qas) + 64)), None)
    raw = await run.call(
        answer_messages(content, [q.question for q in qas]), json_schema=ANSWERS_SCHEMA
    )
    try:
        answers = parse_answers(raw, len(qas))
    except ParseError:
        answers = [None] * len(qas)
    f1 = [squad_f1(a or "", q.answers) for a, q in zip(answers, qas, strict=True)]
    em = [exact_match(a or "", q.answers) for a, q in zip(answers, qas, strict=True)]
    return sum(f1) / len(f1), sum(em) / len(em)


async def _summarise(method: str, llm: ChatModel, doc: EvalDoc, config: CoSConfig):
    if method == "reference":
        return await reference_summarize(llm, doc.text, config, doc_id=doc.doc_id)
    engine = ChainOfSummaries(llm, config.model_copy(update={"strategy": SUMMARY_METHODS[method]}))
    return await engine.asummarize(doc.text, doc_id=doc.doc_id)


async def _one(method: str, llm: ChatModel, doc: EvalDoc, config: CoSConfig) -> dict[str, Any]:
    t0 = time.monotonic()
    record: dict[str, Any] = {
        "doc_id": doc.doc_id,
        "method": method,
        "source_tokens": estimate_tokens(doc.text),
    }
    if method == "content":
        summary, usage = doc.text, Usage()
    else:
        result = await _summarise(method, llm, doc, config)
        summary, usage = result.summary, result.usage
        if method in ("cos", "reference"):
            per_iter = []
            for it in result.iterations:  # the paper's oracle: best iteration on test questions
                if it.summary and not it.failed:
                    f1, _ = await _answer_all(llm, it.summary, doc.qas)
                    per_iter.append((it.index, f1))
            record["heldout_f1_per_iteration"] = per_iter
            record["iterations"] = [  # what selection saw, to study the selection rule
                {
                    "index": it.index,
                    "kind": str(it.kind),
                    "train_score": it.train_score,
                    "val_score": it.val_score,
                    "accepted": it.accepted,
                    "failed": it.failed,
                    "words": len(it.summary.split()),
                }
                for it in result.iterations
            ]
            record["oracle_heldout_f1"] = max((f for _, f in per_iter), default=0.0)
            record["best_iteration"] = result.best_iteration
    record["seconds"] = time.monotonic() - t0
    f1, em = await _answer_all(llm, summary, doc.qas)
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


async def _fallback(
    llm: ChatModel,
    docs: list[EvalDoc],
    cos_records: dict[str, dict],
    config: CoSConfig,
    refine_from_traffic: bool,
) -> list[dict[str, Any]]:
    from .embeddings import LocalEmbedder
    from .index import CoSIndex
    from .refine import Refiner
    from .retrieval import FallbackRetriever, answer_from

    out = []
    with tempfile.TemporaryDirectory(prefix="cos-eval-") as tmp:
        index = CoSIndex(tmp, embedder=LocalEmbedder(), config=config)
        for doc in docs:
            rec = cos_records.get(doc.doc_id)
            if not rec:
                continue
            index.store.upsert_document(doc.doc_id, doc.text, title=doc.title)
            index.store.publish_version(
                doc.doc_id,
                rec["summary"],
                expected_version=None,
                created_by="cos",
                reason="eval",
                summary_tokens=rec["summary_tokens"],
            )
            index.sync_document(doc.doc_id)
        retriever = FallbackRetriever(index, llm=llm, judge="llm", threshold=0.75, k=2)

        async def ask(q: EvalQA, *, traffic: bool = False) -> tuple[float, bool, int]:
            # only traffic may queue refinement: a test question that taught the summary
            # its own answer would be measured on what it leaked
            retriever.refine_on_miss = "queue" if traffic else "off"
            res = await retriever.aretrieve(q.question)
            answer = res.answer
            if answer is None and res.items:
                answer, _ = await answer_from(llm, q.question, res.items)
            return squad_f1(answer or "", q.answers), res.hit, res.context_tokens

        for doc in docs:
            if doc.doc_id not in cos_records:
                continue
            qas = doc.qas
            rec: dict[str, Any] = {"doc_id": doc.doc_id, "method": "fallback"}
            if refine_from_traffic and len(qas) >= 2:
                traffic, test = qas[: len(qas) // 2], qas[len(qas) // 2 :]
                before = [await ask(q) for q in test]
                for q in traffic:
                    await ask(q, traffic=True)
                await Refiner(index, ChainOfSummaries(llm, config)).arun_once()
                after = [await ask(q) for q in test]
                rec["test_before"] = _agg(before)
                rec["test_after"] = _agg(after)
                scored = before
            else:
                scored = [await ask(q) for q in qas]
            rec.update(_agg(scored))
            out.append(rec)
    return out


def _agg(rows: list[tuple[float, bool, int]]) -> dict[str, float | None]:
    n = len(rows) or 1
    hits = [r[0] for r in rows if r[1]]
    misses = [r[0] for r in rows if not r[1]]
    return {
        "heldout_f1": sum(r[0] for r in rows) / n,
        "hit_rate": sum(r[1] for r in rows) / n,
        "context_tokens": sum(r[2] for r in rows) / n,
        # a hit answered wrongly is the cache's failure mode: the judge trusted the summary
        "hit_f1": sum(hits) / len(hits) if hits else None,
        "miss_f1": sum(misses) / len(misses) if misses else None,
    }


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


def summarise_records(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Mean of every figure per method (over the documents that have it)."""
    by_method: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        by_method[r["method"]].append(r)
    out: dict[str, dict[str, Any]] = {}
    for method, rows in by_method.items():
        agg: dict[str, Any] = {"docs": len(rows)}
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
    on_record: Callable[[dict], None] | None = None,
) -> dict[str, Any]:
    """Run every method on every document (resuming from ``OUT.docs.jsonl``) and write OUT.

    A method that fails on a document (model error, context overflow) is listed under
    ``"errors"`` and left out of the means; the other documents go on, and a re-run retries
    only what failed or is missing.
    """
    unknown = set(methods) - set(METHODS)
    if unknown:
        raise ValueError(f"unknown methods {sorted(unknown)}; choose from {METHODS}")
    partial = out.with_suffix(out.suffix + ".docs.jsonl")
    signature = {"model": model_name, "config_hash": config.config_hash()}
    done: dict[tuple[str, str], dict] = {}
    if partial.exists():
        for line in partial.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("signature") == signature:
                done[(rec["doc_id"], rec["method"])] = rec
    sem = asyncio.Semaphore(concurrency)
    lock = asyncio.Lock()

    errors: list[dict[str, str]] = []

    async def job(method: str, doc: EvalDoc) -> None:
        if (doc.doc_id, method) in done:
            return
        async with sem:
            try:
                rec = await _one(method, llm, doc, config)
            except Exception as exc:  # one document's failure must not lose the others
                log.warning("%s %s failed: %s", doc.doc_id, method, exc)
                errors.append({"doc_id": doc.doc_id, "method": method, "error": str(exc)})
                return  # not written: a re-run retries it
        rec["signature"] = signature
        async with lock:
            with partial.open("a") as fh:
                fh.write(json.dumps(rec) + "\n")
            done[(doc.doc_id, method)] = rec
        if on_record:
            on_record(rec)

    plain = [m for m in methods if m != "fallback"]
    if "fallback" in methods and "cos" not in plain:
        plain.append("cos")  # the fallback index is built from the CoS summaries
    await asyncio.gather(*(job(m, d) for d in docs for m in plain))
    records = [r for r in done.values() if r["doc_id"] in {d.doc_id for d in docs}]
    if "fallback" in methods:
        cos_records = {r["doc_id"]: r for r in records if r["method"] == "cos"}
        fb = await _fallback(llm, docs, cos_records, config, refine_from_traffic)
        records += fb
        for r in fb:
            if on_record:
                on_record(r)
    result = {
        "model": model_name,
        "dataset": dataset,
        "docs": len(docs),
        "config": config.model_dump(mode="json"),
        "methods": summarise_records([r for r in records if r["method"] in methods]),
        "errors": errors,
    }
    out.write_text(json.dumps(result, indent=2))
    return result


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


def questions_of(doc: EvalDoc) -> list[QAPair]:
    """The held-out questions as a bank (for callers that want to use them as human ones)."""
    return [QAPair(question=q.question, answers=q.answers, origin="human") for q in doc.qas]
