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
from langchain_core.runnables import RunnableConfig
from pydantic import ConfigDict, Field, PrivateAttr

from cos_integrations import ChainOfSummaries, CoSConfig
from cos_integrations.defaults import DEFAULT_K, DEFAULT_REFINE_TEACH, RefineTeach
from cos_integrations.loaders import SourceDocument
from cos_integrations.serving.hit_rule import HitRule
from cos_integrations.serving.index import CoSIndex, SearchHit
from cos_integrations.serving.retrieval import FallbackRetriever, RetrievalResult, item_metadata
from cos_integrations.serving.router import DEFAULT_MAX_ERROR
from cos_integrations.sync import run_sync

from .chat_model import as_chat_model
from .embeddings import as_embedder
from .transformer import document_id

__all__ = ["CoSFallbackRetriever"]

# the run config a chat model call is made under, and an answer (None: the reply was empty)
Config = RunnableConfig | None
Answer = str | None
log = logging.getLogger(__name__)


def _to_document(res: RetrievalResult, hit: SearchHit, citation: str) -> Document:
    meta = item_metadata(res, hit, citation) | {"score": hit.score}
    return Document(page_content=hit.text, metadata=meta, id=hit.id)


def _item(doc: Document) -> SearchHit:
    """A returned document as the core's item again."""
    meta = dict(doc.metadata)
    kind = str(meta.get("cos_kind", "chunk"))
    score = float(meta.get("score") or 0.0)
    return SearchHit(doc.id or "", str(meta.get("doc_id", "")), doc.page_content, score, meta, kind)


