"""LlamaIndex and LangChain components over real HTTP to the embedded llama.cpp server."""

import re

import chromadb
import pytest
from llama_index.core import Document as LIDocument
from llama_index.core.ingestion import IngestionPipeline
from llama_index.vector_stores.chroma import ChromaVectorStore

from cos_integrations import CoSConfig
from cos_integrations.defaults import FOCUS_SENTENCES
from cos_integrations.serving.hit_rule import HitRule
from cos_integrations.text import split_sentences
from langchain_ext import CoSChatModel, CoSFallbackRetriever, CoSLocalEmbeddings
from llamaindex_ext import CoSFallbackRetriever as LIRetriever
from llamaindex_ext import CoSLocalEmbedding, CoSSummaryTransform

pytestmark = pytest.mark.integration

TEXTS = {
    "lease": "The monthly rent is 1,150 euros. Rent is due on the 5th day of each month.",
    "garden": "The garden gate is locked at 22:00. Barbecues are allowed on the lawn.",
    "parking": "Each flat has one parking space. Visitors park on the street.",
}
CFG = CoSConfig(
    strategy="zero-shot", max_summary_words=40, max_output_tokens=96, context_tokens=4096
)


def test_langchain_retriever_and_lcel_on_the_local_server(smoke_server, tmp_path):
    from langchain_core.documents import Document

    chat = CoSChatModel(model=smoke_server.chat_model(), max_tokens=16)
    retriever = CoSFallbackRetriever.from_persist_dir(
        tmp_path / "lc",
        llm=chat,
        embeddings=CoSLocalEmbeddings(),
        k=2,
        config=CFG,
        rule=HitRule(threshold=0.0, judge="score"),  # plumbing: the 135M model judges badly
    )
    ids = retriever.add_documents([Document(page_content=t, id=k) for k, t in TEXTS.items()])
    assert sorted(ids) == sorted(TEXTS)
    docs = retriever.invoke("When is the rent due?")
    assert len(docs) == 2 and docs[0].metadata["cos_hit"] is True
    assert {d.metadata["doc_id"] for d in docs} <= set(TEXTS)  # linked to their sources
    assert isinstance(chat.invoke("Say hi").content, str)


def test_llamaindex_pipeline_and_retriever_on_the_local_server(smoke_server, tmp_path):
    path = tmp_path / "li"
    client = chromadb.PersistentClient(path=str(path))
    collection = client.get_or_create_collection(
        "cos_summaries", configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
    )
    embed = CoSLocalEmbedding()
    transform = CoSSummaryTransform(
        llm=smoke_server.chat_model(), config=CFG, store_path=path / "cos.sqlite"
    )
    pipeline = IngestionPipeline(
        transformations=[transform, embed],
        vector_store=ChromaVectorStore(chroma_collection=collection),
    )
    nodes = pipeline.run(documents=[LIDocument(text=t, id_=k) for k, t in TEXTS.items()])
    assert len(nodes) == 3 and all(n.get_content() for n in nodes)
    assert sorted(transform.last_report.summarized) == sorted(TEXTS)
    retriever = LIRetriever.from_persist_dir(
        path, embed_model=embed, similarity_top_k=2, rule=HitRule(threshold=0.0)
    )
    found = retriever.retrieve("When is the rent due?")
    assert found and found[0].node.metadata["cos_hit"] is True
    assert found[0].node.ref_doc_id in TEXTS
    # the pipeline emitted summaries only: a miss reads the stored text, chunked now
    missed = LIRetriever.from_persist_dir(path, embed_model=embed, rule=HitRule(threshold=1.01))
    nodes = missed.retrieve("When is the rent due?")
    assert nodes and all(n.node.metadata["cos_on_the_fly"] for n in nodes)
    assert "5th day" in nodes[0].node.get_content()
    # the grounded hit rule on the real model: the decision is exactly its checks
    grounded = ("answered", "quoted", "in_quote", "not_echo")
    strict = LIRetriever.from_persist_dir(
        path,
        llm=smoke_server.chat_model(),
        embed_model=embed,
        similarity_top_k=2,
        rule=HitRule(threshold=0.0, judge="llm", hit_context="best+chunk"),
        max_error=None,  # the hit rule alone: this is about what it decides
    )
    res = strict.core.retrieve("When is the rent due?")
    assert set(res.checks) >= {*grounded, "in_source"}
    assert res.hit == all(res.checks[c] for c in grounded)
    if res.hit:
        assert [h.kind for h in res.items] == ["summary", "chunk"] and res.answer
    else:
        assert res.answer is None and all(h.kind == "chunk" for h in res.items)
    # the default rule (focused) on the real model: the judge reads only the sentence
    # windows of the best summary and its chunk closest to the query
    default = LIRetriever.from_persist_dir(
        path,
        llm=smoke_server.chat_model(),
        embed_model=embed,
        rule=HitRule(threshold=0.0, judge="llm"),
        max_error=None,
    )
    assert default.rule.context == "focused"
    q = "When is the garden gate locked?"
    judge = Recording(smoke_server.chat_model())
    res = default.core.retrieve(q, llm=judge)
    assert res.judge_context_tokens > 0 and len(judge.prompts) == 1  # one judge call
    content = re.search(r"<content>\n(.*)\n</content>", judge.prompts[0][0]["content"], re.S)
    read = [line for line in content.group(1).splitlines() if not line.startswith("[")]
    assert read and sum(len(split_sentences(line)) for line in read) <= FOCUS_SENTENCES
    assert res.hit == all(res.checks[c] for c in grounded)


