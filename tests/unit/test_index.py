"""The index on a real Chroma PersistentClient: ingest, idempotence, replacement, repair."""

import asyncio

import pytest
from fakes import ScriptedFakeModel, make_document

from cos_integrations import ChainOfSummaries, CoSConfig
from cos_integrations.embedded.embeddings import HashingEmbedder
from cos_integrations.loaders import SourceDocument
from cos_integrations.serving.hit_rule import HitRule
from cos_integrations.serving.index import CoSIndex, flatten_metadata


def docs(n=3, prefix=""):
    topics = ["lease", "rent", "garden", "parking", "heating"]
    return [
        SourceDocument(
            doc_id=f"doc{i}",
            text=make_document(6, topic=topics[i], prefix=prefix),
            source=f"/data/doc{i}.txt",
            title=f"Doc {i}",
        )
        for i in range(n)
    ]


def ingest(index, engine, documents):
    return asyncio.run(index.aingest(documents, engine, concurrency=2))


def test_ingest_writes_store_summaries_and_chunks(index, engine):
    report = ingest(index, engine, docs())
    assert sorted(report.summarized) == ["doc0", "doc1", "doc2"] and report.ok
    assert index.summaries.count() == 3
    got = index.summaries.get(include=["metadatas", "documents"])
    meta = {m["doc_id"]: m for m in got["metadatas"]}
    assert meta["doc1"]["source"] == "/data/doc1.txt" and meta["doc1"]["cos_version"] == 1
    assert all(isinstance(v, (str, int, float, bool)) for m in got["metadatas"] for v in m.values())
    chunks = index.chunks.get(include=["metadatas"])
    assert {m["doc_id"] for m in chunks["metadatas"]} == {"doc0", "doc1", "doc2"}
    assert index.store.get_document("doc0").status == "summarized"
    assert index.store.questions("doc0")
    assert index.manifest["embedding"]["name"] == "hashing-bow-256"


def test_reingest_unchanged_makes_no_model_call(index, engine, fake_model):
    ingest(index, engine, docs())
    before = len(fake_model.calls)
    report = ingest(index, engine, docs())
    assert len(fake_model.calls) == before
    assert sorted(report.unchanged) == ["doc0", "doc1", "doc2"] and not report.summarized
    assert index.summaries.count() == 3


def test_changed_document_replaces_its_vectors(index, engine):
    ingest(index, engine, docs())
    old_chunks = index.chunks.get(where={"doc_id": "doc1"})["ids"]
    changed = docs()
    changed[1].text = make_document(6, topic="rent", prefix="new ")
    report = ingest(index, engine, changed)
    assert report.summarized == ["doc1"]
    summaries = index.summaries.get(where={"doc_id": "doc1"}, include=["documents", "metadatas"])
    assert len(summaries["ids"]) == 1 and "new value" in summaries["documents"][0]
    assert summaries["metadatas"][0]["cos_version"] == 2
    new_chunks = index.chunks.get(where={"doc_id": "doc1"}, include=["documents"])
    assert all("new value" in d for d in new_chunks["documents"])
    assert len(new_chunks["ids"]) == len(old_chunks)
    assert index.summaries.count() == 3


def test_config_change_resummarises(index, fake_model):
    ingest(index, ChainOfSummaries(fake_model, CoSConfig.fast()), docs(1))
    report = ingest(index, ChainOfSummaries(fake_model, CoSConfig.fast(iterations=1)), docs(1))
    assert report.summarized == ["doc0"]


