"""Ingestion against a model server that fails 20% of the time: nothing lost or duplicated."""

import asyncio
from collections import Counter

from fakes import ScriptedFakeModel, make_document
from openai_server import FakeOpenAIServer

from cos_integrations import ChainOfSummaries, CoSConfig, OpenAIChatModel
from cos_integrations.loaders import SourceDocument

TOPICS = [f"topic{i}" for i in range(50)]


def test_fifty_documents_at_a_twenty_percent_fault_rate(index):
    docs = [SourceDocument(doc_id=t, text=make_document(6, topic=t)) for t in TOPICS]
    with FakeOpenAIServer(
        ScriptedFakeModel(thesis_facts=2), fault_rate=0.2, seed=7, timeout_sleep=1.0
    ) as srv:
        llm = OpenAIChatModel(
            "fake",
            base_url=srv.base_url,
            api_key="sk-test",
            timeout=0.5,
            max_retries=3,
            backoff_base=0.01,
            backoff_max=0.05,
        )
        engine = ChainOfSummaries(llm, CoSConfig.fast(iterations=1))
        report = asyncio.run(index.aingest(docs, engine, concurrency=4))
        injected = Counter(srv.injected)
        completed = srv.completed
    # every fault kind was exercised
    assert set(injected) == set(FakeOpenAIServer.KINDS), injected
    assert sum(injected.values()) >= 0.15 * len(srv.requests)
    # every document is summarised or reported failed with its error: none silently missing
    assert set(report.summarized) | set(report.failed) == set(TOPICS)
    assert not set(report.summarized) & set(report.failed)
    assert all(report.failed[d] for d in report.failed)
    for doc in index.store.documents():
        assert doc.status == ("failed" if doc.doc_id in report.failed else "summarized")
    # exactly one summary vector per summarised document, none for failed ones
    ids = Counter(m["doc_id"] for m in index.summaries.get(include=["metadatas"])["metadatas"])
    assert ids == Counter({d: 1 for d in report.summarized})
    # no orphan chunks: chunks exist only for documents with a summary
    chunk_docs = {m["doc_id"] for m in index.chunks.get(include=["metadatas"])["metadatas"]}
    assert chunk_docs == set(report.summarized)
    # usage counted once per completed call, failed documents' calls included
    assert report.usage.calls == completed
    # most documents made it despite the faults (retries and re-asks work)
    assert len(report.summarized) >= 45, report.failed


def test_failed_documents_are_retried_on_the_next_run(index):
    docs = [SourceDocument(doc_id=t, text=make_document(6, topic=t)) for t in TOPICS[:10]]
    with FakeOpenAIServer(ScriptedFakeModel(), fault_rate=0.6, fault_kinds=("503",), seed=3) as srv:
        llm = OpenAIChatModel(
            "fake", base_url=srv.base_url, api_key="sk-test", max_retries=1, backoff_base=0.01
        )
        first = asyncio.run(index.aingest(docs, ChainOfSummaries(llm, CoSConfig.fast())))
        assert first.failed, "the fault rate should fail some documents"
        assert all("503" in why for why in first.failed.values())
        srv.fault_rate = 0.0
        second = asyncio.run(index.aingest(docs, ChainOfSummaries(llm, CoSConfig.fast())))
    assert sorted(second.summarized) == sorted(first.failed)
    assert sorted(second.unchanged) == sorted(first.summarized)
    assert index.summaries.count() == 10
