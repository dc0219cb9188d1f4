"""CoS as a LlamaIndex ``TransformComponent``: documents in, CoS summary nodes out."""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from llama_index.core.schema import (
    BaseNode,
    Document,
    MetadataMode,
    NodeRelationship,
    RelatedNodeInfo,
    TextNode,
    TransformComponent,
)
from pydantic import Field, PrivateAttr

from cos_integrations import ChainOfSummaries, CoSConfig
from cos_integrations.ingest import (
    CoSIngestError,
    IngestReport,
    chunk_metadata,
    flatten_metadata,
    summarize_new,
    summary_metadata,
)
from cos_integrations.loaders import SourceDocument, load_site
from cos_integrations.storage.db import strip_password
from cos_integrations.storage.store import SummaryStore
from cos_integrations.sync import run_sync
from cos_integrations.text import chunk_text

from .llm import as_chat_model

__all__ = ["CoSSummaryTransform", "CoSTransformError", "section_documents"]

log = logging.getLogger(__name__)


class CoSTransformError(CoSIngestError):
    """Some documents failed; the others' summaries are stored and come back free next run.

    Raised (rather than returning a partial batch) so that the pipeline does not cache a
    result without the failed documents: the next ``pipeline.run`` retries them. ``nodes``
    (``outputs``) holds the nodes of the documents that succeeded; ``failed`` maps each
    failed document to its error (the core's failure contract, see
    :mod:`cos_integrations.ingest`).

    Examples:
        >>> try:                                              # doctest: +SKIP
        ...     nodes = pipeline.run(documents=docs)
        ... except CoSTransformError as exc:
        ...     nodes, failed = exc.nodes, exc.failed         # the rest retried next run
    """

    @property
    def nodes(self) -> list[BaseNode]:
        return self.outputs


