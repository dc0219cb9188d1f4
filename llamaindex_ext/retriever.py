"""The CoS fallback retriever for LlamaIndex, its miss event, and the expand postprocessor."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import (
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    RelatedNodeInfo,
    TextNode,
)
from pydantic import PrivateAttr

from cos_integrations import ChainOfSummaries, CoSConfig
from cos_integrations.index import CoSIndex, SearchHit
from cos_integrations.retrieval import (
    DEFAULT_REJECT_ECHO,
    DEFAULT_REQUIRE_SUPPORT,
    DEFAULT_THRESHOLD,
    DEFAULT_VERIFY_CHUNK,
    FallbackRetriever,
    HitContext,
    RetrievalResult,
)

from .embeddings import as_embedder
from .llm import as_chat_model

__all__ = ["CoSFallbackRetriever", "CoSCacheMissEvent", "CoSExpandToSourcePostprocessor"]

log = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)


class CoSCacheMissEvent(BaseEvent):
    """Emitted for every cache miss: the query, the documents consulted, the refine job."""

    query: str
    reason: str
    doc_ids: list[str]
    job_id: int | None = None
    not_covered: bool = False

    @classmethod
    def class_name(cls) -> str:
        return "CoSCacheMissEvent"


def _node(hit: SearchHit, hit_flag: bool) -> NodeWithScore:
    meta = {**hit.metadata, "cos_hit": hit_flag, "cos_kind": hit.kind}
    meta.pop("_node_content", None)
    node = TextNode(
        id_=hit.id,
        text=hit.text,
        metadata=meta,
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=hit.doc_id)},
        excluded_embed_metadata_keys=list(meta),
        excluded_llm_metadata_keys=[k for k in meta if k not in ("title", "source")],
    )
    return NodeWithScore(node=node, score=hit.score)


class CoSFallbackRetriever(BaseRetriever):
    """Summaries on a hit; source chunks, a refine job and an event on a miss.

    Setup:
        .. code-block:: python

            from llamaindex_ext import CoSFallbackRetriever, CoSLocalEmbedding

            retriever = CoSFallbackRetriever.from_persist_dir(
                "./index", llm=llm, embed_model=CoSLocalEmbedding(), similarity_top_k=3
            )

    Retrieve:
        .. code-block:: python

            nodes = retriever.retrieve("When is rent due?")    # or: await aretrieve(...)
            nodes[0].node.metadata["cos_hit"]                  # True on a hit

    Query engine:
        .. code-block:: python

            from llama_index.core.query_engine import RetrieverQueryEngine
            engine = RetrieverQueryEngine.from_args(retriever, llm=llm)
    """

    def __init__(
        self,
        index: CoSIndex,
        *,
        llm: Any = None,
        similarity_top_k: int = 4,
        threshold: float = DEFAULT_THRESHOLD,
        judge: Literal["score", "llm"] = "score",
        hit_context: HitContext | None = None,
        reject_echo: bool = DEFAULT_REJECT_ECHO,
        require_support: bool = DEFAULT_REQUIRE_SUPPORT,
        verify_chunk: bool = DEFAULT_VERIFY_CHUNK,
        refine_on_miss: Literal["queue", "background", "off"] = "queue",
        config: CoSConfig | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self.index = index
        self.similarity_top_k = similarity_top_k
        self._chat = as_chat_model(llm) if llm is not None else None
        self._background = None
        on_miss = None
        if refine_on_miss == "background":
            if self._chat is None:
                raise ValueError('refine_on_miss="background" needs llm=')
            from cos_integrations.refine import BackgroundRefiner, Refiner

            engine = ChainOfSummaries(self._chat, config or index.config)
            self._background = BackgroundRefiner(Refiner(index, engine))
            on_miss = self._background.notify
        self.core = FallbackRetriever(
            index,
            llm=self._chat,
            k=similarity_top_k,
            threshold=threshold,
            judge=judge,
            refine_on_miss=refine_on_miss,
            on_miss=on_miss,
            hit_context=hit_context,
            reject_echo=reject_echo,
            require_support=require_support,
            verify_chunk=verify_chunk,
        )

    @classmethod
    def from_persist_dir(
        cls,
        persist_dir: str | Path,
        *,
        llm: Any = None,
        embed_model: Any = None,
        chroma_url: str | None = None,
        **kwargs: Any,
    ) -> CoSFallbackRetriever:
        """Reopen an index written by ``cos ingest`` or by a pipeline with the transform."""
        index = CoSIndex(persist_dir, embedder=as_embedder(embed_model), chroma_url=chroma_url)
        return cls(index, llm=llm, **kwargs)

    @property
    def hits(self) -> int:
        return self.core.hits

    @property
    def misses(self) -> int:
        return self.core.misses

    def _finish(self, res: RetrievalResult) -> list[NodeWithScore]:
        if not res.hit and (res.items or res.not_covered):
            dispatcher.event(
                CoSCacheMissEvent(
                    query=res.query,
                    reason=res.reason,
                    doc_ids=[h.doc_id for h in res.items],
                    job_id=res.job_id,
                    not_covered=res.not_covered,
                )
            )
        return [_node(h, res.hit) for h in res.items]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._finish(self.core.retrieve(query_bundle.query_str))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._finish(await self.core.aretrieve(query_bundle.query_str))

    def close(self) -> None:
        """Stop the background refiner, if any (queued jobs stay in the store)."""
        if self._background is not None:
            self._background.close()
            self._background = None


class CoSExpandToSourcePostprocessor(BaseNodePostprocessor):
    """Replace summary nodes by their source's best chunks (or the whole document).

    Example:
        .. code-block:: python

            engine = RetrieverQueryEngine.from_args(
                retriever, node_postprocessors=[CoSExpandToSourcePostprocessor(
                    persist_dir="./index", mode="chunks", chunks_per_doc=2)])
    """

    persist_dir: str
    mode: Literal["chunks", "document"] = "chunks"
    chunks_per_doc: int = 2
    _index: Any = PrivateAttr(default=None)

    def __init__(self, index: CoSIndex | None = None, **data: Any) -> None:
        if index is not None:
            data.setdefault("persist_dir", str(index.path))
        super().__init__(**data)
        self._index = index

    @classmethod
    def class_name(cls) -> str:
        return "CoSExpandToSourcePostprocessor"

    @property
    def index(self) -> CoSIndex:
        if self._index is None:
            self._index = CoSIndex(self.persist_dir, create=False)
        return self._index

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        out: list[NodeWithScore] = []
        seen: set[str] = set()
        query = query_bundle.query_str if query_bundle else ""
        for nws in nodes:
            meta = nws.node.metadata or {}
            if meta.get("cos_kind") != "summary":
                if nws.node.node_id not in seen:
                    seen.add(nws.node.node_id)
                    out.append(nws)
                continue
            doc_id = str(meta.get("doc_id", ""))
            if self.mode == "document":
                doc = self.index.store.get_document(doc_id)
                if doc and doc_id not in seen:
                    seen.add(doc_id)
                    hit = SearchHit(
                        doc_id,
                        doc_id,
                        doc.text,
                        nws.score or 0.0,
                        {"doc_id": doc_id, "source": doc.source, "title": doc.title},
                        "document",
                    )
                    out.append(_node(hit, True))
                continue
            for hit in self.index.search_chunks(
                query or nws.node.get_content(), self.chunks_per_doc, doc_ids=[doc_id]
            ):
                if hit.id not in seen:
                    seen.add(hit.id)
                    out.append(_node(hit, True))
        return out
