"""`cos ingest` killed with SIGKILL at three points; a re-run repairs and resumes."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from urllib.parse import urlsplit

import pytest
from fakes import ScriptedFakeModel, make_document
from openai_server import FakeOpenAIServer

from cos_integrations.serving.index import CoSIndex

TOPICS = ["lease", "garden", "parking", "heating", "water"]


@pytest.fixture
def folder(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    for t in TOPICS:
        (d / f"{t}.txt").write_text(make_document(6, topic=t))
    return d


@pytest.fixture(params=["sqlite", "postgresql+chroma-server"])
def where(request, monkeypatch):
    """Extra `cos ingest` options for the stack under test (none: SQLite, Chroma on disk);
    with PostgreSQL the test process itself reopens the index from its manifest, so the
    password comes from the environment, as it would for any later command."""
    if request.param == "sqlite":
        return []
    url = request.getfixturevalue("postgres_url")
    monkeypatch.setenv("PGPASSWORD", urlsplit(url).password)
    return ["--store-url", url, "--chroma-url", request.getfixturevalue("chroma_server")]


def ingest(folder, index, url, kill_at=None, extra=()):
    env = {**os.environ, "COS_BASE_URL": url, "OPENAI_API_KEY": "sk-test"}
    env.pop("COS_FAULT_KILL_AT", None)
    if kill_at:
        env["COS_FAULT_KILL_AT"] = kill_at
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cos_integrations.cli",
            "ingest",
            str(folder),
            "--index",
            str(index),
            "--embedder",
            "hashing",
            "--preset",
            "cos-fast",
            "--concurrency",
            "1",
            *extra,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def check_index(index_path):
    index = CoSIndex(index_path, create=False)
    docs = {d.doc_id: d for d in index.store.documents()}
    assert len(docs) == len(TOPICS) and all(d.status == "summarized" for d in docs.values())
    per_doc = Counter(m["doc_id"] for m in index.summaries.get(include=["metadatas"])["metadatas"])
    assert per_doc == Counter({d: 1 for d in docs})  # one summary vector each, no duplicate
    chunks = index.chunks.get(include=["metadatas"])["metadatas"]
    by_doc = Counter(m["doc_id"] for m in chunks)
    assert set(by_doc) == set(docs)
    ids = index.chunks.get()["ids"]
    assert len(ids) == len(set(ids))
    assert not index.store.needs_index()
    return index


def model_docs(srv, start=0):
    """Documents whose thesis was requested at or after request number ``start``."""
    out = []
    for body in srv.requests[start:]:
        last = body["messages"][-1]["content"]
        if "Write an information-dense summary" in last:
            out.append(re.search(r"<document>\nThe (\w+) item", body["messages"][0]["content"])[1])
    return out


@pytest.mark.parametrize("point", ["after_store_commit", "during_chunk_write"])
def test_killed_at_a_write_point_then_resumed(folder, tmp_path, point, where):
    with FakeOpenAIServer(ScriptedFakeModel()) as srv:
        first = ingest(folder, tmp_path / "ix", srv.base_url, kill_at=point, extra=where)
        out, _ = first.communicate(timeout=300)
        assert first.returncode == -signal.SIGKILL, out
        done_before = model_docs(srv)
        assert len(done_before) == 1  # killed while writing the first document
        mark = len(srv.requests)
        second = ingest(folder, tmp_path / "ix", srv.base_url, extra=where)
        out, _ = second.communicate(timeout=300)
        assert second.returncode == 0, out
        redone = model_docs(srv, mark)
    assert "repaired vectors of 1 documents" in out
    # the document whose summary was committed is not summarised again
    assert sorted(redone) == sorted(set(TOPICS) - set(done_before))
    check_index(tmp_path / "ix")
    if where:  # it ran on PostgreSQL and the Chroma server, not on local files
        assert not (tmp_path / "ix" / "cos.sqlite").exists()
        assert CoSIndex(tmp_path / "ix", create=False).store.backend.name == "postgresql"


def test_killed_during_summarisation_then_resumed(folder, tmp_path):
    with FakeOpenAIServer(ScriptedFakeModel()) as srv:
        first = ingest(folder, tmp_path / "ix", srv.base_url)
        deadline = time.monotonic() + 120
        while len(model_docs(srv)) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=60)
        index = CoSIndex(tmp_path / "ix", create=False)
        finished = {
            d.doc_id.split("/")[-1][:-4]
            for d in index.store.documents()
            if d.status == "summarized"
        }
        index.store.close()
        assert 1 <= len(finished) < len(TOPICS)
        mark = len(srv.requests)
        second = ingest(folder, tmp_path / "ix", srv.base_url)
        out, _ = second.communicate(timeout=300)
        assert second.returncode == 0, out
        redone = model_docs(srv, mark)
    assert not set(redone) & finished  # finished documents cost nothing
    assert set(redone) | finished == set(TOPICS)
    check_index(tmp_path / "ix")
    json.dumps(out)  # the run's output is plain text
