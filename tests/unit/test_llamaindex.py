"""LlamaIndex components: pipeline, retriever, postprocessor on a real Chroma PersistentClient."""

import chromadb
import pytest
from fakes import ScriptedFakeModel, llamaindex_fake, llamaindex_hash_embedding, make_document
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.storage.docstore import SimpleDocumentStore
from llama_index.vector_stores.chroma import ChromaVectorStore

import llamaindex_ext
from cos_integrations import CoSConfig
from cos_integrations.serving.hit_rule import HitRule
from llamaindex_ext import (
    CoSCacheMissEvent,
    CoSExpandToSourcePostprocessor,
    CoSFallbackRetriever,
    CoSSummaryTransform,
    CoSTransformError,
)

TOPICS = ["lease", "garden", "parking", "heating"]
CFG = CoSConfig.fast(iterations=0)


def docs(prefix=""):
    return [
        Document(
            text=make_document(8, topic=t, prefix=prefix),
            id_=t,
            metadata={"file_path": f"{t}.txt", "title": t.title(), "tags": ["x"]},
        )
        for t in TOPICS
    ]


@pytest.fixture
def setup(tmp_path):
    path = tmp_path / "index"
    client = chromadb.PersistentClient(path=str(path))
    collection = client.get_or_create_collection(
        "cos_summaries", configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
    )
    fake = ScriptedFakeModel()
    transform = CoSSummaryTransform(
        llm=llamaindex_fake(fake), config=CFG, emit="both", store_path=path / "cos.sqlite"
    )
    pipeline = IngestionPipeline(
        transformations=[transform, llamaindex_hash_embedding()],
        vector_store=ChromaVectorStore(chroma_collection=collection),
        docstore=SimpleDocumentStore(),
        docstore_strategy=DocstoreStrategy.UPSERTS,
    )
    return path, collection, fake, transform, pipeline


def summaries(collection, doc_id=None):
    where = (
        {"cos_kind": "summary"}
        if doc_id is None
        else {"$and": [{"cos_kind": "summary"}, {"doc_id": doc_id}]}
    )
    return collection.get(where=where, include=["documents", "metadatas"])


def test_exports_have_docstrings():
    assert sorted(llamaindex_ext.__all__) == [
        "CoSCacheMissEvent",
        "CoSChatLLM",
        "CoSExpandToSourcePostprocessor",
        "CoSFallbackRetriever",
        "CoSLocalEmbedding",
        "CoSQueryEngine",
        "CoSSummaryTransform",
        "CoSTransformError",
        "CoreChatModel",
        "CoreEmbedder",
        "as_chat_model",
        "as_embedder",
        "section_documents",
    ]
    for name in llamaindex_ext.__all__:  # the deprecated name is importable, not listed
        assert getattr(llamaindex_ext, name).__doc__, name
    with pytest.raises(AttributeError):  # 0.2's old name went in 0.3
        llamaindex_ext.CoSLLM  # noqa: B018


def test_pipeline_writes_summary_and_chunk_nodes(setup):
    path, collection, fake, transform, pipeline = setup
    nodes = pipeline.run(documents=docs())
    kinds = [n.metadata["cos_kind"] for n in nodes]
    assert kinds.count("summary") == 4 and kinds.count("chunk") >= 4
    s = nodes[0]
    assert s.ref_doc_id == "lease" and s.metadata["doc_id"] == "lease"
    assert s.metadata["source"] == "lease.txt" and s.metadata["tags"] == '["x"]'
    assert all(isinstance(v, (str, int, float, bool)) for n in nodes for v in n.metadata.values())
    got = summaries(collection)
    assert len(got["ids"]) == 4
    assert transform.store.questions("lease")  # bank in the store, not in Chroma metadata
    assert "questions" not in got["metadatas"][0]