def test_failure_on_one_document_keeps_the_others_and_retries_next_run(index):
    class FailsOnGarden(ScriptedFakeModel):
        broken = True

        async def chat(self, messages, **kw):
            if self.broken and "garden" in messages[0]["content"]:
                raise RuntimeError("HTTP 500 from the model")
            return await super().chat(messages, **kw)

    model = FailsOnGarden()
    engine = ChainOfSummaries(model, CoSConfig.fast())
    report = ingest(index, engine, docs())
    assert set(report.failed) == {"doc2"} and sorted(report.summarized) == ["doc0", "doc1"]
    assert "HTTP 500" in index.store.get_document("doc2").error
    assert index.summaries.count() == 2
    model.broken = False
    report = ingest(index, engine, docs())
    assert report.summarized == ["doc2"] and sorted(report.unchanged) == ["doc0", "doc1"]
    assert index.summaries.count() == 3


def test_empty_document_is_skipped_and_reported(index, engine):
    documents = docs(2)
    documents.append(SourceDocument(doc_id="empty", text="   "))
    report = ingest(index, engine, documents)
    assert report.skipped == {"empty": "empty text"} and len(report.summarized) == 2


def test_crash_between_store_and_chroma_is_repaired_without_model_calls(index, engine, fake_model):
    ingest(index, engine, docs())
    # Simulate a crash after the store commit: vectors for doc1 missing, marks stale.
    index.summaries.delete(where={"doc_id": "doc1"})
    index.chunks.delete(where={"doc_id": "doc1"})
    index.store.mark_indexed("doc1", None, "stale")
    calls = len(fake_model.calls)
    report = ingest(index, engine, docs())
    assert report.repaired == ["doc1"] and len(fake_model.calls) == calls
    assert len(index.summaries.get(where={"doc_id": "doc1"})["ids"]) == 1
    assert index.chunks.get(where={"doc_id": "doc1"})["ids"]


def test_reopen_from_manifest_and_refuse_other_embedder(tmp_path, engine):
    idx = CoSIndex(tmp_path / "ix", embedder=HashingEmbedder(128))
    ingest(idx, engine, docs(1))
    again = CoSIndex(tmp_path / "ix", create=False)
    assert again.embedder.name == "hashing-bow-128" and again.summaries.count() == 1
    import pytest

    with pytest.raises(ValueError, match="hashing-bow-128"):
        CoSIndex(tmp_path / "ix", embedder=HashingEmbedder(64))
    with pytest.raises(FileNotFoundError, match="not a CoS index"):
        CoSIndex(tmp_path / "nothing", create=False)


def test_flatten_metadata_reports_each_change():
    warnings = []
    out = flatten_metadata(
        {"a": 1, "b": None, "c": ["x", 1], "d": {"k": "v"}, "e": True, "f": object()},
        warn=warnings.append,
    )
    assert out["a"] == 1 and out["e"] is True and "b" not in out
    assert out["c"] == '["x", 1]' and out["d"] == '{"k": "v"}' and isinstance(out["f"], str)
    assert len(warnings) == 4


def test_telemetry_off_and_the_applications_own_client_on_the_same_path(tmp_path):
    """Chroma telemetry is off for library users, and an application's own PersistentClient
    on the index path works whether it was opened before or after the index (Chroma allows
    one set of settings per path and process). A fresh process: the environment is clean."""
    import subprocess
    import sys

    code = """
import os, sys, chromadb
from cos_integrations.embedded.embeddings import HashingEmbedder
from cos_integrations.serving.index import CoSIndex
os.environ.pop("ANONYMIZED_TELEMETRY", None)
before, after = sys.argv[1], sys.argv[2]
theirs = chromadb.PersistentClient(path=before)            # the application first
CoSIndex(before, embedder=HashingEmbedder(64)).summaries.count()
ours = CoSIndex(after, embedder=HashingEmbedder(64))       # the index first
late = chromadb.PersistentClient(path=after)
print(ours.client.get_settings().anonymized_telemetry, late.get_settings().anonymized_telemetry)
"""
    res = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "a"), str(tmp_path / "b")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split() == ["False", "False"]


