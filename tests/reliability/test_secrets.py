"""An API key never lands in the store, Chroma, cache keys, to_dict(), logs or errors."""

import asyncio
import logging
from pathlib import Path

import pytest
from fakes import ScriptedFakeModel, make_document
from openai_server import FakeOpenAIServer

from cos_integrations import ChainOfSummaries, CoSConfig, CoSModelError, OpenAIChatModel
from cos_integrations.loaders import SourceDocument

KEY = "sk-proj-SECRETsecret1234567890abcdef"


def _files_contain(root: Path, needle: bytes, live_vectors: int) -> list[Path]:
    """Files under ``root`` that hold ``needle``. Chroma's HNSW ``length.bin`` is written at
    full capacity from an unzeroed malloc (chroma-core/chroma#7688), so its slots past the
    live vectors hold recycled heap of this process, not anything we stored: only the live
    float32 slots are checked there."""
    hits = []
    for p in root.rglob("*"):
        if not p.is_file():
            continue
        data = p.read_bytes()
        if p.name == "length.bin":
            data = data[: 4 * live_vectors]
        if needle in data:
            hits.append(p)
    return hits


def test_key_absent_from_store_chroma_and_logs(index, caplog, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    faults = [{"status": 429, "retry_after": "0"}, {"status": 500}, {"kind": "truncated"}]
    docs = [SourceDocument(doc_id=f"d{i}", text=make_document(6, topic=f"t{i}")) for i in range(3)]
    with (
        FakeOpenAIServer(ScriptedFakeModel(), faults=faults) as srv,
        caplog.at_level(logging.DEBUG),
    ):
        llm = OpenAIChatModel("fake", base_url=srv.base_url, backoff_base=0.01)  # key from env
        report = asyncio.run(index.aingest(docs, ChainOfSummaries(llm, CoSConfig.fast())))
    assert report.ok and len(report.summarized) == 3
    live = max(index.summaries.count(), index.chunks.count())
    index.store.close()
    assert not _files_contain(index.path, KEY.encode(), live)
    assert all(KEY not in r.getMessage() for r in caplog.records)
    assert KEY not in repr(llm) and KEY not in str(vars(llm))


def test_key_absent_from_errors_even_when_the_server_echoes_it():
    echo = {"status": 401}

    class EchoingServer(FakeOpenAIServer):
        pass

    with FakeOpenAIServer(faults=[echo]) as srv:
        # make the server's error message echo the key the way OpenAI's 401 does
        import json

        handler = srv._httpd.RequestHandlerClass
        original = handler._send

        def send(self, status, payload, extra=None):
            if status == 401:
                payload = {"error": {"message": f"Incorrect API key provided: {KEY}."}}
            return original(self, status, payload, extra)

        handler._send = send
        llm = OpenAIChatModel("fake", base_url=srv.base_url, api_key=KEY)
        with pytest.raises(CoSModelError) as info:
            asyncio.run(llm.chat([{"role": "user", "content": "hi"}]))
        json.dumps(str(info.value))
    assert info.value.status == 401 and KEY not in str(info.value)
    assert "Incorrect API key provided" in str(info.value)


def test_key_absent_from_framework_serialisation_and_cache_keys():
    pytest.importorskip("llama_index.core")
    from llamaindex_ext import CoSSummaryTransform

    llm = OpenAIChatModel("fake", base_url="http://127.0.0.1:9/v1", api_key=KEY, timeout=3)
    t = CoSSummaryTransform(llm=llm, config=CoSConfig.fast(), concurrency=9)
    assert KEY not in str(t.to_dict()) and KEY not in t.to_json()
    from llama_index.core.ingestion.pipeline import get_transformation_hash

    other = CoSSummaryTransform(
        llm=OpenAIChatModel("fake", base_url="http://x/v1", api_key="sk-other", timeout=99),
        config=CoSConfig.fast(),
        concurrency=1,
    )
    assert get_transformation_hash([], t) == get_transformation_hash([], other)