class Recording:
    """A core chat model that keeps the prompts it was sent."""

    def __init__(self, inner):
        self.inner, self.prompts = inner, []

    async def chat(self, messages, **kwargs):
        self.prompts.append(list(messages))
        return await self.inner.chat(messages, **kwargs)


class Counting:
    """A core chat model that counts the calls it sends the server."""

    def __init__(self, inner):
        self.inner, self.calls = inner, 0

    async def chat(self, messages, **kwargs):
        self.calls += 1
        return await self.inner.chat(messages, **kwargs)


def test_a_hit_through_either_framework_costs_the_judges_call_alone(smoke_server, tmp_path):
    """Issue 58: LangChain's create_cos_qa_chain and LlamaIndex's CoSQueryEngine answer a
    hit with the judge's call and no other, a miss with the judge's (when asked) and their
    own answer call, and a verified answer with no call at all; counted at the server."""
    from langchain_core.documents import Document
    from llama_index.llms.openai_like import OpenAILike

    from langchain_ext import create_cos_qa_chain
    from llamaindex_ext import CoSQueryEngine

    counter = Counting(smoke_server.chat_model())
    chat = CoSChatModel(model=counter, max_tokens=24)
    rule = HitRule(threshold=0.0, judge="llm", hit_context="best+chunk")
    lc = CoSFallbackRetriever.from_persist_dir(
        tmp_path / "lc",
        llm=chat,
        embeddings=CoSLocalEmbeddings(),
        config=CFG,
        rule=rule,
        max_error=None,  # the hit rule alone: a new index's router would check every hit
    )
    lc.add_documents([Document(page_content=t, id=k) for k, t in TEXTS.items()])
    chain = create_cos_qa_chain(lc, chat)
    q = "When is the rent due?"
    before = counter.calls
    out = chain.invoke(q)
    judged = out["hit"] or bool(out["context"][0].metadata.get("cos_checks"))
    assert counter.calls - before == (1 if out["hit"] else 1 + judged)
    # a verified answer: served with no call, in both frameworks
    index = lc.index
    sentence = "Rent is due on the 5th day of each month."
    entry = index.store.put_answer("lease", q, "the 5th day", sentence, "refine")
    index.add_answer(entry)
    before = counter.calls
    served = chain.invoke("when is the RENT due")
    assert served["served"] == "exact" and served["answer"] == "the 5th day"
    assert counter.calls == before
    li = LIRetriever.from_persist_dir(
        tmp_path / "lc", llm=counter, embed_model=CoSLocalEmbedding(), rule=rule, max_error=None
    )
    synthesizer = OpenAILike(
        model=counter.inner.model,
        api_base=smoke_server.base_url,
        api_key="sk-local",
        is_chat_model=True,
        context_window=4096,
    )
    engine = CoSQueryEngine.from_defaults(li, llm=synthesizer)
    response = engine.query(q)
    assert str(response) == "the 5th day" and response.metadata["cos_served"] == "exact"
    assert counter.calls == before
