"""LangChain's own standard retriever suite against CoSFallbackRetriever (offline)."""

import asyncio
import atexit
import shutil
import tempfile
from functools import lru_cache

from fakes import ScriptedFakeModel, make_document
from langchain_tests.integration_tests import RetrieversIntegrationTests

from cos_integrations import ChainOfSummaries, CoSConfig, HitRule
from cos_integrations.embedded.embeddings import HashingEmbedder
from cos_integrations.loaders import SourceDocument
from cos_integrations.serving.index import CoSIndex
from langchain_ext import CoSFallbackRetriever


@lru_cache(maxsize=1)
def _index_dir() -> str:
    path = tempfile.mkdtemp(prefix="cos-lc-standard-")
    atexit.register(shutil.rmtree, path, ignore_errors=True)  # the suite builds no fixture
    index = CoSIndex(path, embedder=HashingEmbedder(256))
    engine = ChainOfSummaries(ScriptedFakeModel(), CoSConfig.fast(iterations=0))
    docs = [
        SourceDocument(doc_id=t, text=make_document(6, topic=t))
        for t in ("lease", "garden", "parking", "heating")
    ]
    asyncio.run(index.aingest(docs, engine))
    index.store.close()
    return path


class TestCoSFallbackRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[CoSFallbackRetriever]:
        return CoSFallbackRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        return {"persist_dir": _index_dir(), "k": 2, "rule": HitRule(threshold=0.0)}

    @property
    def retriever_query_example(self) -> str:
        return "What is the garden item 3?"
