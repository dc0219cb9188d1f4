"""The one incremental-summarise loop, and the metadata every summary and chunk carries.

:func:`summarize_new` is what ``CoSIndex.aingest``, the LlamaIndex transform and the
LangChain transformer all run: record each document's text in the store, skip empty ones,
reuse the summary of a document whose text and config are unchanged (no model call),
summarise the rest (``concurrency`` at a time), and store each result as it arrives with the
faithfulness guard's flags, or mark the document failed with the error. A result is stored
before the next one is awaited, so a failure or crash later in the run loses nothing done.

The failure contract: the core returns an :class:`IngestReport` (``failed`` lists the
documents whose summarisation failed, with the error); the framework adapters, whose return
types cannot carry failures, store the others and then raise :class:`CoSIngestError`, which
holds the outputs of the documents that succeeded. Either way the next run retries only the
failed documents: the stored ones are unchanged and cost nothing.

Examples:
    >>> report = await summarize_new(store, docs, engine)   # doctest: +SKIP
    >>> report.summarized, report.unchanged, report.failed  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cos_integrations.errors import CoSError
from cos_integrations.loaders import SourceDocument
from cos_integrations.storage.store import (
    DocumentRecord,
    SummaryStore,
    SummaryVersion,
    content_hash,
)
from cos_integrations.summarize.engine import ChainOfSummaries
from cos_integrations.summarize.guard import summary_flags
from cos_integrations.summarize.result import CoSResult
from cos_integrations.usage import Usage

__all__ = [
    "IngestReport",
    "CoSIngestError",
    "summarize_new",
    "flatten_metadata",
    "summary_metadata",
    "chunk_metadata",
]


@dataclass
class IngestReport:
    """What an ingest did, per document: ``summarized`` (new summaries), ``unchanged``
    (stored summaries reused, no call), ``failed`` and ``skipped`` (id -> why), ``repaired``
    (documents whose vectors an index repaired first), the new ``results`` and the
    ``usage`` of every model call of the run, failed ones included.

    Examples:
        >>> report = IngestReport(summarized=["a"], failed={"b": "timeout"})
        >>> report.ok
        False
    """

    summarized: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    repaired: list[str] = field(default_factory=list)
    results: dict[str, CoSResult] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)

    @property
    def ok(self) -> bool:
        return not self.failed


class CoSIngestError(CoSError):
    """Some documents failed to summarise; the others are stored, and their framework
    outputs (nodes or documents) are in ``outputs``. Re-running retries only the failed.

    Examples:
        >>> try:                                              # doctest: +SKIP
        ...     docs = transformer.transform_documents(batch)
        ... except CoSIngestError as exc:
        ...     docs, failed = exc.outputs, exc.report.failed
    """

    def __init__(self, report: IngestReport, outputs: list[Any]) -> None:
        self.report = report
        self.failed = report.failed
        self.outputs = outputs
        listed = "; ".join(f"{k}: {v}" for k, v in list(report.failed.items())[:5])
        super().__init__(
            f"{len(report.failed)} document(s) failed ({listed}); {len(outputs)} outputs ok"
        )


async def summarize_new(
    store: SummaryStore,
    documents: Sequence[SourceDocument],
    engine: ChainOfSummaries,
    *,
    concurrency: int = 2,
    on_progress: Callable[[str, str], None] | None = None,
    on_stored: Callable[[str, str], None] | None = None,
) -> IngestReport:
    """Summarise the new or changed ``documents`` into ``store`` (see the module docstring).

    ``on_progress(doc_id, outcome)`` is called per document with ``"summarized"``,
    ``"unchanged"`` or ``"failed"``; ``on_stored(doc_id, outcome)`` right after a document's
    summary is known to be in the store (``"summarized"`` or ``"unchanged"``), e.g. to write
    its vectors. Empty documents are skipped (``report.skipped``); a document id given twice
    keeps its last text.
    """
    report = IngestReport()
    config_hash = engine.config.config_hash()
    latest = {d.doc_id: d for d in documents}
    todo: list[SourceDocument] = []
    for doc in latest.values():
        if not doc.text or not doc.text.strip():
            report.skipped[doc.doc_id] = "empty text"
            continue
        store.upsert_document(doc.doc_id, doc.text, source=doc.source, title=doc.title)
        if store.is_current(doc.doc_id, content_hash(doc.text), config_hash):
            report.unchanged.append(doc.doc_id)
            if on_stored:
                on_stored(doc.doc_id, "unchanged")
            if on_progress:
                on_progress(doc.doc_id, "unchanged")
        else:
            todo.append(doc)

    def done(i: int, outcome: CoSResult | BaseException) -> None:
        doc = todo[i]
        if isinstance(outcome, BaseException):
            if not isinstance(outcome, Exception):
                return  # cancellation: nothing to record
            report.failed[doc.doc_id] = f"{type(outcome).__name__}: {outcome}"
            if isinstance(getattr(outcome, "usage", None), Usage):
                report.usage.add(outcome.usage)
            store.mark_failed(doc.doc_id, report.failed[doc.doc_id])
            state = "failed"
        else:
            store.save_result(doc.doc_id, outcome, flags=summary_flags(outcome.summary, doc.text))
            report.summarized.append(doc.doc_id)
            report.results[doc.doc_id] = outcome
            report.usage.add(outcome.usage)
            state = "summarized"
            if on_stored:
                on_stored(doc.doc_id, state)
        if on_progress:
            on_progress(doc.doc_id, state)

    if todo:
        await engine.asummarize_many(
            [d.text for d in todo],
            doc_ids=[d.doc_id for d in todo],
            concurrency=concurrency,
            return_exceptions=True,
            on_result=done,
        )
    return report


def flatten_metadata(meta: dict[str, Any], *, warn: Callable[[str], None] | None = None) -> dict:
    """Chroma-safe metadata: str/int/float/bool kept; lists and dicts JSON-encoded; None
    dropped. Each change is reported through ``warn``.

    Examples:
        >>> flatten_metadata({"tags": ["a", "b"], "n": 1, "x": None})
        {'tags': '["a", "b"]', 'n': 1}
    """
    out: dict[str, Any] = {}
    for key, value in meta.items():
        if isinstance(value, (str, int, float, bool)):
            out[str(key)] = value
        elif value is None:
            if warn:
                warn(f"metadata {key!r} is None: dropped")
        elif isinstance(value, (list, tuple, dict, set)):
            try:
                out[str(key)] = json.dumps(
                    sorted(value) if isinstance(value, set) else value, default=str
                )
            except (TypeError, ValueError):
                out[str(key)] = str(value)
            if warn:
                warn(f"metadata {key!r} is a {type(value).__name__}: stored as JSON text")
        else:
            out[str(key)] = str(value)
            if warn:
                warn(f"metadata {key!r} is a {type(value).__name__}: stored as text")
    return out


def _document_metadata(doc: DocumentRecord) -> dict[str, Any]:
    return {"doc_id": doc.doc_id, "source": doc.source, "title": doc.title}


def summary_metadata(doc: DocumentRecord, current: SummaryVersion) -> dict[str, Any]:
    """What a summary vector, node or document says about itself (the same keys in the
    index, LlamaIndex and LangChain): its document, ``cos_kind="summary"``, the version,
    token counts, who made it and its validation score."""
    meta: dict[str, Any] = {
        **_document_metadata(doc),
        "cos_kind": "summary",
        "cos_version": current.version,
        "summary_tokens": current.summary_tokens,
        "source_tokens": current.source_tokens,
        "created_by": current.created_by,
    }
    if current.val_score is not None:
        meta["val_score"] = round(current.val_score, 4)
    return meta


def chunk_metadata(doc: DocumentRecord, i: int) -> dict[str, Any]:
    """What source chunk ``i`` of ``doc`` says about itself (``cos_kind="chunk"``)."""
    return {**_document_metadata(doc), "cos_kind": "chunk", "chunk": i}
