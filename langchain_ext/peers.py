"""LangChain's own summary retrievers, as ``cos eval`` peers (issue 28).

``MultiVectorPeer`` is ``MultiVectorRetriever`` as LangChain's documentation builds it for
summaries: one summary a document from the chain ``ChatPromptTemplate("Summarize the
following document:\\n\\n{doc}") | model | StrOutputParser()``, the summaries in a vector
store, the whole documents in a byte store by ``doc_id``; a query returns the documents of
the top-``k`` summaries. ``ParentDocumentPeer`` is ``ParentDocumentRetriever`` as its
class reference builds it: small chunks (``RecursiveCharacterTextSplitter(chunk_size=400)``)
searched, their parents returned, parents of 2,000 characters
(``RecursiveCharacterTextSplitter(chunk_size=2000)``, the reference's "larger chunk" mode:
two whole papers or stories do not fit an 8k context); it makes no model call. Both keep vectors in
``langchain_core``'s ``InMemoryVectorStore`` with e5 through
:class:`~langchain_ext.CoSLocalEmbeddings`; the model is ours as a LangChain chat model
(:class:`~langchain_ext.CoSChatModel`), metered.

Needs the ``peers`` extra (``langchain-classic``).

Examples:
    >>> from cos_integrations.research.peers import PeerSetup
    >>> setup = PeerSetup(llm=server.chat_model(), embedder=embedder)  # doctest: +SKIP
    >>> peer = MultiVectorPeer(setup)                       # doctest: +SKIP
    >>> await peer.abuild(docs)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_classic.retrievers import MultiVectorRetriever, ParentDocumentRetriever
from langchain_classic.storage import InMemoryByteStore, InMemoryStore
from langchain_core.documents import Document
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_text_splitters import RecursiveCharacterTextSplitter

from cos_integrations.research.peers import MeteredChatModel, PeerDoc, PeerSetup
from cos_integrations.serving.index import SearchHit

from .chat_model import CoSChatModel
from .embeddings import CoSLocalEmbeddings

__all__ = ["MultiVectorPeer", "ParentDocumentPeer", "SUMMARY_PROMPT"]

# LangChain's documentation's summary prompt for MultiVectorRetriever
SUMMARY_PROMPT = "Summarize the following document:\n\n{doc}"
ID_KEY = "doc_id"


def _documents(docs: Sequence[PeerDoc]) -> list[Document]:
    return [
        Document(page_content=d.text, metadata={ID_KEY: d.doc_id, "title": d.title}) for d in docs
    ]


def _hit_id(d: Document) -> str:
    # a parent chunk is its document's id and where it starts (add_start_index)
    start = d.metadata.get("start_index")
    doc_id = d.metadata.get(ID_KEY, "")
    return doc_id if start is None else f"{doc_id}@{start}"


def _hits(found: list[Document]) -> list[SearchHit]:
    return [
        SearchHit(
            id=_hit_id(d),
            doc_id=d.metadata.get(ID_KEY, ""),
            text=d.page_content,
            score=0.0,  # the retrievers return documents, not scores
            metadata={"title": d.metadata.get("title") or d.metadata.get(ID_KEY, "")},
            kind="doc",
        )
        for d in found
    ]


class MultiVectorPeer:
    """LangChain ``MultiVectorRetriever`` over one summary a document.

    Examples:
        >>> peer = MultiVectorPeer(setup)             # doctest: +SKIP
        >>> await peer.abuild(docs)  # doctest: +SKIP
    """

    def __init__(self, setup: PeerSetup) -> None:
        self.setup = setup
        self.model = CoSChatModel(model=MeteredChatModel(setup.llm, setup.meter, setup.record))
        self.retriever = MultiVectorRetriever(
            vectorstore=InMemoryVectorStore(CoSLocalEmbeddings(setup.embedder)),
            byte_store=InMemoryByteStore(),
            id_key=ID_KEY,
            search_kwargs={"k": setup.k},
        )

    async def abuild(self, docs: Sequence[PeerDoc]) -> None:
        parents = _documents(docs)
        chain = (
            {"doc": lambda d: d.page_content}
            | ChatPromptTemplate.from_template(SUMMARY_PROMPT)
            | self.model
            | StrOutputParser()
        )
        # one at a time: the embedded server decodes one sequence at a time on 2 cores
        summaries = await chain.abatch(parents, {"max_concurrency": 1})
        await self.retriever.vectorstore.aadd_documents(
            [
                Document(page_content=s, metadata={ID_KEY: d.metadata[ID_KEY]})
                for s, d in zip(summaries, parents, strict=True)
            ]
        )
        await self.retriever.docstore.amset([(d.metadata[ID_KEY], d) for d in parents])

    async def aretrieve(self, query: str) -> list[SearchHit]:
        return _hits(await self.retriever.ainvoke(query))


class ParentDocumentPeer:
    """LangChain ``ParentDocumentRetriever``: child chunks of 400 characters searched, their
    parent chunks of 2,000 characters back (a document shorter than that comes back whole).

    Examples:
        >>> peer = ParentDocumentPeer(setup)          # doctest: +SKIP
        >>> await peer.abuild(docs)  # doctest: +SKIP
    """

    def __init__(self, setup: PeerSetup) -> None:
        self.setup = setup
        self.retriever = ParentDocumentRetriever(
            vectorstore=InMemoryVectorStore(CoSLocalEmbeddings(setup.embedder)),
            docstore=InMemoryStore(),
            child_splitter=RecursiveCharacterTextSplitter(chunk_size=400),
            parent_splitter=RecursiveCharacterTextSplitter(chunk_size=2000, add_start_index=True),
            search_kwargs={"k": setup.k},
        )

    async def abuild(self, docs: Sequence[PeerDoc]) -> None:
        # the parents are split first, so their ids are the retriever's own
        await self.retriever.aadd_documents(_documents(docs))

    async def aretrieve(self, query: str) -> list[SearchHit]:
        return _hits(await self.retriever.ainvoke(query))