def test_threshold_is_calibrated_from_the_questions_people_asked_and_kept(index):
    """A bag-of-words embedder's cosines sit far below e5's: the fixed 0.80 would never ask
    the judge. An index calibrates its threshold from the human and miss questions of its
    banks (synthetic ones sit too close to their summary), stores it in the manifest, keeps
    it on reopen; a retriever uses it unless given its own."""
    import asyncio

    from fakes import ScriptedFakeModel, make_document

    from cos_integrations import ChainOfSummaries, CoSConfig, QAPair
    from cos_integrations.defaults import DEFAULT_THRESHOLD
    from cos_integrations.loaders import SourceDocument
    from cos_integrations.serving.retrieval import FallbackRetriever

    topics = ("lease", "garden", "heat")
    docs = [SourceDocument(t, make_document(8, topic=t)) for t in topics]
    engine = ChainOfSummaries(ScriptedFakeModel(thesis_facts=2), CoSConfig.fast(iterations=0))
    asyncio.run(index.aingest(docs, engine))
    assert index.store.questions("lease")  # synthetic questions only: not calibrated
    assert index.threshold == DEFAULT_THRESHOLD and "threshold" not in index.manifest
    asked = [(t, f"Which value does the {t} item {i} have?") for t in topics for i in range(4)]
    for doc_id, q in asked:
        index.store.add_question(doc_id, QAPair(question=q, answers=["x"], origin="miss"))
    t = index.calibrate_threshold()
    assert t == index.threshold and 0.0 < t < DEFAULT_THRESHOLD
    # the quantile: about three in four known questions reach it with their own summary
    reached = sum(index.search_summaries(q, 3)[0].score >= t for _, q in asked) / len(asked)
    assert reached >= 0.75
    assert index.manifest["threshold"] == {"value": t, "questions": 12, "quantile": 0.25}
    assert FallbackRetriever(index).threshold == t
    assert FallbackRetriever(index, rule=HitRule(threshold=0.5)).threshold == 0.5
    index.store.close()
    reopened = CoSIndex(index.path)
    assert reopened.threshold == t
    assert reopened.calibrate_threshold([("lease", "What is the lease item 1?")]) is None
    assert reopened.threshold == t  # too few questions: unchanged
    reopened.store.close()


def test_a_read_that_raced_a_publish_is_asked_again_and_other_errors_are_not():
    from cos_integrations.serving.index import read_racing_writes

    calls = []

    def flaky(**kw):
        calls.append(kw)
        if len(calls) == 1:
            raise RuntimeError("Error executing plan: Internal error: Error finding id")
        if len(calls) == 2:  # another process's first writes to the collection, not on disk
            raise RuntimeError(
                "Error executing plan: Internal error: Error creating hnsw segment reader: "
                "Nothing found on disk"
            )
        return {"ids": [["a"]]}

    assert read_racing_writes(flaky, n_results=1) == {"ids": [["a"]]}
    assert len(calls) == 3 and calls[0] == {"n_results": 1}

    def broken():
        calls.append(1)
        raise ValueError("no such collection")

    calls.clear()
    with pytest.raises(ValueError):
        read_racing_writes(broken)
    assert len(calls) == 1  # not a race: raised at once

    def always():
        raise RuntimeError("Error finding id")

    with pytest.raises(RuntimeError):
        read_racing_writes(always, attempts=2)


def _collections(index):
    out = {}
    for name, col in (("summaries", index.summaries), ("chunks", index.chunks)):
        got = col.get(include=["documents", "metadatas", "embeddings"])
        out[name] = {
            i: (d, m, [round(float(x), 6) for x in e])
            for i, d, m, e in zip(
                got["ids"], got["documents"], got["metadatas"], got["embeddings"], strict=True
            )
        }
    return out


