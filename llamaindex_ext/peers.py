"""LlamaIndex's own summary retrievers, as ``cos eval`` peers (issue 28).

``DocSummaryPeer`` is ``DocumentSummaryIndex`` (one summary a document, made by its own
``tree_summarize`` prompt and ``DEFAULT_SUMMARY_QUERY``; the embedding retriever returns
every chunk of the top-``k`` documents). ``RaptorPeer`` is the RAPTOR pack's
``RaptorRetriever`` (chunks clustered level by level, each cluster summarised with the
pack's own prompt, the collapsed tree searched for the top-``k`` nodes). Both call the model
through LlamaIndex's ``OpenAILike`` on the model's OpenAI-compatible endpoint, metered by an
``httpx`` hook, embed with e5 through :class:`~llamaindex_ext.CoSLocalEmbedding`, and split
with LlamaIndex's ``SentenceSplitter`` at the size of our index's chunks.

Needs the ``peers`` extra (``llama-index-packs-raptor``, ``llama-index-llms-openai-like``).
LlamaIndex deprecated every pack in 2026 and ``llama-index-core`` 0.14.21 dropped
``llama_index.core.llama_pack``, which the last RAPTOR pack (0.4.2) still imports for the
base class of ``RaptorPack`` alone; :func:`raptor_retriever_class` puts core 0.14.15's
two-method ``BaseLlamaPack`` back under that name when it is missing, and uses the pack's
``RaptorRetriever`` unchanged.

Examples:
    >>> from cos_integrations.research.peers import PeerSetup
    >>> setup = PeerSetup(llm=server.chat_model(), embedder=embedder)  # doctest: +SKIP
    >>> peer = DocSummaryPeer(setup)                       # doctest: +SKIP
    >>> await peer.abuild(docs)  # doctest: +SKIP
    >>> hits = await peer.aretrieve("Who won Super Bowl 50?")  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import httpx
from llama_index.core import Document, DocumentSummaryIndex
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import NodeWithScore
from llama_index.llms.openai_like import OpenAILike

from cos_integrations.research.peers import PeerDoc, PeerSetup, RecordingTransport
from cos_integrations.serving.index import SearchHit

from .embeddings import CoSLocalEmbedding

__all__ = ["DocSummaryPeer", "RaptorPeer", "peer_llm", "raptor_retriever_class"]

# a summary of ours is 120 words; a framework default asks for no limit, and a small model
# can run on: this caps a runaway reply, not a normal one
PEER_MAX_TOKENS = 512


def peer_llm(setup: PeerSetup) -> OpenAILike:
    """LlamaIndex's OpenAI-compatible LLM class on the model's endpoint, every response's
    usage added to ``setup.meter``, every completion kept in (or replayed from)
    ``setup.record``."""
    ep = setup.endpoint()
    timeout = httpx.Timeout(900.0, connect=10.0)  # 2 CPU cores: a long summary takes minutes
    # a stopped build resumes (CallRecord); without a record httpx's own transport
    transport = RecordingTransport(setup.record) if setup.record is not None else None
    return OpenAILike(
        model=ep["model"],
        api_base=ep["base_url"],
        api_key=ep["api_key"],
        is_chat_model=True,
        context_window=setup.context_window,
        max_tokens=PEER_MAX_TOKENS,
        temperature=0.0,
        timeout=900.0,
        http_client=httpx.Client(
            timeout=timeout, transport=transport, event_hooks={"response": [setup.meter.hook]}
        ),
        async_http_client=httpx.AsyncClient(
            timeout=timeout, transport=transport, event_hooks={"response": [setup.meter.ahook]}
        ),
    )


def raptor_retriever_class() -> type:
    """The RAPTOR pack's ``RaptorRetriever``, importable on today's ``llama-index-core``."""
    import sys
    import types

    try:
        import llama_index.core.llama_pack.base  # noqa: F401  (core < 0.14.21)
    except ImportError:
        from abc import abstractmethod

        class BaseLlamaPack:  # as in llama-index-core 0.14.15
            @abstractmethod
            def get_modules(self) -> dict[str, Any]:
                """Get modules."""

            @abstractmethod
            def run(self, *args: Any, **kwargs: Any) -> Any:
                """Run."""

        pkg = types.ModuleType("llama_index.core.llama_pack")
        base = types.ModuleType("llama_index.core.llama_pack.base")
        base.BaseLlamaPack = BaseLlamaPack  # type: ignore[attr-defined]
        pkg.BaseLlamaPack = BaseLlamaPack  # type: ignore[attr-defined]
        pkg.base = base  # type: ignore[attr-defined]
        sys.modules.setdefault("llama_index.core.llama_pack", pkg)
        sys.modules.setdefault("llama_index.core.llama_pack.base", base)
    from llama_index.packs.raptor import RaptorRetriever

    return RaptorRetriever


def _splitter(setup: PeerSetup) -> SentenceSplitter:
    # our chunks are ~chunk_words words with a fifth shared; LlamaIndex counts tokens
    size = int(setup.chunk_words * 4 / 3)
    return SentenceSplitter(chunk_size=size, chunk_overlap=size // 5)


def _documents(docs: Sequence[PeerDoc]) -> list[Document]:
    # the title is shown to the model, not embedded (as in our own index)
    return [
        Document(
            text=d.text,
            id_=d.doc_id,
            metadata={"title": d.title},
            excluded_embed_metadata_keys=["title"],
        )
        for d in docs
    ]


def _hits(nodes: list[NodeWithScore], kind: str) -> list[SearchHit]:
    out = []
    for n in nodes:
        node = n.node
        doc_id = node.ref_doc_id or ""
        level = node.metadata.get("level")
        out.append(
            SearchHit(
                id=node.node_id,
                doc_id=doc_id,
                text=node.get_content(),
                score=float(n.score or 0.0),
                metadata={"title": node.metadata.get("title") or doc_id or "summary"},
                kind="summary" if level is not None and not doc_id else kind,
            )
        )
    return out


class DocSummaryPeer:
    """LlamaIndex ``DocumentSummaryIndex`` with its embedding retriever.

    Examples:
        >>> peer = DocSummaryPeer(setup)             # doctest: +SKIP
        >>> await peer.abuild(docs)  # doctest: +SKIP
    """

    def __init__(self, setup: PeerSetup) -> None:
        self.setup = setup
        self.llm = peer_llm(setup)
        self.embed_model = CoSLocalEmbedding(embedder=setup.embedder)
        self.index: DocumentSummaryIndex | None = None

    async def abuild(self, docs: Sequence[PeerDoc]) -> None:
        # the index builds in its constructor, synchronously: off the event loop
        self.index = await asyncio.to_thread(
            DocumentSummaryIndex.from_documents,
            _documents(docs),
            llm=self.llm,
            embed_model=self.embed_model,
            transformations=[_splitter(self.setup)],
            show_progress=False,
        )
        self.retriever: Any = self.index.as_retriever(
            retriever_mode="embedding", similarity_top_k=self.setup.k
        )

    async def aretrieve(self, query: str) -> list[SearchHit]:
        if self.index is None:
            raise RuntimeError("abuild() first")
        return _hits(await self.retriever.aretrieve(query), "chunk")


class RaptorPeer:
    """The RAPTOR pack's ``RaptorRetriever`` (collapsed-tree mode, its default depth 3).

    Examples:
        >>> peer = RaptorPeer(setup)                 # doctest: +SKIP
        >>> await peer.abuild(docs)  # doctest: +SKIP
    """

    def __init__(self, setup: PeerSetup) -> None:
        RaptorRetriever = raptor_retriever_class()
        self.setup = setup
        # built empty: given documents it would insert them with asyncio.run(), which
        # cannot run inside our event loop; abuild() awaits the same insert()
        self.retriever = RaptorRetriever(
            [],
            llm=peer_llm(setup),
            embed_model=CoSLocalEmbedding(embedder=setup.embedder),
            transformations=[_splitter(setup)],
            similarity_top_k=setup.k,
            mode="collapsed",
        )
        self.retriever.summary_module.show_progress = False

    async def abuild(self, docs: Sequence[PeerDoc]) -> None:
        """Insert ``docs``: the pack's own tree, the same clusters for the same vectors.

        The pack seeds Python's ``random`` with its ``RANDOM_SEED`` "for reproducibility",
        but its UMAP draws from numpy's global generator and, unseeded, runs in parallel
        threads, so the clusters (and with them every summary prompt) change from run to
        run, and a stopped build could not resume from its call record. The build runs
        with numpy's generator seeded with the pack's seed and one numba thread (what UMAP
        itself does when given a seed); both are put back afterwards. On the 200-document
        collection `cos eval` resumed a stopped build with all 83 recorded calls replayed;
        a script that embedded the chunks its own way replayed 12, so a resume needs the
        same vectors too (BENCHMARKS.md, "A collection of 200 documents")."""
        import numba
        import numpy as np
        from llama_index.packs.raptor.clustering import RANDOM_SEED

        state, threads = np.random.get_state(), numba.get_num_threads()
        np.random.seed(RANDOM_SEED)
        numba.set_num_threads(1)
        try:
            await self.retriever.insert(_documents(docs))
        finally:
            numba.set_num_threads(threads)
            np.random.set_state(state)

    async def aretrieve(self, query: str) -> list[SearchHit]:
        return _hits(await self.retriever.aretrieve(query), "chunk")