class CoSFallbackRetriever(BaseRetriever):
    """Answer from the CoS summary's route when it covers the query; otherwise from source
    chunks.

    A hit (``metadata["cos_hit"] = True``) returns what it was decided on: with a model
    (``llm``), the sentences of the best summary and its document's best chunk that the
    model read and quoted its answer from; without one, the best summary and its
    document's ``k - 1`` best chunks. A miss returns the best full-text chunks
    (``cos_hit = False``), queues a refinement job for the document, and dispatches a
    ``cos_cache_miss`` custom event to the run's callbacks.

    Setup:
        .. code-block:: python

            from langchain_ext import CoSFallbackRetriever, CoSLocalEmbeddings

            from cos_integrations import HitRule

            retriever = CoSFallbackRetriever.from_persist_dir(
                "./index", llm=chat_model, embeddings=CoSLocalEmbeddings(), k=2,
                rule=HitRule(judge="llm"),   # None: the index's recorded rule
            )

    Add documents (summarises new or changed ones; idempotent):
        .. code-block:: python

            retriever.add_documents(docs)        # or: await retriever.aadd_documents(docs)

    Retrieve:
        .. code-block:: python

            docs = retriever.invoke("When is rent due?")          # also ainvoke, batch
            docs = retriever.invoke("When is rent due?", k=4)

    Use in a chain:
        .. code-block:: python

            chain = retriever | format_docs | prompt | chat_model
    """

    # an unknown keyword is an error, not a silent no-op (0.2's hit-rule fields are rule=)
    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    # the index directory: `persist_dir`, as LlamaIndex and the `from_persist_dir`
    # constructors call it
    persist_dir: str
    k: int = DEFAULT_K
    # the hit rule; None: the index's recorded one (cos_integrations.HitRule)
    rule: HitRule | None = None
    refine_on_miss: Literal["queue", "background", "off"] = "queue"
    # the share of served summary answers that may disagree with the source (the router,
    # cos_integrations.serving.router); None: no router, the hit rule alone decides
    max_error: float | None = DEFAULT_MAX_ERROR
    # how the background refiner teaches a summary a missed query
    refine_teach: RefineTeach = DEFAULT_REFINE_TEACH
    chroma_url: str | None = None
    # the store on a server (postgresql://...); None: the manifest's, else the index's file
    store_url: str | None = Field(default=None, repr=False)
    # the ingest config (add_documents; also the background refiner's), as the transformer
    # and the core call it
    config: CoSConfig | None = None
    concurrency: int = 2

    _llm: Any = PrivateAttr(default=None)
    _embeddings: Any = PrivateAttr(default=None)
    _index: CoSIndex | None = PrivateAttr(default=None)
    _core: FallbackRetriever | None = PrivateAttr(default=None)
    _core_spec: tuple = PrivateAttr(default=())

    def __init__(self, *, llm: Any = None, embeddings: Any = None, **data: Any) -> None:
        super().__init__(**data)
        if self.rule is not None and self.rule.judge == "llm" and llm is None:
            raise ValueError('judge="llm" needs llm=; pass a chat model or use judge="score"')
        self._llm = llm
        self._embeddings = embeddings

    @property
    def hit_rule(self) -> HitRule:
        """The hit rule in force: ``rule``, else the index's, its judge resolved for this
        retriever (:meth:`HitRule.for_model`: the model's when it has ``llm``)."""
        return (self.rule or self.index.hit_rule).for_model(self._llm is not None)

    @classmethod
    def from_persist_dir(
        cls, path: str | Path, *, llm: Any = None, embeddings: Any = None, **kwargs: Any
    ) -> CoSFallbackRetriever:
        """Open (or create) the index at ``path`` (from ``cos ingest`` or ``add_documents``)."""
        return cls(persist_dir=str(path), llm=llm, embeddings=embeddings, **kwargs)

    @property
    def index(self) -> CoSIndex:
        if self._index is None:
            self._index = CoSIndex(
                self.persist_dir,
                embedder=as_embedder(self._embeddings),
                config=self.config,
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
            as_chat_model(self._llm, kwargs.get("config")), self.config or self.index.config
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

        Fields changed after construction apply to the next query: ``k`` and the hit rule
        are copied over each time; a new ``refine_on_miss`` or ``refine_teach`` builds a new
        core that keeps the counters."""
        spec = (self.refine_on_miss, self.refine_teach, self.max_error)
        if self._core is None or self._core_spec != spec:
            old = self._core
            self._core = FallbackRetriever(
                self.index,
                llm=as_chat_model(self._llm) if self._llm is not None else None,
                refine_on_miss=self.refine_on_miss,
                refine_config=self.config,
                refine_teach=self.refine_teach,
                max_error=self.max_error,
            )
            self._core_spec = spec
            if old is not None:
                self._core.hits, self._core.misses = old.hits, old.misses
                old.close()
        core = self._core
        core.k, core.rule = self.k, self.hit_rule
        return core

    def _run_llm(self, run_manager: Any) -> Any:
        """The model for this query's judge, under the run's callbacks (nested runs)."""
        if self._llm is None:
            return None
        return as_chat_model(self._llm, {"callbacks": run_manager.get_child()})

    def documents(self, res: RetrievalResult) -> list[Document]:
        """A core result as the documents ``invoke`` returns (:func:`item_metadata`)."""
        cites = {c.doc_id: str(c) for c in res.citations}
        return [_to_document(res, h, cites[h.doc_id]) for h in res.items]

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
        return self.documents(res)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        k = int(kwargs.get("k", self.k))
        res = await self.core.aretrieve(query, k=k, llm=self._run_llm(run_manager))
        if not res.hit and (res.items or res.not_in_source):
            await adispatch_custom_event(
                "cos_cache_miss", self._event(res), config={"callbacks": run_manager.get_child()}
            )
        return self.documents(res)

    def remember(self, question: str, documents: list[Document], answer: str | None) -> bool:
        """Sync wrapper of :meth:`aremember`."""
        return run_sync(self.aremember(question, documents, answer), inline=True)

    async def aremember(self, question: str, documents: list[Document], answer: str | None) -> bool:
        """Keep ``answer``, given ``question``'s miss from ``documents`` (the source chunks
        this retriever returned), as a verified answer when a sentence of them holds it
        (:meth:`FallbackRetriever.aremember`): the next ask of it is served with no model
        call. Returns whether it was kept."""
        items = [_item(d) for d in documents]
        hit = bool(documents[0].metadata.get("cos_hit")) if documents else False
        return await self.core.aremember_items(question, items, answer, hit=hit) is not None

    def answer(self, query: str, docs: list[Document], llm: Any, config: Config = None) -> Answer:
        """Sync wrapper of :meth:`aanswer`."""
        return run_sync(self.aanswer(query, docs, llm, config), inline=True)

    async def aanswer(
        self, query: str, docs: list[Document], llm: Any, config: Config = None
    ) -> Answer:
        """Answer ``query``'s miss from ``docs`` (the source chunks this retriever
        returned) with the product's own answer call through ``llm`` (a LangChain chat
        model; ``config``'s callbacks see the call), and keep the answer as
        :meth:`aremember` does (:meth:`FallbackRetriever.aanswer_items`): the answer and
        the prompt tokens ``cos eval``'s core row has for the same ask.

        Examples:
            >>> docs = await retriever.ainvoke("When is rent due?")           # doctest: +SKIP
            >>> await retriever.aanswer("When is rent due?", docs, chat_model)  # doctest: +SKIP
            'the 1st'
        """
        items = [_item(d) for d in docs]
        hit = bool(docs[0].metadata.get("cos_hit")) if docs else False
        model = as_chat_model(llm, config)
        answer, _ = await self.core.aanswer_items(query, items, model, hit=hit)
        return answer

    def close(self) -> None:
        """Stop the background refiner, if one runs (queued jobs stay in the store)."""
        if self._core is not None:
            self._core.close()