def test_bulk_sync_writes_what_one_by_one_sync_writes(tmp_path):
    """sync_documents (batched Chroma writes) leaves the same vectors, texts and metadata
    as sync_document a document at a time, drops a retired document's and an older
    version's vectors, and marks every document indexed."""

    def load(path, bulk):
        index = CoSIndex(path, embedder=HashingEmbedder(), chunk_words=12)
        for d in docs(5):
            index.store.upsert_document(d.doc_id, d.text, title=d.title)
            index.store.publish_version(
                d.doc_id, f"{d.title} v1", expected_version=None, created_by="t"
            )
        index.store.publish_version("doc2", "Doc 2 v2", expected_version=1, created_by="t")
        ids = [d.doc_id for d in docs(5)]
        if bulk:
            index.sync_documents(ids, batch=2)
        else:
            for doc_id in ids:
                index.sync_document(doc_id)
        index.store.retire_document("doc4")
        index.store.publish_version("doc1", "Doc 1 v2", expected_version=1, created_by="t")
        if bulk:
            index.sync_documents(["doc4", "doc1"])
        else:
            index.sync_document("doc4")
            index.sync_document("doc1")
        return index

    one, many = load(tmp_path / "one", False), load(tmp_path / "many", True)
    assert _collections(many) == _collections(one)
    got = _collections(many)
    assert "doc2::summary::v2" in got["summaries"] and "doc1::summary::v2" in got["summaries"]
    assert not any(k.startswith(("doc4::", "doc1::summary::v1")) for k in got["summaries"])
    assert not any(k.startswith("doc4::") for k in got["chunks"])
    assert len({k.split("::")[0] for k in got["chunks"]}) == 4
    assert many.store.needs_index() == []


def test_a_summary_records_its_chunk_count_and_the_chunks_read_by_id_match(tmp_path):
    """The summary vector says how many source chunks its document has (also after a
    summary-only re-sync), and reading a document's chunks by those ids ranks them as the
    metadata filter does."""
    index = CoSIndex(tmp_path / "i", embedder=HashingEmbedder(), chunk_words=12)
    for d in docs(3):
        index.store.upsert_document(d.doc_id, d.text, title=d.title)
        index.store.publish_version(
            d.doc_id, f"{d.title} v1", expected_version=None, created_by="t"
        )
    index.sync_documents([d.doc_id for d in docs(3)])
    index.store.publish_version("doc1", "Doc 1 v2", expected_version=1, created_by="t")
    index.sync_document("doc1")  # the summary alone changed: chunks are not rewritten

    def counts():
        got = index.summaries.get(include=["metadatas"])
        return {m["doc_id"]: m["cos_chunks"] for m in got["metadatas"]}

    chunks = index.chunks.get(include=["metadatas"])["metadatas"]
    real = {d: sum(m["doc_id"] == d for m in chunks) for d in ("doc0", "doc1", "doc2")}
    assert counts() == real and min(real.values()) > 1
    q = "What is the rent item 3?"
    by_filter = index.search_chunks(q, 2, doc_ids=["doc1"])
    by_id = index.search_chunks(q, 2, doc_ids=["doc1"], chunk_counts=counts())
    assert [(h.id, round(h.score, 6)) for h in by_id] == [
        (h.id, round(h.score, 6)) for h in by_filter
    ]
    assert len(by_id) == 2 and {h.doc_id for h in by_id} == {"doc1"}


def test_processes_opening_one_index_at_once_never_break_its_manifest(tmp_path):
    """Refine workers open the same index together: each replaces the manifest whole
    through its own temporary file (a shared one raced: FileNotFoundError in CI)."""
    import json
    import threading

    from cos_integrations.embedded.embeddings import HashingEmbedder

    index = CoSIndex(tmp_path / "ix", embedder=HashingEmbedder(64))
    barrier = threading.Barrier(8)
    errors = []

    def write(i: int) -> None:
        barrier.wait()
        try:
            for n in range(20):
                index.page_sections = (i + n) % 2 == 0  # a change: every call writes
                index._write_manifest()
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    manifest = json.loads((index.path / "manifest.json").read_text())
    assert manifest["format"] == "cos-index"
    assert not list(index.path.glob("manifest.json*.tmp"))
    assert oct((index.path / "manifest.json").stat().st_mode & 0o777) == "0o644"
    index.store.close()
