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

from cos_integrations import CoSConfig
from cos_integrations.defaults import DEFAULT_K, DEFAULT_REFINE_TEACH, RefineTeach
from cos_integrations.embedded.embeddings import LocalEmbedder
from cos_integrations.serving.hit_rule import HitRule
from cos_integrations.serving.index import SUMMARIES, CoSIndex, SearchHit, read_manifest
from cos_integrations.serving.retrieval import (
    FallbackRetriever,
    RetrievalResult,
    cite,
    item_metadata,
)
from cos_integrations.serving.router import DEFAULT_MAX_ERROR
from cos_integrations.sync import run_sync

from .embeddings import as_embedder
from .llm import as_chat_model

__all__ = ["CoSFallbackRetriever", "CoSCacheMissEvent", "CoSExpandToSourcePostprocessor"]

log = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)


class CoSCacheMissEvent(BaseEvent):
    """Emitted for every cache miss: the query, the documents consulted, the refine job.

    Examples:
        >>> event = CoSCacheMissEvent(query="When is rent due?", reason="best similarity "
        ...                           "0.71 < 0.8", doc_ids=["lease.md"], job_id=3)
        >>> event.class_name(), event.job_id
        ('CoSCacheMissEvent', 3)
    """

    query: str
    reason: str
    doc_ids: list[str]
    job_id: int | None = None
    not_in_source: bool = False

    @classmethod
    def class_name(cls) -> str:
        return "CoSCacheMissEvent"


def _node(res: RetrievalResult, hit: SearchHit, citation: str) -> NodeWithScore:
    return _text_node(hit, item_metadata(res, hit, citation))


def _item(nws: NodeWithScore) -> SearchHit:
    """A returned node as the core's item again."""
    meta = dict(nws.node.metadata)
    doc_id = str(meta.get("doc_id") or nws.node.ref_doc_id or "")
    kind = str(meta.get("cos_kind", "chunk"))
    return SearchHit(nws.node.node_id, doc_id, nws.node.get_content(), nws.score or 0.0, meta, kind)


def _source_node(hit: SearchHit) -> NodeWithScore:
    """A hit's source text, as the expand postprocessor returns it (still a hit)."""
    meta = {**hit.metadata, "cos_hit": True, "cos_kind": hit.kind}
    return _text_node(hit, meta | {"cos_citation": str(cite(hit, True))})


def _text_node(hit: SearchHit, meta: dict[str, Any]) -> NodeWithScore:
    node = TextNode(
        id_=hit.id,
        text=hit.text,
        metadata=meta,
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=hit.doc_id)},
        excluded_embed_metadata_keys=list(meta),
        excluded_llm_metadata_keys=[k for k in meta if k not in ("title", "source")],
    )
    return NodeWithScore(node=node, score=hit.score)


def _from_settings(name: str) -> Any:
    """``Settings.llm`` or ``Settings.embed_model``; a clear error when none can be had
    (LlamaIndex resolves an unset one to OpenAI's, which needs a key)."""
    from llama_index.core import Settings

    try:
        return getattr(Settings, name)
    except Exception as exc:  # LlamaIndex raises ValueError/ImportError from its resolver
        raise ValueError(
            f"no {name}= given and Settings.{name} is not usable ({exc}); pass {name}= "
            f"or set Settings.{name}"
        ) from exc


def _core_embedder(persist_dir: str | Path) -> bool | None:
    """Whether the index's manifest names an embedder the core opens by itself (``None``:
    no manifest yet, so nothing says which embedder wrote the vectors)."""
    try:
        name = (read_manifest(persist_dir) or {})["embedding"]["name"]
    except (KeyError, TypeError):
        return None
    return name == LocalEmbedder.name or name.startswith("hashing-bow-")


def _check_collection(vector_store: Any) -> None:
    """A vector store given to the retriever must be over the index's summary collection."""
    if vector_store is None:
        return
    collection = getattr(vector_store, "_collection", None) or getattr(
        vector_store, "chroma_collection", None
    )
    name = getattr(collection, "name", None)
    if name != SUMMARIES:
        raise ValueError(
            f"the vector store's collection is {name!r}; the retriever searches the index's "
            f"summary collection {SUMMARIES!r}: write the pipeline's summaries there "
            f'(client.get_or_create_collection("{SUMMARIES}", ...)) or leave vector_store out'
        )


