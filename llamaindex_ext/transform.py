"""CoS as a LlamaIndex ``TransformComponent``: documents in, CoS summary nodes out."""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from llama_index.core.schema import (
    BaseNode,
    MetadataMode,
    NodeRelationship,
    RelatedNodeInfo,
    TextNode,
    TransformComponent,
)
from pydantic import Field, PrivateAttr

from cos_integrations import ChainOfSummaries, CoSConfig, CoSError, CoSResult
from cos_integrations._sync import run_sync
from cos_integrations.chunking import chunk_text
from cos_integrations.index import flatten_metadata
from cos_integrations.store import SummaryStore, content_hash

from .llm import as_chat_model

__all__ = ["CoSSummaryTransform", "CoSTransformError"]

log = logging.getLogger(__name__)


class CoSTransformError(CoSError):
    """Some documents failed; the others' summaries are stored and come back free next run.

    Raised (rather than returning a partial batch) so that the pipeline does not cache a
    result without the failed documents: the next ``pipeline.run`` retries them.
    """

    def __init__(self, failed: dict[str, str], nodes: list[BaseNode]) -> None:
        self.failed = failed
        self.nodes = nodes
        listed = "; ".join(f"{k}: {v}" for k, v in list(failed.items())[:5])
        super().__init__(f"{len(failed)} document(s) failed ({listed}); {len(nodes)} nodes ok")


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

    config: CoSConfig = Field(default_factory=CoSConfig)
    emit: Literal["summary", "both"] = "summary"
    chunk_words: int = 160
    store_path: str | None = None

    _llm: Any = PrivateAttr(default=None)
    _store: Any = PrivateAttr(default=None)
    _concurrency: int = PrivateAttr(default=4)
    _show_progress: bool = PrivateAttr(default=False)
    _last_report: dict = PrivateAttr(default_factory=dict)

    def __init__(
        self,
        llm: Any = None,
        *,
        concurrency: int = 4,
        show_progress: bool = False,
        **data: Any,
    ) -> None:
        if data.get("store_path") is not None:
            data["store_path"] = str(data["store_path"])
        super().__init__(**data)
        self._llm = llm
        self._concurrency = concurrency
        self._show_progress = show_progress

    @classmethod
    def class_name(cls) -> str:
        return "CoSSummaryTransform"

    @property
    def store(self) -> SummaryStore:
        if self._store is None:
            if self.store_path:
                Path(self.store_path).parent.mkdir(parents=True, exist_ok=True)
            self._store = SummaryStore(self.store_path or ":memory:")
        return self._store

    @property
    def last_report(self) -> dict:
        """``{"summarized": [...], "reused": [...], "skipped": {id: why}, "failed": {...}}``."""
        return self._last_report

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        return run_sync(self.acall(nodes, **kwargs))

    async def acall(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        if self._llm is None:
            raise ValueError("CoSSummaryTransform needs llm= (a LlamaIndex LLM or a ChatModel)")
        groups: OrderedDict[str, list[BaseNode]] = OrderedDict()
        for node in nodes:
            groups.setdefault(node.ref_doc_id or node.node_id, []).append(node)
        report: dict[str, Any] = {"summarized": [], "reused": [], "skipped": {}, "failed": {}}
        store, cfg_hash = self.store, self.config.config_hash()
        todo: list[tuple[str, str]] = []
        heads: dict[str, BaseNode] = {}
        for doc_id, members in groups.items():
            text = "\n\n".join(n.get_content(metadata_mode=MetadataMode.NONE) for n in members)
            if not text.strip():
                report["skipped"][doc_id] = "empty text"
                log.warning("CoSSummaryTransform: skipping %s: empty text", doc_id)
                continue
            head = members[0]
            heads[doc_id] = head
            meta = head.metadata or {}
            store.upsert_document(
                doc_id,
                text,
                source=str(meta.get("file_path") or meta.get("source", "")),
                title=str(meta.get("title", "")),
            )
            if store.is_current(doc_id, content_hash(text), cfg_hash):
                report["reused"].append(doc_id)
            else:
                todo.append((doc_id, text))
        progress = None
        if todo and kwargs.get("show_progress", self._show_progress):
            from tqdm.auto import tqdm

            progress = tqdm(total=len(todo), desc="CoS summaries")

        def done(i: int, outcome: CoSResult | BaseException) -> None:
            doc_id = todo[i][0]
            if isinstance(outcome, CoSResult):
                store.save_result(doc_id, outcome)
                report["summarized"].append(doc_id)
            elif isinstance(outcome, Exception):
                report["failed"][doc_id] = f"{type(outcome).__name__}: {outcome}"
                store.mark_failed(doc_id, report["failed"][doc_id])
            if progress is not None:
                progress.update(1)

        if todo:
            engine = ChainOfSummaries(as_chat_model(self._llm), self.config)
            await engine.asummarize_many(
                [t for _, t in todo],
                doc_ids=[d for d, _ in todo],
                concurrency=self._concurrency,
                return_exceptions=True,
                on_result=done,
            )
        if progress is not None:
            progress.close()
        out: list[BaseNode] = []
        for doc_id, head in heads.items():
            if doc_id in report["failed"]:
                continue
            out.append(self._summary_node(doc_id, head))
            if self.emit == "both":
                out.extend(self._chunk_nodes(doc_id, head))
        self._last_report = report
        if report["failed"]:
            raise CoSTransformError(report["failed"], out)
        return out

    def _base_meta(self, doc_id: str, head: BaseNode) -> dict[str, Any]:
        meta = dict(head.metadata or {})
        doc = self.store.get_document(doc_id)
        meta.update(
            {
                "doc_id": doc_id,
                "source": doc.source if doc else "",
                "title": (doc.title if doc else "") or meta.get("title", ""),
            }
        )
        return meta

    def _summary_node(self, doc_id: str, head: BaseNode) -> TextNode:
        current = self.store.current_summary(doc_id)
        assert current is not None
        meta = {
            **self._base_meta(doc_id, head),
            "cos_kind": "summary",
            "cos_version": current.version,
            "summary_tokens": current.summary_tokens,
            "source_tokens": current.source_tokens,
        }
        if current.val_score is not None:
            meta["val_score"] = round(current.val_score, 4)
        return TextNode(
            id_=f"{doc_id}::summary",
            text=current.text,
            metadata=flatten_metadata(meta, warn=lambda m: log.warning("%s: %s", doc_id, m)),
            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc_id)},
            excluded_embed_metadata_keys=list(meta),
            excluded_llm_metadata_keys=[k for k in meta if k not in ("title", "source")],
        )

    def _chunk_nodes(self, doc_id: str, head: BaseNode) -> list[TextNode]:
        doc = self.store.get_document(doc_id)
        assert doc is not None
        base = flatten_metadata({**self._base_meta(doc_id, head), "cos_kind": "chunk"})
        chunks = chunk_text(doc.text, words=self.chunk_words, overlap=self.chunk_words // 5)
        return [
            TextNode(
                id_=f"{doc_id}::chunk::{i}",
                text=c,
                metadata={**base, "chunk": i},
                relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc_id)},
                excluded_embed_metadata_keys=list(base) + ["chunk"],
            )
            for i, c in enumerate(chunks)
        ]