async def test_rerun_unchanged_makes_no_call_and_changed_replaces(setup):
    path, collection, fake, transform, pipeline = setup
    await pipeline.arun(documents=docs())
    calls = len(fake.calls)
    transform2 = CoSSummaryTransform(
        llm=llamaindex_fake(fake), config=CFG, emit="both", store_path=path / "cos.sqlite"
    )
    assert transform2(docs()) and len(fake.calls) == calls  # reused from the store
    changed = docs()
    changed[1] = Document(
        text=make_document(8, topic="garden", prefix="new "),
        id_="garden",
        metadata={"file_path": "garden.txt"},
    )
    await pipeline.arun(documents=changed)
    got = summaries(collection, "garden")
    assert len(got["ids"]) == 1 and "new value" in got["documents"][0]
    assert got["metadatas"][0]["cos_version"] == 2
    assert len(summaries(collection)["ids"]) == 4
    chunks = collection.get(
        where={"$and": [{"cos_kind": "chunk"}, {"doc_id": "garden"}]}, include=["documents"]
    )
    assert chunks["ids"] and all("new value" in d for d in chunks["documents"])


def test_cache_key_ignores_clients_and_workers_and_round_trips(setup):
    *_, transform, _ = setup
    other = CoSSummaryTransform(
        llm=llamaindex_fake(),
        config=CFG,
        emit="both",
        store_path=transform.store_path,
        concurrency=16,
        show_progress=True,
    )
    assert transform.to_dict() == other.to_dict()
    assert "llm" not in transform.to_dict() and "concurrency" not in transform.to_dict()
    again = CoSSummaryTransform.from_dict(transform.to_dict())
    assert again.config == transform.config and again.emit == "both"
    changed = CoSSummaryTransform(llm=None, config=CoSConfig.fast(iterations=3))
    assert changed.to_dict() != CoSSummaryTransform(llm=None, config=CFG).to_dict()


def test_empty_document_skipped_and_failure_keeps_others(tmp_path):
    class FailsOnGarden(ScriptedFakeModel):
        def respond(self, messages, json_schema=None):
            if "garden" in messages[0]["content"]:
                raise RuntimeError("HTTP 500")
            return super().respond(messages, json_schema)

    fake = FailsOnGarden()
    t = CoSSummaryTransform(llm=llamaindex_fake(fake), config=CFG, store_path=tmp_path / "s.db")
    batch = [*docs(), Document(text="  ", id_="blank")]
    with pytest.raises(CoSTransformError) as info:
        t(batch)
    assert set(info.value.failed) == {"garden"}
    assert {n.ref_doc_id for n in info.value.nodes} == {"lease", "parking", "heating"}
    assert t.last_report.skipped == {"blank": "empty text"}
    calls = len(fake.calls)
    out = CoSSummaryTransform(
        llm=llamaindex_fake(ScriptedFakeModel()), config=CFG, store_path=tmp_path / "s.db"
    )(batch)
    assert {n.ref_doc_id for n in out} == set(TOPICS)  # garden retried, others reused
    assert len(fake.calls) == calls


@pytest.fixture
def retriever(setup):
    path, collection, fake, transform, pipeline = setup
    pipeline.run(documents=docs())
    r = CoSFallbackRetriever.from_persist_dir(
        path,
        max_error=None,
        llm=llamaindex_fake(fake),
        embed_model=llamaindex_hash_embedding(),
        similarity_top_k=2,
        # one-chunk documents: best+chunk would hit every fact
        rule=HitRule(threshold=0.1, judge="llm", hit_context="summaries"),
    )
    return r


class Collect(BaseEventHandler):
    events: list = []

    @classmethod
    def class_name(cls) -> str:
        return "Collect"

    def handle(self, event, **kwargs):
        if isinstance(event, CoSCacheMissEvent):
            self.events.append(event)


def test_hit_and_miss_paths_with_event_and_queue(retriever):
    hit = retriever.retrieve("What is the garden item 1?")
    assert hit and all(n.node.metadata["cos_hit"] for n in hit)
    assert hit[0].node.metadata["cos_kind"] == "summary" and hit[0].node.ref_doc_id == "garden"
    handler = Collect(events=[])
    get_dispatcher().add_event_handler(handler)
    try:
        miss = retriever.retrieve("What is the garden item 7?")
    finally:
        get_dispatcher().event_handlers.remove(handler)
    assert miss and not any(n.node.metadata["cos_hit"] for n in miss)
    assert all(n.node.metadata["cos_kind"] == "chunk" for n in miss)
    assert "garden item 7 is value 7h" in miss[0].node.get_content()
    (event,) = handler.events
    assert event.job_id is not None and "garden" in event.doc_ids
    assert [(j.doc_id, j.status) for j in retriever.index.store.jobs()] == [("garden", "pending")]
    assert (retriever.hits, retriever.misses) == (1, 1)


