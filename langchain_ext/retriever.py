"""The CoS fallback retriever for LangChain: summaries on a hit, full text on a miss."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.callbacks.manager import adispatch_custom_event, dispatch_custom_event
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import AliasChoices, ConfigDict, Field, PrivateAttr

from cos_integrations import ChainOfSummaries, CoSConfig, run_sync
from cos_integrations.index import CoSIndex, SearchHit
from cos_integrations.loaders import SourceDocument
from cos_integrations.retrieval import (
    DEFAULT_REJECT_ECHO,
    DEFAULT_REQUIRE_SUPPORT,
    DEFAULT_VERIFY_CHUNK,
    DEFAULT_VERIFY_ROUTE,
    FallbackRetriever,
    HitContext,
    RetrievalResult,
)

from .chat_model import as_chat_model
from .embeddings import as_embedder
from .transformer import document_id

__all__ = ["CoSFallbackRetriever"]

log = logging.getLogger(__name__)


def _to_document(hit: SearchHit, hit_flag: bool) -> Document:
    meta = {**hit.metadata, "cos_hit": hit_flag, "cos_kind": hit.kind, "score": hit.score}
    return Document(page_content=hit.text, metadata=meta, id=hit.id)


class CoSFallbackRetriever(BaseRetriever):
    """Answer from CoS summaries when they cover the query; otherwise from source chunks.

    A miss returns the best full-text chunks (``metadata["cos_hit"] = False``), queues a
    refinement job for the document, and dispatches a ``cos_cache_miss`` custom event to the
    run's callbacks. A hit returns the top-``k`` summaries (``cos_hit = True``).

    Setup:
        .. code-block:: python

            from langchain_ext import CoSFallbackRetriever, CoSLocalEmbeddings

            retriever = CoSFallbackRetriever.from_persist_dir(
                "./index", llm=chat_model, embeddings=CoSLocalEmbeddings(), k=4
            )

    Add documents (summarises new or changed ones; idempotent):
        .. code-block:: python

            retriever.add_documents(docs)        # or: await retriever.aadd_documents(docs)

    Retrieve:
        .. code-block:: python

            docs = retriever.invoke("When is rent due?")          # also ainvoke, batch
            docs = retriever.invoke("When is rent due?", k=2)

    Use in a chain:
        .. code-block:: python

            chain = retriever | format_docs | prompt | chat_model
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    # the index directory: `persist_dir`, as LlamaIndex and the `from_persist_dir`
    # constructors call it; `index_path` (the name before 0.2) is still accepted
    persist_dir: str = Field(validation_alias=AliasChoices("persist_dir", "index_path"))
    k: int = 4
    threshold: float | None = None  # None: the index's (calibrated, else 0.80)
    judge: Literal["score", "llm"] = "score"
    hit_context: HitContext | None = None  # judge llm: focused; score: k summaries
    reject_echo: bool = DEFAULT_REJECT_ECHO
    require_support: bool = DEFAULT_REQUIRE_SUPPORT
    verify_chunk: bool = DEFAULT_VERIFY_CHUNK
    verify_route: bool | None = DEFAULT_VERIFY_ROUTE
    refine_on_miss: Literal["queue", "background", "off"] = "queue"
    chroma_url: str | None = None
    # the store on a server (postgresql://...); None: the manifest's, else the index's file
    store_url: str | None = Field(default=None, repr=False)
    cos_config: CoSConfig | None = None
    concurrency: int = 2

    _llm: Any = PrivateAttr(default=None)
    _embeddings: Any = PrivateAttr(default=None)
    _index: CoSIndex | None = PrivateAttr(default=None)
    _core: FallbackRetriever | None = PrivateAttr(default=None)
    _core_spec: tuple = PrivateAttr(default=())

    def __init__(self, *, llm: Any = None, embeddings: Any = None, **data: Any) -> None:
        super().__init__(**data)
        if self.judge == "llm" and llm is None:
            raise ValueError('judge="llm" needs llm=; pass a chat model or use judge="score"')
        self._llm = llm
        self._embeddings = embeddings

    @classmethod
    def from_persist_dir(
        cls, path: str | Path, *, llm: Any = None, embeddings: Any = None, **kwargs: Any
    ) -> CoSFallbackRetriever:
        """Open (or create) the index at ``path`` (from ``cos ingest`` or ``add_documents``)."""
        return cls(persist_dir=str(path), llm=llm, embeddings=embeddings, **kwargs)

    @property
    def index_path(self) -> str:
        """The old name of :attr:`persist_dir`."""
        return self.persist_dir

    @property
    def index(self) -> CoSIndex:
        if self._index is None:
            self._index = CoSIndex(
                self.persist_dir,
                embedder=as_embedder(self._embeddings),
                config=self.cos_config,
                chroma_url=self.chroma_url,
                store_url=self.store_url,
            )
        return self._index

    @property
    def hits(self) -> int:
        return self.core.hits

    @property
    def misses(self) -> int:
        return self.core.misses

    # ------------------------------------------------------------------ writing
    def add_documents(self, documents: list[Document], **kwargs: Any) -> list[str]:
        """Sync wrapper of :meth:`aadd_documents`."""
        return run_sync(self.aadd_documents(documents, **kwargs))

    async def aadd_documents(self, documents: list[Document], **kwargs: Any) -> list[str]:
        """Summarise new or changed documents and write the summary and chunk collections.

        A changed document's vectors are replaced (delete, then add). Returns the ids of
        documents now indexed; failures are logged and retried on the next call.
        """
        if self._llm is None:
            raise ValueError("add_documents needs llm= to write summaries")
        engine = ChainOfSummaries(
            as_chat_model(self._llm, kwargs.get("config")), self.cos_config or self.index.config
        )
        sources = [
            SourceDocument(
                doc_id=document_id(d),
                text=d.page_content,
                source=str((d.metadata or {}).get("source", "")),
                title=str((d.metadata or {}).get("title", "")),
            )
            for d in documents
        ]
        report = await self.index.aingest(sources, engine, concurrency=self.concurrency)
        for doc_id, why in {**report.failed, **report.skipped}.items():
            log.warning("not indexed: %s: %s", doc_id, why)
        return [*report.summarized, *report.unchanged]

    # ------------------------------------------------------------------ reading
    @property
    def core(self) -> FallbackRetriever:
        """The one core retriever behind every query (its counters are this retriever's).

        Fields changed after construction apply to the next query: the thresholds and
        checks are copied over each time; a new ``judge``, ``hit_context`` or
        ``refine_on_miss`` builds a new core that keeps the counters."""
        spec = (self.judge, self.hit_context, self.refine_on_miss)
        if self._core is None or self._core_spec != spec:
            old = self._core
            self._core = FallbackRetriever(
                self.index,
                llm=as_chat_model(self._llm) if self._llm is not None else None,
                judge=self.judge,
                refine_on_miss=self.refine_on_miss,
                hit_context=self.hit_context,
                refine_config=self.cos_config,
            )
            self._core_spec = spec
            if old is not None:
                self._core.hits, self._core.misses = old.hits, old.misses
                old.close()
        core = self._core
        core.k, core.threshold = self.k, self.threshold
        core.reject_echo, core.require_support = self.reject_echo, self.require_support
        core.verify_chunk, core.verify_route = self.verify_chunk, self.verify_route
        return core

    def _run_llm(self, run_manager: Any) -> Any:
        """The model for this query's judge, under the run's callbacks (nested runs)."""
        if self._llm is None:
            return None
        return as_chat_model(self._llm, {"callbacks": run_manager.get_child()})

    def _documents(self, res: RetrievalResult) -> list[Document]:
        return [_to_document(h, res.hit) for h in res.items]

    @staticmethod
    def _event(res: RetrievalResult) -> dict[str, Any]:
        return {
            "query": res.query,
            "reason": res.reason,
            "job_id": res.job_id,
            "doc_ids": [h.doc_id for h in res.items],
            "not_in_source": res.not_in_source,
        }

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        k = int(kwargs.get("k", self.k))
        res = self.core.retrieve(query, k=k, llm=self._run_llm(run_manager))
        if not res.hit and (res.items or res.not_in_source):
            dispatch_custom_event(
                "cos_cache_miss", self._event(res), config={"callbacks": run_manager.get_child()}
            )
        return self._documents(res)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        k = int(kwargs.get("k", self.k))
        res = await self.core.aretrieve(query, k=k, llm=self._run_llm(run_manager))
        if not res.hit and (res.items or res.not_in_source):
            await adispatch_custom_event(
                "cos_cache_miss", self._event(res), config={"callbacks": run_manager.get_child()}
            )
        return self._documents(res)

    def close(self) -> None:
        """Stop the background refiner, if one runs (queued jobs stay in the store)."""
        if self._core is not None:
            self._core.close()
