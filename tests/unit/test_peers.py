"""The peers of ``cos eval`` (issue 28) as their real framework classes, over a real
OpenAI-compatible HTTP server answering from a scripted model, and the chunk baselines
``rag-ordered`` and ``rag-contextual``."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import random

import pytest
from fakes import ScriptedFakeModel, make_document
from openai_server import FakeOpenAIServer

from cos_integrations.embedded.embeddings import HashingEmbedder
from cos_integrations.model import OpenAIChatModel
from cos_integrations.research.evaluation import (
    RetrievalEvalOptions,
    load_dataset,
    retrieval_table,
    run_eval,
)
from cos_integrations.research.peers import (
    PEERS,
    PeerDoc,
    PeerSetup,
    PeerUnavailable,
    UsageMeter,
    load_peer,
)
from cos_integrations.summarize.config import CoSConfig

# skipped without the 'peers' extra, unless COS_REQUIRE_PEERS=1 (set by .ci/run)
for _module in ("llama_index.llms.openai_like", "umap", "langchain_classic"):
    if os.environ.get("COS_REQUIRE_PEERS") == "1":
        importlib.import_module(_module)
    else:
        pytest.importorskip(_module, reason="the 'peers' extra")

TOPICS = ("lease", "garden", "engine")


def _docs() -> list[PeerDoc]:
    return [
        PeerDoc(f"d{i}", f"T{i}", make_document(12, topic=t, prefix=f"{t} "))
        for i, t in enumerate(TOPICS)
    ]


def _setup(server: FakeOpenAIServer) -> PeerSetup:
    llm = OpenAIChatModel(model="fake", base_url=server.base_url, api_key="sk-test")
    # ~2 chunks a document: RAPTOR clusters 11 nodes or fewer as one (no UMAP fit)
    return PeerSetup(llm=llm, embedder=HashingEmbedder(), k=2, chunk_words=60)


@pytest.mark.parametrize("name", sorted(PEERS))
def test_each_peer_finds_the_document_that_answers(name):
    """Each peer, built by its own class over three documents of different subjects,
    puts the right document's text in front of the model; its summary calls are
    metered through the HTTP responses' usage."""
    model = ScriptedFakeModel(thesis_facts=3)
    with FakeOpenAIServer(model) as server:
        setup = _setup(server)
        peer = load_peer(name, setup)

        async def go():
            await peer.abuild(_docs())
            return await peer.aretrieve("What is the garden item 7?")

        hits = asyncio.run(go())
    text = "\n".join(h.text for h in hits)
    assert "garden value 7h" in text, (name, [h.doc_id for h in hits])
    summaries = [t for t, _ in model.calls if t == "peer_summary"]
    assert setup.meter.total.calls == len(summaries) == len(model.calls)
    if name == "parent-doc":
        assert summaries == []  # it searches chunks and returns their documents: no model
    elif name in ("doc-summary", "multi-vector"):
        assert len(summaries) == len(TOPICS)  # one summary a document
        assert setup.meter.total.prompt_tokens > 0
    else:
        assert summaries  # RAPTOR: one a cluster, per level
    if name in ("multi-vector", "parent-doc"):
        assert hits[0].doc_id == "d1" and hits[0].kind == "doc"


def test_parent_document_peer_returns_parent_chunks_of_a_long_document():
    """A document longer than a parent (2,000 characters) comes back as the parent chunk
    that holds the found child, named by its document and start, not as the whole
    document (two whole papers would not fit the model's context)."""
    long = make_document(120, topic="garden", prefix="garden ")  # ~4,700 characters
    docs = [PeerDoc("g", "Garden", long), PeerDoc("s", "Short", make_document(3))]
    setup = PeerSetup(llm=None, embedder=HashingEmbedder(), k=1)  # no model call
    peer = load_peer("parent-doc", setup)

    async def go():
        await peer.abuild(docs)
        return await peer.aretrieve("What is the garden item 97?")

    hits = asyncio.run(go())
    assert len(long) > 4000 and len(hits) == 1
    hit = hits[0]
    assert hit.doc_id == "g" and "garden item 97 " in hit.text
    assert len(hit.text) <= 2000 and hit.text in long
    assert hit.id == f"g@{long.index(hit.text)}"