async def test_async_retrieve(retriever):
    nodes = await retriever.aretrieve("What is the parking item 0?")
    assert nodes and nodes[0].node.metadata["cos_hit"] is True


def test_postprocessor_expands_summaries_to_source(retriever):
    nodes = retriever.retrieve("What is the garden item 1?")
    post = CoSExpandToSourcePostprocessor(index=retriever.index, chunks_per_doc=1)
    from llama_index.core.schema import QueryBundle

    out = post.postprocess_nodes(nodes, QueryBundle("What is the garden item 1?"))
    assert out and all(n.node.metadata["cos_kind"] == "chunk" for n in out)
    assert {n.node.metadata["doc_id"] for n in out} == {n.node.ref_doc_id for n in nodes}
    whole = CoSExpandToSourcePostprocessor(index=retriever.index, mode="document")
    docs_out = whole.postprocess_nodes(nodes[:1])
    assert docs_out[0].node.get_content() == make_document(8, topic="garden")


def test_query_engine_and_vector_store_index(retriever, setup):
    path, collection, fake, *_ = setup
    engine = RetrieverQueryEngine.from_args(retriever, llm=llamaindex_fake(fake))
    response = engine.query("What is the garden item 1?")
    assert response.source_nodes and response.source_nodes[0].node.metadata["cos_hit"]
    index = VectorStoreIndex.from_vector_store(
        ChromaVectorStore(chroma_collection=collection), embed_model=llamaindex_hash_embedding()
    )
    plain = index.as_retriever(similarity_top_k=2).retrieve("garden item")
    assert plain and plain[0].node.metadata["doc_id"]


def test_summary_only_pipeline_misses_fall_back_to_the_stored_text(tmp_path):
    """emit="summary" (the default) writes no chunk vectors: a miss must still find the
    source, from the stored full text, and a best+chunk hit reads it too."""
    path = tmp_path / "index"
    client = chromadb.PersistentClient(path=str(path))
    collection = client.get_or_create_collection(
        "cos_summaries", configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
    )
    fake = ScriptedFakeModel()
    IngestionPipeline(
        transformations=[
            CoSSummaryTransform(
                llm=llamaindex_fake(fake), config=CFG, store_path=path / "cos.sqlite"
            ),
            llamaindex_hash_embedding(),
        ],
        vector_store=ChromaVectorStore(chroma_collection=collection),
    ).run(documents=docs())
    assert not collection.get(where={"cos_kind": "chunk"})["ids"]
    kw = dict(llm=llamaindex_fake(fake), embed_model=llamaindex_hash_embedding())
    retriever = CoSFallbackRetriever.from_persist_dir(
        path,
        max_error=None,
        similarity_top_k=2,
        **kw,
        rule=HitRule(threshold=0.1, judge="llm", hit_context="summaries"),
    )
    miss = retriever.retrieve("What is the garden item 7?")
    assert miss and not any(n.node.metadata["cos_hit"] for n in miss)
    assert all(n.node.metadata["cos_on_the_fly"] for n in miss)
    assert any("garden item 7 is value 7h" in n.node.get_content() for n in miss)
    both = CoSFallbackRetriever.from_persist_dir(
        path,
        max_error=None,
        similarity_top_k=2,
        **kw,
        rule=HitRule(threshold=0.1, judge="llm", hit_context="best+chunk"),
    )
    hit = both.retrieve("What is the garden item 7?")
    assert [n.node.metadata["cos_kind"] for n in hit] == ["summary", "chunk"]
    assert all(n.node.metadata["cos_hit"] for n in hit)


