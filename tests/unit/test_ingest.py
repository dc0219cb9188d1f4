"""One ingest loop (cos_integrations.ingest) behind the index and both frameworks: the same
documents give the same stored versions, guard flags and summary metadata on every path."""

import asyncio

from fakes import ScriptedFakeModel, langchain_fake, llamaindex_fake, make_document
from langchain_core.documents import Document as LCDocument
from llama_index.core import Document as LIDocument

from cos_integrations import ChainOfSummaries, CoSConfig
from cos_integrations.ingest import summarize_new
from cos_integrations.loaders import SourceDocument
from cos_integrations.storage.store import SummaryStore
from langchain_ext import CoSDocumentTransformer
from llamaindex_ext import CoSSummaryTransform

CFG = CoSConfig.fast(iterations=0)
# a thesis that states a number the source does not hold: the guard must flag it everywhere
INVENTED = "The lease item 0 is value 0a. The deposit is 9999 euros."
TEXT = make_document(6, topic="lease")
SUMMARY_KEYS = {
    "doc_id",
    "source",
    "title",
    "cos_kind",
    "cos_version",
    "summary_tokens",
    "source_tokens",
    "created_by",
}


def fake():
    return ScriptedFakeModel(script={"thesis": [INVENTED]})


def test_index_and_both_frameworks_store_and_describe_summaries_alike(index, tmp_path):
    doc = SourceDocument("lease", TEXT, source="lease.md", title="Lease")
    report = asyncio.run(index.aingest([doc], ChainOfSummaries(fake(), CFG)))
    assert report.summarized == ["lease"]
    got = index.summaries.get(where={"doc_id": "lease"}, include=["metadatas"])["metadatas"][0]

    li = CoSSummaryTransform(llm=llamaindex_fake(fake()), config=CFG, store_path=tmp_path / "l.db")
    node = li(
        [LIDocument(text=TEXT, id_="lease", metadata={"file_path": "lease.md", "title": "Lease"})]
    )[0]
    lc = CoSDocumentTransformer(langchain_fake(fake()), CFG, store_path=tmp_path / "c.db")
    page = lc.transform_documents(
        [
            LCDocument(
                page_content=TEXT, id="lease", metadata={"source": "lease.md", "title": "Lease"}
            )
        ]
    )[0]

    for meta in (got, node.metadata, page.metadata):
        assert SUMMARY_KEYS <= set(meta)
        assert meta["cos_kind"] == "summary" and meta["doc_id"] == "lease"
        assert meta["created_by"] == "cos" and meta["source"] == "lease.md"
    stores = [index.store, li.store, lc.store]
    versions = [s.current_summary("lease") for s in stores]
    assert {v.text for v in versions} == {INVENTED}
    assert all(any("9999" in f for f in v.flags) for v in versions), [v.flags for v in versions]


def test_unchanged_documents_cost_nothing_and_duplicates_keep_the_last_text(tmp_path):
    store = SummaryStore(tmp_path / "s.db")
    model = ScriptedFakeModel()
    engine = ChainOfSummaries(model, CFG)
    first = SourceDocument("a", make_document(4, topic="lease"))
    report = asyncio.run(summarize_new(store, [first, SourceDocument("e", "  ")], engine))
    assert report.summarized == ["a"] and report.skipped == {"e": "empty text"}
    calls = len(model.calls)
    again = asyncio.run(summarize_new(store, [first], engine))
    assert again.unchanged == ["a"] and len(model.calls) == calls
    changed = SourceDocument("a", make_document(4, topic="garden"))
    report = asyncio.run(summarize_new(store, [first, changed], engine))
    assert report.summarized == ["a"]
    assert "garden" in store.get_document("a").text