@pytest.mark.parametrize("name", ["doc-summary", "multi-vector", "raptor"])
def test_a_stopped_peer_build_resumes_from_its_call_record(name, tmp_path):
    """A peer's build calls are kept (LlamaIndex's through its HTTP client, LangChain's
    through our chat model): built again with the same record, it makes no model call, is
    charged the same calls and tokens, and the seconds the calls took when made."""
    from cos_integrations.research.peers import CallRecord

    path = tmp_path / "peer-calls.jsonl"

    def build(model):
        with FakeOpenAIServer(model) as server:
            setup = _setup(server)
            setup.record = CallRecord(path)
            peer = load_peer(name, setup)

            async def go():
                await peer.abuild(_docs())
                return await peer.aretrieve("What is the garden item 7?")

            hits = asyncio.run(go())
        return setup, "\n".join(h.text for h in hits)

    first_model = ScriptedFakeModel(thesis_facts=3)
    first, first_text = build(first_model)
    made = len(first_model.calls)
    # RAPTOR can send one request twice in a build: the second is replayed, charged as made
    assert made >= 2 and first.meter.total.calls == made + first.record.replayed
    kept = {k["key"]: k for k in map(json.loads, path.read_text().splitlines())}
    assert len(kept) == made and all(k["seconds"] > 0 for k in kept.values())
    again_model = ScriptedFakeModel(thesis_facts=3)
    again, again_text = build(again_model)
    assert again_model.calls == [] and again.record.replayed == first.meter.total.calls
    assert again.meter.total == first.meter.total and again_text == first_text
    assert again.record.replayed_seconds == pytest.approx(
        sum(k["seconds"] for k in kept.values()) + first.record.replayed_seconds
    )
    if name == "raptor":
        return  # a new document re-clusters the tree: its prompts change, not checked here
    # a request the record does not hold is made (and kept): one more document
    more = ScriptedFakeModel(thesis_facts=3)
    with FakeOpenAIServer(more) as server:
        setup = _setup(server)
        setup.record = CallRecord(path)
        extra = PeerDoc("d9", "T9", make_document(12, topic="parking", prefix="parking "))
        asyncio.run(load_peer(name, setup).abuild([*_docs(), extra]))
    assert len(more.calls) == 1  # the new document's summary; the three others replayed


def test_a_raptor_build_that_clusters_with_umap_is_one_tree_and_resumes(tmp_path, monkeypatch):
    """Past 11 chunks the RAPTOR pack clusters with UMAP, which draws from numpy's global
    generator: built twice in one process, the generator elsewhere each time, the same
    documents give the same requests (the second build replays every call from the
    record), and the generator is left where it stood."""
    import numpy as np
    import umap

    from cos_integrations.research.peers import CallRecord

    fits = []
    fit_transform = umap.UMAP.fit_transform

    def counted(self, *args, **kwargs):  # the real fit, counted
        fits.append(len(args[0]))
        return fit_transform(self, *args, **kwargs)

    monkeypatch.setattr(umap.UMAP, "fit_transform", counted)
    # ~50 chunks of varied sentences: make_document's near-identical facts leave the
    # pack's mixture models (one to n-1 components) with collapsed samples, and they fail
    words = "apple river stone cloud engine garden lease parking oven violin tiger".split()

    def text(seed: int) -> str:
        pick = random.Random(seed).choice
        return " ".join(
            f"The {pick(words)} {pick(words)} of part {j} is {pick(words)}." for j in range(24)
        )

    docs = [PeerDoc(f"d{i}", f"T{i}", text(i)) for i in range(6)]
    path = tmp_path / "peer-calls.jsonl"

    def build(model, draws):
        np.random.rand(draws)  # the generator somewhere else before each build
        before = np.random.get_state()[1].copy()
        with FakeOpenAIServer(model) as server:
            setup = _setup(server)
            setup.chunk_words = 30
            setup.record = CallRecord(path)
            asyncio.run(load_peer("raptor", setup).abuild(docs))
        assert (np.random.get_state()[1] == before).all()
        return setup

    first_model = ScriptedFakeModel(thesis_facts=3)
    first = build(first_model, 3)
    assert fits and max(fits) > 11, fits  # UMAP ran on the leaf chunks
    made = len(first_model.calls)
    assert made >= 2
    again_model = ScriptedFakeModel(thesis_facts=3)
    again = build(again_model, 17)
    assert again_model.calls == [], f"{len(again_model.calls)} of {made} calls made again"
    assert again.meter.total == first.meter.total