def test_from_defaults_reads_settings_and_top_k_is_read_per_query(setup, monkeypatch):
    """LlamaIndex conventions: from_defaults falls back to Settings.llm / Settings.embed_model
    (the index was built with a LlamaIndex embed model, which the core cannot rebuild), a
    clear error when Settings has none, and similarity_top_k changed after construction
    applies to the next query."""
    from llama_index.core import Settings

    path, collection, fake, transform, pipeline = setup
    pipeline.run(documents=docs())
    # the first open writes the manifest, which names the (LlamaIndex) embedder
    CoSFallbackRetriever.from_persist_dir(path, embed_model=llamaindex_hash_embedding())
    # Settings' private slots: the public setters cannot unset, and the getters resolve an
    # unset model to OpenAI's
    monkeypatch.setattr(Settings, "_llm", None)
    monkeypatch.setattr(Settings, "_embed_model", None)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ValueError, match="Settings.embed_model"):
        CoSFallbackRetriever.from_defaults(persist_dir=path)
    Settings.embed_model = llamaindex_hash_embedding()
    with pytest.raises(ValueError, match="Settings.llm"):
        CoSFallbackRetriever.from_defaults(persist_dir=path, rule=HitRule(judge="llm"))
    Settings.llm = llamaindex_fake(fake)
    r = CoSFallbackRetriever.from_defaults(
        persist_dir=path,
        max_error=None,
        similarity_top_k=2,
        rule=HitRule(judge="llm", threshold=0.1, hit_context="summaries"),
    )
    assert r.retrieve("What is the garden item 1?")[0].node.metadata["cos_hit"]
    r.similarity_top_k = 1
    miss = r.retrieve("What is the garden item 7?")
    assert len(miss) == 1 and miss[0].node.metadata["cos_kind"] == "chunk"
    assert (r.hits, r.misses) == (1, 1)
    fields = CoSSummaryTransform.model_fields
    assert all(fields[f].description for f in ("config", "emit", "chunk_words", "store_path"))


def test_the_retriever_takes_a_rule_and_a_new_one_applies_to_the_next_query(retriever):
    with pytest.raises(TypeError):  # 0.2's hit-rule keywords went in 0.3: rule=HitRule(...)
        CoSFallbackRetriever(retriever.index, threshold=1.01)
    r = CoSFallbackRetriever(retriever.index, rule=HitRule(threshold=1.01))
    assert r.retrieve("What is the garden item 1?")[0].node.metadata["cos_hit"] is False
    r.rule = HitRule(threshold=0.0)
    assert r.retrieve("What is the garden item 1?")[0].node.metadata["cos_hit"] is True


def test_every_node_carries_its_citation(retriever):
    nodes = retriever.retrieve("What is the garden item 1?")
    assert nodes[0].node.metadata["cos_citation"].endswith("(hit, summary v1)")
    assert "cos_citation" in nodes[0].node.excluded_llm_metadata_keys


SITE = "\n\n".join(
    f"{h}\n\n{make_document(2, topic=t)}"
    for h, t in (("# Guide", "guide"), ("## Install", "install"), ("### Check", "check"))
)


def test_section_documents_keep_their_page_and_parent_through_the_pipeline(setup, tmp_path):
    from llama_index.core.schema import NodeRelationship

    from llamaindex_ext import section_documents

    path, collection, fake, transform, pipeline = setup
    site = tmp_path / "site"
    site.mkdir()
    (site / "guide.md").write_text(SITE)
    docs_in = section_documents([site], min_words=0)
    assert [d.doc_id for d in docs_in] == [
        "site/guide.md#guide",
        "site/guide.md#install",
        "site/guide.md#check",
    ]
    check = docs_in[2]
    assert check.metadata["heading_path"] == "Guide › Install › Check"
    assert check.metadata["source"].endswith("guide.md#check")
    assert check.relationships[NodeRelationship.PARENT].node_id == "site/guide.md#install"
    nodes = pipeline.run(documents=docs_in)
    summary = next(n for n in nodes if n.node_id == "site/guide.md#check::summary")
    assert summary.relationships[NodeRelationship.SOURCE].node_id == "site/guide.md#check"
    assert summary.relationships[NodeRelationship.PARENT].node_id == "site/guide.md#install"
    assert summary.metadata["page"] == "site/guide.md"


def test_one_name_for_each_config_and_a_foreign_collection_is_an_error(tmp_path):
    """config= is the ingest config (the transform's), refine_config= the refinement's (the
    retriever's; 0.2's config= there went in 0.3); a vector store over another collection
    than the index's summaries is an error naming the expected one."""
    import chromadb
    from llama_index.vector_stores.chroma import ChromaVectorStore

    from cos_integrations import CoSIndex
    from cos_integrations.embedded.embeddings import HashingEmbedder

    index = CoSIndex(tmp_path / "ix", embedder=HashingEmbedder(64))
    retriever = CoSFallbackRetriever(index, refine_config=CFG)
    assert retriever.core.refine_config == CFG
    with pytest.raises(TypeError):
        CoSFallbackRetriever(index, config=CFG)
    client = chromadb.PersistentClient(path=str(tmp_path / "other"))
    mine = ChromaVectorStore(chroma_collection=client.get_or_create_collection("my_docs"))
    with pytest.raises(ValueError, match="'my_docs'.*'cos_summaries'"):
        CoSFallbackRetriever.from_defaults(tmp_path / "ix", vector_store=mine, llm=None)
    ours = ChromaVectorStore(chroma_collection=client.get_or_create_collection("cos_summaries"))
    assert CoSFallbackRetriever.from_defaults(
        tmp_path / "ix", vector_store=ours, embed_model=None, rule=None
    ).index.path == (tmp_path / "ix")