class CoSFallbackRetriever(BaseRetriever):
    """On a hit, what the hit was decided on (with a model, the sentences of the best
    summary and its document's best chunk that the model quoted its answer from; without
    one, the best summary and its document's best chunks); on a miss, source chunks, a
    refine job and a :class:`CoSCacheMissEvent`.

    Setup:
        .. code-block:: python

            from llamaindex_ext import CoSFallbackRetriever, CoSLocalEmbedding

            from cos_integrations import HitRule

            retriever = CoSFallbackRetriever.from_defaults(
                persist_dir="./index", llm=llm, similarity_top_k=2,
                rule=HitRule(judge="llm"),   # None: the index's recorded rule
            )   # llm / embed_model default to Settings where needed

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
        similarity_top_k: int = DEFAULT_K,
        rule: HitRule | None = None,
        refine_on_miss: Literal["queue", "background", "off"] = "queue",
        refine_config: CoSConfig | None = None,
        refine_teach: RefineTeach = DEFAULT_REFINE_TEACH,
        max_error: float | None = DEFAULT_MAX_ERROR,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self.index = index
        self.similarity_top_k = similarity_top_k  # read on every query
        self._chat = as_chat_model(llm) if llm is not None else None
        self.core = FallbackRetriever(
            index,
            llm=self._chat,
            k=similarity_top_k,
            rule=rule,
            refine_on_miss=refine_on_miss,
            refine_config=refine_config,
            refine_teach=refine_teach,
            max_error=max_error,
        )

    @property
    def rule(self) -> HitRule:
        """The hit rule in force (the one given, else the index's); assign a new one to
        change it for the next query."""
        return self.core.rule

    @rule.setter
    def rule(self, rule: HitRule | None) -> None:
        self.core.rule = rule

    @classmethod
    def from_defaults(
        cls,
        persist_dir: str | Path,
        *,
        llm: Any = None,
        embed_model: Any = None,
        chroma_url: str | None = None,
        store_url: str | None = None,
        vector_store: Any = None,
        **kwargs: Any,
    ) -> CoSFallbackRetriever:
        """Open an index the LlamaIndex way: ``llm`` and ``embed_model`` default to
        ``Settings.llm`` / ``Settings.embed_model`` where the retriever needs them.
        ``vector_store``: the ``ChromaVectorStore`` your pipeline wrote the summaries to; the
        retriever searches the index's own summary collection (``cos_summaries``, the one
        the transform's pipeline writes), so a store over another collection is an error
        naming the expected one, never a silent empty search.

        The model is needed for a rule with ``judge="llm"`` and ``refine_on_miss="background"``. The
        embed model: the one the index's manifest names when the core can rebuild it (the
        embedded e5, the hashing embedder), so a ``Settings.embed_model`` meant for other
        indexes never searches this one; ``Settings.embed_model`` when the manifest names
        another (an error if it is unset); and with no manifest yet (a pipeline wrote the
        collection), ``Settings.embed_model`` if one is usable, else e5.

        Examples:
            >>> from llama_index.core import Settings              # doctest: +SKIP
            >>> Settings.llm = my_llm                              # doctest: +SKIP
            >>> retriever = CoSFallbackRetriever.from_defaults(    # doctest: +SKIP
            ...     persist_dir="./index", rule=HitRule(judge="llm"))
        """
        _check_collection(vector_store)
        rule = kwargs.get("rule")
        if rule is None:  # the index's recorded rule (HitRule() when none is)
            recorded = (read_manifest(persist_dir) or {}).get("hit_rule")
            rule = HitRule.from_record(recorded) if recorded else HitRule()
        judge = rule.judge
        needs_llm = judge == "llm" or kwargs.get("refine_on_miss") == "background"
        if llm is None and needs_llm:
            llm = _from_settings("llm")
        elif llm is None and judge is None:  # the model judge when Settings has a model
            try:
                llm = _from_settings("llm")
            except ValueError:
                llm = None  # none usable: the similarity decides (HitRule.for_model)
        if embed_model is None:
            own = _core_embedder(persist_dir)
            if own is False:
                embed_model = _from_settings("embed_model")
            elif own is None:  # no manifest yet (e.g. a pipeline wrote the collection)
                try:
                    embed_model = _from_settings("embed_model")
                except ValueError:
                    embed_model = None  # the core's default, e5
        return cls.from_persist_dir(
            persist_dir,
            llm=llm,
            embed_model=embed_model,
            chroma_url=chroma_url,
            store_url=store_url,
            **kwargs,
        )

    @classmethod
    def from_persist_dir(
        cls,
        persist_dir: str | Path,
        *,
        llm: Any = None,
        embed_model: Any = None,
        chroma_url: str | None = None,
        store_url: str | None = None,
        **kwargs: Any,
    ) -> CoSFallbackRetriever:
        """Reopen an index written by ``cos ingest`` or by a pipeline with the transform
        (``store_url``: its store on a server, else the manifest's or the index's file)."""
        index = CoSIndex(
            persist_dir,
            embedder=as_embedder(embed_model),
            chroma_url=chroma_url,
            store_url=store_url,
        )
        return cls(index, llm=llm, **kwargs)

    @property
    def hits(self) -> int:
        return self.core.hits

    @property
    def misses(self) -> int:
        return self.core.misses

    def _finish(self, res: RetrievalResult) -> list[NodeWithScore]:
        if not res.hit and (res.items or res.not_in_source):
            dispatcher.event(
                CoSCacheMissEvent(
                    query=res.query,
                    reason=res.reason,
                    doc_ids=[h.doc_id for h in res.items],
                    job_id=res.job_id,
                    not_in_source=res.not_in_source,
                )
            )
        cites = {c.doc_id: str(c) for c in res.citations}
        return [_node(res, h, cites[h.doc_id]) for h in res.items]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        res = self.core.retrieve(query_bundle.query_str, k=self.similarity_top_k)
        return self._finish(res)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        res = await self.core.aretrieve(query_bundle.query_str, k=self.similarity_top_k)
        return self._finish(res)

    def remember(self, query: str, nodes: list[NodeWithScore], answer: str | None) -> bool:
        """Sync wrapper of :meth:`aremember`."""
        return run_sync(self.aremember(query, nodes, answer), inline=True)

    async def aremember(self, query: str, nodes: list[NodeWithScore], answer: str | None) -> bool:
        """Keep ``answer``, given ``query``'s miss from ``nodes`` (the source chunks this
        retriever returned), as a verified answer when a sentence of them holds it
        (:meth:`FallbackRetriever.aremember`): the next ask of it is served with no model
        call. Returns whether it was kept."""
        items = [_item(n) for n in nodes]
        hit = any(bool(n.node.metadata.get("cos_hit")) for n in nodes)
        return await self.core.aremember_items(query, items, answer, hit=hit) is not None

    def answer(self, query: str, nodes: list[NodeWithScore], llm: Any) -> str | None:
        """Sync wrapper of :meth:`aanswer`."""
        return run_sync(self.aanswer(query, nodes, llm), inline=True)

    async def aanswer(self, query: str, nodes: list[NodeWithScore], llm: Any) -> str | None:
        """Answer ``query``'s miss from ``nodes`` (the source chunks this retriever
        returned) with the product's own answer call through ``llm`` (a LlamaIndex ``LLM``,
        whose callback manager sees the call, or a core model), and keep the answer as
        :meth:`aremember` does (:meth:`FallbackRetriever.aanswer_items`): the answer and
        the prompt tokens ``cos eval``'s core row has for the same ask.

        Examples:
            >>> nodes = await retriever.aretrieve("When is rent due?")          # doctest: +SKIP
            >>> await retriever.aanswer("When is rent due?", nodes, Settings.llm)  # doctest: +SKIP
            'the 1st'
        """
        items = [_item(n) for n in nodes]
        hit = any(bool(n.node.metadata.get("cos_hit")) for n in nodes)
        answer, _ = await self.core.aanswer_items(query, items, as_chat_model(llm), hit=hit)
        return answer

    def close(self) -> None:
        """Stop the background refiner, if any (queued jobs stay in the store)."""
        self.core.close()


class CoSExpandToSourcePostprocessor(BaseNodePostprocessor):
    """Replace summary nodes by their source's best chunks (or the whole document).

    Examples:
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
                    out.append(_source_node(hit))
                continue
            for hit in self.index.search_chunks(
                query or nws.node.get_content(), self.chunks_per_doc, doc_ids=[doc_id]
            ):
                if hit.id not in seen:
                    seen.add(hit.id)
                    out.append(_source_node(hit))
        return out