def test_a_peer_needs_an_endpoint_and_names_are_checked():
    with pytest.raises(ValueError, match="unknown peer"):
        load_peer("nope", PeerSetup(llm=ScriptedFakeModel(), embedder=HashingEmbedder()))
    # a model without an OpenAI-compatible endpoint cannot drive LlamaIndex's OpenAILike
    with pytest.raises(PeerUnavailable, match="no OpenAI-compatible endpoint"):
        load_peer("doc-summary", PeerSetup(llm=ScriptedFakeModel(), embedder=HashingEmbedder()))


def test_usage_meter_counts_only_completions():
    meter = UsageMeter()
    meter.record_body(
        b'{"usage": {"prompt_tokens": 5, "completion_tokens": 2,'
        b' "prompt_tokens_details": {"cached_tokens": 3}}}'
    )
    meter.record_body(b"not json")  # a call all the same, without tokens
    assert meter.total.calls == 2
    assert (meter.total.prompt_tokens, meter.total.cached_tokens) == (5, 3)


def _dataset(path):
    with path.open("w") as fh:
        for i, t in enumerate(TOPICS):
            answer = [f"{t} value {j}{chr(97 + j)}" for j in range(12)]
            qas = [
                {"question": f"What is the {t} item {j}?", "answers": [answer[j]]}
                for j in range(4, 8)
            ]
            text = make_document(12, topic=t, prefix=f"{t} ")
            fh.write(json.dumps({"doc_id": f"d{i}", "title": f"T{i}", "text": text, "qas": qas}))
            fh.write("\n")
    return path


def test_peers_and_chunk_baselines_side_by_side_in_cos_eval(tmp_path):
    """rag, rag-ordered, rag-contextual and two peers over the same documents and test
    questions: one row each, the peers' ingest charged, the right document tracked."""
    docs = load_dataset(_dataset(tmp_path / "d.jsonl"))
    model = ScriptedFakeModel(thesis_facts=2)
    methods = ["rag", "rag-ordered", "rag-contextual", "doc-summary", "parent-doc"]
    with FakeOpenAIServer(model) as server:
        llm = OpenAIChatModel(model="fake", base_url=server.base_url, api_key="sk-test")
        result = asyncio.run(
            run_eval(
                llm,
                docs,
                methods=methods,
                config=CoSConfig.cos(iterations=0, train_questions=2, val_questions=1),
                out=tmp_path / "r.json",
                model_name="fake",
                dataset="d",
                retrieval=RetrievalEvalOptions(summary_method="zero-shot", test_half=True),
                oracle=False,
            )
        )
    m = result["methods"]
    assert result["errors"] == []
    for name in methods:
        assert m[name]["questions"] == 6, name  # the test half of 3 x 4
        assert 0.0 <= m[name]["right_doc_rate"] <= 1.0
    # DocumentSummaryIndex returns every chunk of its top-2 documents: the answers are in
    assert m["doc-summary"]["right_doc_rate"] == 1.0 and m["doc-summary"]["heldout_f1"] == 1.0
    assert m["doc-summary"]["ingest"]["calls_per_doc"] == 1.0
    assert m["parent-doc"]["ingest"]["calls_per_doc"] == 0.0
    # rag-ordered is rag's chunks in document order: the same context, the same tokens
    assert m["rag-ordered"]["context_tokens"] == m["rag"]["context_tokens"]
    names = [row[0] for row in retrieval_table(m)]
    assert names == ["rag", "rag-ordered", "rag-contextual", "doc-summary", "parent-doc"]