class CoSSummaryTransform(TransformComponent):
    """Turn each document (or each group of nodes sharing a ``ref_doc_id``) into one CoS
    summary node linked to its source.

    Fields (``config``, ``emit``, ``chunk_words``, ``store_path``) change the output and so
    make the pipeline cache key; the model client, concurrency and progress are private, so
    secrets, timeouts and worker counts never enter the key or ``to_dict()``.

    Setup:
        .. code-block:: python

            from llama_index.core.ingestion import IngestionPipeline
            from llamaindex_ext import CoSSummaryTransform, CoSLocalEmbedding

            pipeline = IngestionPipeline(
                transformations=[
                    CoSSummaryTransform(llm=llm, config=CoSConfig(),
                                        store_path="./index/cos.sqlite"),
                    CoSLocalEmbedding(),
                ],
                vector_store=summaries,  # a ChromaVectorStore, cosine space
            )
            nodes = pipeline.run(documents=docs, show_progress=True)   # or: await arun(...)

    ``emit="both"`` also returns the source chunks (metadata ``cos_kind="chunk"``) so one
    pipeline fills the collection with summaries and full text; the retriever tells them
    apart. Unchanged documents (same text, same config) reuse their stored summary: no call.
    """

    config: CoSConfig = Field(
        default_factory=CoSConfig.shipped,
        description="CoS hyperparameters (strategy, iterations, question counts, word budget); "
        "default: the shipped preset (tiered: a zero-shot summary, CoS rounds later).",
    )
    emit: Literal["summary", "both"] = Field(
        default="summary",
        description='"summary": one summary node per document; "both": its source chunks too.',
    )
    chunk_words: int = Field(
        default=160, gt=0, description='Words per source chunk when emit="both".'
    )
    store_path: str | None = Field(
        default=None,
        description="The store of summaries, versions and question banks: a SQLite path, "
        "or a sqlite:///... or postgresql://... URL (recorded without its password; "
        "store_url= passes one with it); None: in memory.",
    )

    _llm: Any = PrivateAttr(default=None)
    _store: Any = PrivateAttr(default=None)
    _concurrency: int = PrivateAttr(default=4)
    _show_progress: bool = PrivateAttr(default=False)
    _last_report: Any = PrivateAttr(default=None)
    _store_url: str | None = PrivateAttr(default=None)

    def __init__(
        self,
        llm: Any = None,
        *,
        concurrency: int = 4,
        show_progress: bool = False,
        store_url: str | None = None,
        **data: Any,
    ) -> None:
        # a password never reaches the field (fields are part of pipeline cache keys)
        url = store_url or data.get("store_path")
        if url is not None:
            data["store_path"] = strip_password(str(url))
        super().__init__(**data)
        self._store_url = str(url) if url is not None else None
        self._llm = llm
        self._concurrency = concurrency
        self._show_progress = show_progress

    @classmethod
    def class_name(cls) -> str:
        return "CoSSummaryTransform"

    @property
    def store(self) -> SummaryStore:
        if self._store is None:
            target = self._store_url or self.store_path
            if target and "://" not in target:
                Path(target).parent.mkdir(parents=True, exist_ok=True)
            self._store = SummaryStore(target or ":memory:")
        return self._store

    @property
    def last_report(self) -> IngestReport | None:
        """The core's report of the last call: ``summarized``, ``unchanged`` (reused, no
        call), ``skipped`` and ``failed`` (id -> why)."""
        return self._last_report

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        return run_sync(self.acall(nodes, **kwargs))

    async def acall(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        if self._llm is None:
            raise ValueError("CoSSummaryTransform needs llm= (a LlamaIndex LLM or a ChatModel)")
        groups: OrderedDict[str, list[BaseNode]] = OrderedDict()
        for node in nodes:
            groups.setdefault(node.ref_doc_id or node.node_id, []).append(node)
        heads: dict[str, BaseNode] = {}
        documents: list[SourceDocument] = []
        for doc_id, members in groups.items():
            head = heads[doc_id] = members[0]
            meta = head.metadata or {}
            text = "\n\n".join(n.get_content(metadata_mode=MetadataMode.NONE) for n in members)
            documents.append(
                SourceDocument(
                    doc_id,
                    text,
                    source=str(meta.get("file_path") or meta.get("source", "")),
                    title=str(meta.get("title", "")),
                )
            )
        progress = None
        if documents and kwargs.get("show_progress", self._show_progress):
            from tqdm.auto import tqdm

            progress = tqdm(total=len(documents), desc="CoS summaries")
        engine = ChainOfSummaries(as_chat_model(self._llm), self.config)
        report = await summarize_new(
            self.store,
            documents,
            engine,
            concurrency=self._concurrency,
            on_progress=(lambda *_: progress.update(1)) if progress is not None else None,
        )
        if progress is not None:
            progress.close()
        for doc_id, why in report.skipped.items():
            log.warning("CoSSummaryTransform: skipping %s: %s", doc_id, why)
        out: list[BaseNode] = []
        for doc_id, head in heads.items():
            if doc_id in report.failed or doc_id in report.skipped:
                continue
            out.append(self._summary_node(doc_id, head))
            if self.emit == "both":
                out.extend(self._chunk_nodes(doc_id, head))
        self._last_report = report
        if report.failed:
            raise CoSTransformError(report, out)
        return out

    def _summary_node(self, doc_id: str, head: BaseNode) -> TextNode:
        doc, current = self.store.require_current(doc_id)
        meta = {**(head.metadata or {}), **summary_metadata(doc, current)}
        relationships = {NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc_id)}
        if meta.get("parent") and meta["parent"] != doc_id:  # a section: its parent section
            relationships[NodeRelationship.PARENT] = RelatedNodeInfo(node_id=meta["parent"])
        return TextNode(
            id_=f"{doc_id}::summary",
            text=current.text,
            metadata=flatten_metadata(meta, warn=lambda m: log.warning("%s: %s", doc_id, m)),
            relationships=relationships,
            excluded_embed_metadata_keys=list(meta),
            excluded_llm_metadata_keys=[k for k in meta if k not in ("title", "source")],
        )

    def _chunk_nodes(self, doc_id: str, head: BaseNode) -> list[TextNode]:
        doc, _ = self.store.require_current(doc_id)
        chunks = chunk_text(doc.text, words=self.chunk_words, overlap=self.chunk_words // 5)
        nodes = []
        for i, c in enumerate(chunks):
            meta = flatten_metadata({**(head.metadata or {}), **chunk_metadata(doc, i)})
            nodes.append(
                TextNode(
                    id_=f"{doc_id}::chunk::{i}",
                    text=c,
                    metadata=meta,
                    relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc_id)},
                    excluded_embed_metadata_keys=list(meta),
                )
            )
        return nodes


def section_documents(paths: list[str | Path], **options: Any) -> list[Document]:
    """Markdown and HTML pages as one LlamaIndex ``Document`` per section (see
    :mod:`cos_integrations.sections`), for :class:`CoSSummaryTransform`: id ``PAGE#anchor``,
    metadata the source with its anchor, the heading path and the page, and a ``PARENT``
    relationship to the section (or page) above it; ``options`` go to the core's
    ``load_paths`` (``min_words``, ``max_words``, ``follow_symlinks``). Files that cannot be
    read are logged and left out.

    Examples:
        >>> docs = section_documents(["/usr/share/doc/python3-doc/html/tutorial"])  # doctest: +SKIP
        >>> docs[0].metadata["heading_path"]                                       # doctest: +SKIP
        'The Python Tutorial'
    """
    out = []
    for d in load_site(list(paths), **options):
        meta = d.flat_metadata()
        parent = meta.get("parent")
        rel = {NodeRelationship.PARENT: RelatedNodeInfo(node_id=parent)} if parent else {}
        out.append(
            Document(
                id_=d.doc_id,
                text=d.text,
                metadata=meta,
                relationships=rel,
                excluded_embed_metadata_keys=list(meta),
                excluded_llm_metadata_keys=[k for k in meta if k not in ("title", "source")],
            )
        )
    return out
