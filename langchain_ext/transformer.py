"""CoS as a LangChain document transformer: documents in, CoS summary documents out."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.documents import BaseDocumentTransformer, Document
from langchain_core.runnables import RunnableConfig

from cos_integrations import ChainOfSummaries, CoSConfig, CoSResult
from cos_integrations._sync import run_sync
from cos_integrations.index import flatten_metadata
from cos_integrations.store import SummaryStore, content_hash

from .chat_model import as_chat_model

__all__ = ["CoSDocumentTransformer", "document_id"]

log = logging.getLogger(__name__)


def document_id(doc: Document) -> str:
    """``doc.id``, else ``metadata['doc_id']``, else ``metadata['source']``, else a content hash."""
    meta = doc.metadata or {}
    for candidate in (doc.id, meta.get("doc_id"), meta.get("source")):
        if candidate:
            return str(candidate)
    return "sha256:" + hashlib.sha256(doc.page_content.encode()).hexdigest()[:24]


class CoSDocumentTransformer(BaseDocumentTransformer):
    """Turn documents into Chain of Summaries summary documents linked to their sources.

    Summaries are cached in the core store by content hash + config hash: transforming the
    same documents again makes no model call. Empty documents are skipped and listed in
    ``last_report``; a document whose summarisation fails is listed there too, the others
    are returned, and the failed one is tried again next time.

    Setup:
        .. code-block:: python

            from langchain_ext import CoSDocumentTransformer
            from cos_integrations import CoSConfig

            transformer = CoSDocumentTransformer(
                llm=chat_model, config=CoSConfig(), store_path="./index/cos.sqlite"
            )

    Transform:
        .. code-block:: python

            summary_docs = await transformer.atransform_documents(docs)
            summary_docs[0].metadata   # {"doc_id": ..., "source": ..., "cos_version": 1, ...}

    Tracing: pass ``config={"callbacks": [...]}`` to ``transform_documents`` and the model
    calls run under it.
    """

    def __init__(
        self,
        llm: Any,
        config: CoSConfig | None = None,
        *,
        store_path: str | Path | None = None,
        concurrency: int = 4,
        show_progress: bool = False,
    ) -> None:
        self.llm = llm
        self.config = config or CoSConfig()
        self.store = SummaryStore(store_path or ":memory:")
        self.concurrency = concurrency
        self.show_progress = show_progress
        self.last_report: dict[str, dict[str, str]] = {"skipped": {}, "failed": {}}

    def transform_documents(self, documents: Sequence[Document], **kwargs: Any) -> list[Document]:
        """Sync wrapper of :meth:`atransform_documents`."""
        return run_sync(self.atransform_documents(documents, **kwargs))

    async def atransform_documents(
        self, documents: Sequence[Document], **kwargs: Any
    ) -> list[Document]:
        config: RunnableConfig | None = kwargs.get("config")
        engine = ChainOfSummaries(as_chat_model(self.llm, config), self.config)
        cfg_hash = self.config.config_hash()
        report: dict[str, dict[str, str]] = {"skipped": {}, "failed": {}}
        todo: list[tuple[str, Document]] = []
        out: dict[str, Document] = {}
        order: list[str] = []
        for doc in documents:
            doc_id = document_id(doc)
            if not doc.page_content or not doc.page_content.strip():
                report["skipped"][doc_id] = "empty page_content"
                log.warning("skipping %s: empty page_content", doc_id)
                continue
            meta = doc.metadata or {}
            self.store.upsert_document(
                doc_id,
                doc.page_content,
                source=str(meta.get("source", "")),
                title=str(meta.get("title", "")),
            )
            order.append(doc_id)
            if self.store.is_current(doc_id, content_hash(doc.page_content), cfg_hash):
                out[doc_id] = self._summary_document(doc_id, doc)
            else:
                todo.append((doc_id, doc))
        progress = _progress(len(todo)) if self.show_progress and todo else None

        def done(i: int, outcome: CoSResult | BaseException) -> None:
            doc_id, doc = todo[i]
            if isinstance(outcome, Exception):
                report["failed"][doc_id] = f"{type(outcome).__name__}: {outcome}"
                self.store.mark_failed(doc_id, report["failed"][doc_id])
            elif isinstance(outcome, CoSResult):
                self.store.save_result(doc_id, outcome)
                out[doc_id] = self._summary_document(doc_id, doc)
            if progress is not None:
                progress.update(1)

        if todo:
            await engine.asummarize_many(
                [d.page_content for _, d in todo],
                doc_ids=[i for i, _ in todo],
                concurrency=self.concurrency,
                return_exceptions=True,
                on_result=done,
            )
        if progress is not None:
            progress.close()
        self.last_report = report
        return [out[i] for i in order if i in out]

    def _summary_document(self, doc_id: str, source: Document) -> Document:
        current = self.store.current_summary(doc_id)
        assert current is not None
        meta = flatten_metadata(
            {
                **{k: v for k, v in (source.metadata or {}).items() if k != "doc_id"},
                "doc_id": doc_id,
                "cos_version": current.version,
                "summary_tokens": current.summary_tokens,
                "source_tokens": current.source_tokens,
                **({"val_score": current.val_score} if current.val_score is not None else {}),
            },
            warn=lambda msg: log.warning("%s: %s", doc_id, msg),
        )
        return Document(page_content=current.text, metadata=meta, id=f"{doc_id}::summary")


def _progress(total: int):
    try:
        from tqdm.auto import tqdm

        return tqdm(total=total, desc="CoS summaries")
    except ImportError:  # pragma: no cover - tqdm comes with most installs
        return None
