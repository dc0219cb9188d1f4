"""CoS as a LangChain document transformer: documents in, CoS summary documents out."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.documents import BaseDocumentTransformer, Document
from langchain_core.runnables import RunnableConfig

from cos_integrations import ChainOfSummaries, CoSConfig
from cos_integrations.ingest import (
    CoSIngestError,
    IngestReport,
    flatten_metadata,
    summarize_new,
    summary_metadata,
)
from cos_integrations.loaders import SourceDocument, load_site
from cos_integrations.storage.store import SummaryStore
from cos_integrations.sync import run_sync

from .chat_model import as_chat_model

__all__ = ["CoSDocumentTransformer", "document_id", "section_documents"]

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
    ``last_report`` (the core's :class:`~cos_integrations.ingest.IngestReport`). When a
    document's summarisation fails, the others are stored and :class:`CoSIngestError` is
    raised with their summary documents in ``outputs``; the next call retries only the
    failed one (the same contract as the LlamaIndex transform).

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
        store_url: str | None = None,
        concurrency: int = 4,
        show_progress: bool = False,
    ) -> None:
        self.llm = llm
        self.config = config or CoSConfig.shipped()
        # a SQLite path, or a sqlite:///... / postgresql://... URL
        self.store = SummaryStore(store_url or store_path or ":memory:")
        self.concurrency = concurrency
        self.show_progress = show_progress
        self.last_report: IngestReport | None = None

    def transform_documents(self, documents: Sequence[Document], **kwargs: Any) -> list[Document]:
        """Sync wrapper of :meth:`atransform_documents`."""
        return run_sync(self.atransform_documents(documents, **kwargs))

    async def atransform_documents(
        self, documents: Sequence[Document], **kwargs: Any
    ) -> list[Document]:
        config: RunnableConfig | None = kwargs.get("config")
        engine = ChainOfSummaries(as_chat_model(self.llm, config), self.config)
        sources: dict[str, Document] = {}
        for doc in documents:
            sources[document_id(doc)] = doc
        batch = [
            SourceDocument(
                doc_id,
                doc.page_content or "",
                source=str((doc.metadata or {}).get("source", "")),
                title=str((doc.metadata or {}).get("title", "")),
            )
            for doc_id, doc in sources.items()
        ]
        progress = _progress(len(batch)) if self.show_progress and batch else None
        report = await summarize_new(
            self.store,
            batch,
            engine,
            concurrency=self.concurrency,
            on_progress=(lambda *_: progress.update(1)) if progress is not None else None,
        )
        if progress is not None:
            progress.close()
        for doc_id, why in report.skipped.items():
            log.warning("skipping %s: %s", doc_id, why)
        self.last_report = report
        out = [
            self._summary_document(doc_id, doc)
            for doc_id, doc in sources.items()
            if doc_id not in report.failed and doc_id not in report.skipped
        ]
        if report.failed:
            raise CoSIngestError(report, out)
        return out

    def _summary_document(self, doc_id: str, source: Document) -> Document:
        doc, current = self.store.require_current(doc_id)
        meta = flatten_metadata(
            {**(source.metadata or {}), **summary_metadata(doc, current)},
            warn=lambda msg: log.warning("%s: %s", doc_id, msg),
        )
        return Document(page_content=current.text, metadata=meta, id=f"{doc_id}::summary")


def _progress(total: int):
    try:
        from tqdm.auto import tqdm

        return tqdm(total=total, desc="CoS summaries")
    except ImportError:  # pragma: no cover - tqdm comes with most installs
        return None


def section_documents(paths: list[str | Path], **options: Any) -> list[Document]:
    """Markdown and HTML pages as one LangChain ``Document`` per section (see
    :mod:`cos_integrations.sections`), for :class:`CoSDocumentTransformer` or
    ``CoSFallbackRetriever.add_documents``: id ``PAGE#anchor``, metadata the source URL or
    path with its anchor, the heading path, the page and the parent section; ``options`` go
    to the core's ``load_paths``. Files that cannot be read are logged and left out.

    Examples:
        >>> docs = section_documents(["docs/"])          # doctest: +SKIP
        >>> docs[0].metadata["source"]                   # doctest: +SKIP
        'docs/guide.md#install'
    """
    return [
        Document(page_content=d.text, metadata=d.flat_metadata(), id=d.doc_id)
        for d in load_site(list(paths), **options)
    ]