async def test_cos_query_engine_answers_a_hit_with_no_second_call(retriever, setup):
    """Issue 58 item 2: a hit's response is the judge's checked answer with its source
    nodes and no further model call; a miss is answered by the product's own answer call
    over the source chunks (the response synthesizer when one of its arguments is given),
    and kept as a verified answer, so its repeat costs nothing; async and streaming."""
    from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse

    from cos_integrations.summarize.prompts import answer_messages
    from llamaindex_ext import CoSQueryEngine

    path, collection, fake, *_ = setup
    engine = CoSQueryEngine.from_defaults(retriever, llm=llamaindex_fake(fake))
    calls = len(fake.calls)
    hit = engine.query("What is the garden item 1?")
    assert str(hit) == "value 1b" and hit.metadata["cos_hit"] is True
    assert hit.source_nodes[0].node.metadata["cos_answer"] == "value 1b"
    assert [t for t, _ in fake.calls[calls:]] == ["grounded"]  # the judge's call alone
    calls = len(fake.calls)
    miss = await engine.aquery("What is the garden item 7?")
    assert str(miss) == "value 7h" and miss.metadata["cos_hit"] is False
    assert isinstance(miss.metadata["cos_job_id"], int)
    kind, messages = fake.calls[-1]  # the product's own answer call, the core's messages
    assert kind == "answer"
    chunks = [(n.node.metadata.get("title"), n.node.text) for n in miss.source_nodes]
    content = "\n\n".join(f"[{title}]\n{text}" for title, text in chunks)
    assert messages == answer_messages(content, ["What is the garden item 7?"])
    calls = len(fake.calls)
    again = engine.query("What is the garden item 7?")
    assert str(again) == "value 7h" and again.metadata["cos_served"] == "exact"
    assert len(fake.calls) == calls
    streaming = CoSQueryEngine.from_defaults(retriever, llm=llamaindex_fake(fake), streaming=True)
    stream = streaming.query("What is the garden item 1?")
    assert isinstance(stream, StreamingResponse) and "".join(stream.response_gen) == "value 1b"
    astream = await streaming.aquery("What is the garden item 1?")
    assert isinstance(astream, AsyncStreamingResponse)
    assert [t async for t in astream.async_response_gen()] == ["value 1b"]
    synthesized = CoSQueryEngine.from_defaults(  # a synthesizer's argument: it answers misses
        retriever, llm=llamaindex_fake(fake), response_mode="compact"
    )
    calls = len(fake.calls)
    assert str(synthesized.query("What is the garden item 5?")) == "value 5f"
    assert [t for t, _ in fake.calls[calls:]][-1] == "plain_qa"
    with pytest.raises(TypeError, match="CoSFallbackRetriever"):
        CoSQueryEngine(VectorStoreIndex([], embed_model=llamaindex_hash_embedding()).as_retriever())


async def test_a_router_check_through_the_query_engine_is_recorded(retriever, setup):
    """A check (the router's: the summary path's answer compared with the chunks') made
    through CoSQueryEngine teaches the router: the synthesizer's answer comes back to the
    retriever's own result. Before, the engine's answer came back without the check, so a
    framework user's router never learned and checked every such question with a judge
    call (131 extra calls on the SQuAD stream)."""
    from cos_integrations.serving.router import Router
    from llamaindex_ext import CoSQueryEngine

    path, collection, fake, *_ = setup
    retriever.core.router = Router(0.02)  # a new index: every summary-path question checked
    engine = CoSQueryEngine.from_defaults(retriever, llm=llamaindex_fake(fake))
    response = await engine.aquery("What is the garden item 1?")
    assert response.metadata["cos_hit"] is False  # a check answers from the chunks
    assert retriever.index.store.check_counts() == (1, 0)
