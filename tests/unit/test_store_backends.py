"""The store's behaviour on both backends (a SQLite file, a real PostgreSQL database), the
bad-input paths of a store URL, and `cos migrate-store`."""

import asyncio
import subprocess
import sys
import time

import pytest
from fakes import ScriptedFakeModel, make_document

from cos_integrations import ChainOfSummaries, CoSConfig
from cos_integrations.embedded.embeddings import HashingEmbedder
from cos_integrations.loaders import SourceDocument
from cos_integrations.serving.index import CoSIndex
from cos_integrations.serving.stats import compute_stats
from cos_integrations.storage.answers import question_key
from cos_integrations.storage.db import StoreError, redact_url
from cos_integrations.storage.refine_queue import STILL_MISSES
from cos_integrations.storage.store import SCHEMA_VERSION, SummaryStore
from cos_integrations.summarize.questions import QAPair


@pytest.fixture
def store(store_url):
    s = SummaryStore(store_url)
    yield s
    s.close()


def test_documents_versions_and_compare_and_swap(store):
    assert store.schema_version == SCHEMA_VERSION
    assert store.upsert_document("d1", "Rent is due on the 5th.", source="lease.txt", title="L")
    assert not store.upsert_document("d1", "Rent is due on the 5th.", source="lease.txt")
    assert store.upsert_document("d1", "Rent is due on the 6th.", source="lease.txt")
    assert store.get_document("d1").status == "pending" and store.get_document("nope") is None
    v1 = store.publish_version("d1", "Rent: 6th.", expected_version=None, created_by="cos")
    assert v1 == 1
    assert store.publish_version("d1", "lost", expected_version=None, created_by="cos") is None
    v2 = store.publish_version("d1", "Rent: the 6th.", expected_version=1, created_by="human")
    assert v2 == 2 and store.get_document("d1").pinned  # a human version pins
    v3 = store.publish_version("d1", "Refined.", expected_version=2, created_by="refine")
    assert store.current_summary("d1").version == 2  # pinned: a suggestion
    assert [v.status for v in store.versions("d1")] == ["published", "published", "suggested"]
    assert not store.set_current("d1", v3, expected_version=1)  # stale: refused
    assert store.set_current("d1", v3, expected_version=2)
    assert store.current_summary("d1").text == "Refined."
    with pytest.raises(KeyError):
        store.set_current("d1", 99)
    assert store.is_current("d1", store.get_document("d1").content_hash, "any")  # refine's


def test_questions_events_stats_overview_and_audit(store):
    store.upsert_document("d1", "x " * 400, title="One")
    store.upsert_document("d2", "y " * 40, title="Two")
    store.publish_version("d1", "S1", expected_version=None, created_by="cos", flags=["f"])
    q = QAPair(question="When is rent due?", answers=["the 5th"], origin="human")
    assert store.add_question("d1", q) and not store.add_question("d1", q)
    assert [x.question for x in store.questions("d1")] == ["When is rent due?"]
    for kind, doc in [("hit", "d1"), ("miss", "d2"), ("miss", "d2"), ("not_in_source", "d2")]:
        store.record_event(kind, doc, f"{kind} query", context_tokens=10)
    assert store.event_counts() == {"hit": 1, "miss": 2, "not_in_source": 1}
    assert [e["query"] for e in store.recent_events("miss", 1)] == ["miss query"]
    s = compute_stats(store)
    assert (s.hits, s.misses, s.not_in_source) == (1, 2, 1)
    assert list(s.per_day.values()) == [(1, 4)]
    rows, total = store.document_rows(sort="missed")
    assert total == 2 and [r.doc_id for r in rows] == ["d2", "d1"]
    assert rows[1].flags == 1 and rows[1].current_version == 1 and rows[0].misses == 2
    assert store.document_rows(where="flagged")[1] == 1
    store.record_action("ana", "pin", "d1", 1, "why")
    (a,) = store.actions("d1")
    assert (a.user, a.action, a.version, a.detail) == ("ana", "pin", 1, "why")


def test_refine_queue(store):
    store.upsert_document("d1", "text")
    a = store.enqueue("d1", "When is rent due?")
    assert store.enqueue("d1", "when is rent due") == a  # the same open job
    b = store.enqueue("d1", "Who pays water?")
    job = store.lease("w1")
    assert job.id == a and job.status == "leased" and job.attempts == 1
    assert store.lease("w2").id == b and store.lease("w3") is None
    assert store.finish_job(a, "w1", "published", "ok", version=2)
    assert not store.finish_job(a, "w1", "published")  # already closed
    assert store.job(a).version == 2
    assert store.fail_job(b, "w2", "boom", max_attempts=1) == "dead"
    assert store.job_counts() == {"published": 1, "dead": 1}
    assert store.retry_job(b) and not store.retry_job(b)
    job = store.lease("w2")
    assert store.finish_job(job.id, "w2", "not_in_source")
    assert (
        store.not_in_source("d1", "who pays water")
        and store.enqueue("d1", "Who pays water?") is None
    )
    assert [j.id for j in store.jobs_for(["d1"])] == [b, a]


def test_lease_prefers_free_documents_and_a_conflict_spends_no_attempt(store):
    """A second worker takes a job of a document nobody holds before a second job of a held
    one (two rounds on one document race, the loser's calls are wasted); a job requeued
    after a publish conflict keeps its attempts, so losing races never makes it dead."""
    for d in ("d1", "d2"):
        store.upsert_document(d, "text")
    a1 = store.enqueue("d1", "When is rent due?")
    a2 = store.enqueue("d1", "Who pays water?")
    b1 = store.enqueue("d2", "Where is parking?")
    assert store.lease("w1").id == a1
    assert store.lease("w2").id == b1  # not a2: d1 is held by w1
    assert store.lease("w3").id == a2  # nothing free left: the held document's job
    for _ in range(5):  # more races than max_attempts
        assert store.requeue_job(a2, "w3", "version changed during refinement")
        job = store.lease("w3")
        assert job.id == a2 and job.attempts == 1
    assert not store.requeue_job(a2, "w9", "not its lease")
    assert store.fail_job(a2, "w3", "boom", max_attempts=2) == "pending"
    assert store.job(a2).error == "boom"


def test_verified_answers_keep_the_first_reading_of_the_current_text(store):
    """Issue 56 items 1 and 4, on both backends: an entry per question key; a reading
    never replaces one kept before it (the chunks' answer before a refine job's, before a
    hit's), one kept after it does; an entry is served only for the text it was verified
    on, and a changed text drops it."""
    q = "When is rent due?"
    store.upsert_document("d1", "Rent is due on the 5th. Water is paid by the owner.")
    store.upsert_document("d2", "Rent is due on the 1st.")
    assert store.answer_for(question_key(q)) is None
    hit = store.put_answer("d1", q, "the 5th", "Rent is due on the 5th.", "hit", version=1)
    assert (hit.origin, hit.version, hit.served, hit.bar) == ("hit", 1, 0, None)
    assert store.put_answer("d2", q, "the 1st", "Rent is due on the 1st.", "check") is None
    miss = store.put_answer(
        "d2", " when is RENT due ", "the 1st", "Rent is due on the 1st.", "miss"
    )
    assert miss.id != hit.id and store.answer_for(question_key(q)).doc_id == "d2"
    assert store.put_answer("d1", q, "the 5th", "Rent is due on the 5th.", "miss") is None
    # the chunks' answer stays: a refine job's reading of the whole source does not replace it
    assert store.put_answer("d1", q, "the 5th", "Rent is due on the 5th.", "refine") is None
    assert store.answer_ids([hit.id, miss.id]) == [miss.id]
    owner = "Who owns it?"
    hit2 = store.put_answer("d1", owner, "Ann", "Rent is due on the 5th.", "hit")
    refine = store.put_answer("d1", owner, "the owner", "Water is paid by the owner.", "refine")
    assert store.answer_ids([hit2.id, refine.id]) == [refine.id]
    with pytest.raises(ValueError, match="origin"):
        store.put_answer("d1", q, "a", "b", "guess")
    water = store.put_answer(
        "d1", "Who pays water?", "the owner", "Water is paid by the owner.", "miss"
    )
    store.raise_bar(water.id, 0.97)
    store.raise_bar(water.id, 0.95)  # a bar never falls this way
    store.note_served(water.id)
    assert store.answers_by_id([water.id])[water.id].bar == pytest.approx(0.97)
    assert store.answers_by_id([water.id])[water.id].served == 1
    assert [e.id for e in store.answers("d1")] == [refine.id, water.id]
    # a text that changed: its entries go, the unchanged document's stay
    assert (
        store.upsert_document("d1", "Rent is due on the 5th. Water is paid by the owner.") is False
    )
    assert len(store.answers("d1")) == 2
    store.upsert_document("d1", "Rent is due on the 7th.")
    assert store.answers("d1") == [] and store.answer_for(question_key(owner)) is None
    assert store.answers_by_id([water.id]) == {}
    assert store.answer_for(question_key(q)).id == miss.id  # d2's text did not change
    old = store.get_document("d2").content_hash
    store.put_answer("d2", q, "the 1st", "Rent is due on the 1st.", "miss", content_hash=old)
    assert store.answer_for(question_key(q)).doc_id == "d2"
    assert store.put_answer("d2", "Q?", "x", "y", "miss", content_hash="0" * 64) is None
    store.retire_document("d2")  # retired: kept, never served
    assert store.answer_for(question_key(q)) is None and store.answer_count() == 1
    store.delete_document("d2")
    assert store.answer_count() == 0


def test_a_worker_with_min_asks_takes_a_job_only_once_its_question_came_back(store):
    """Issue 56 item 3: ``min_asks=2`` refines where a question came back and missed again,
    not on its first miss; a job that waits counts each miss of its question once."""
    store.upsert_document("d1", "Rent is due on the 5th.")
    job = store.enqueue("d1", "When is rent due?")
    assert store.lease("w1", min_asks=2) is None
    assert store.enqueue("d1", "when is RENT due") == job  # the question came back
    leased = store.lease("w1", min_asks=2)
    assert (leased.id, leased.asks) == (job, 2)
    other = store.enqueue("d1", "Who pays water?")
    assert store.lease("w2", min_asks=2) is None and store.lease("w2").id == other


def test_a_refine_job_is_not_run_twice_on_the_same_text(store):
    """Issue 56 item 3: whatever a job found for a question on a text, a second round on
    the same text would find again; a new text may answer it."""
    store.upsert_document("d1", "Rent is due on the 5th.")
    job = store.enqueue("d1", "When is rent due?")
    assert store.enqueue("d1", "when is RENT due") == job  # still open: the same job
    assert store.lease("w1").id == job
    store.finish_job(job, "w1", "rejected", STILL_MISSES)
    assert store.enqueue("d1", "When is rent due?") is None
    failed = store.enqueue("d1", "Who pays water?")
    assert store.lease("w1").id == failed
    store.fail_job(failed, "w1", "timeout", max_attempts=1)
    store.drop_job(failed)
    assert store.enqueue("d1", "Who pays water?") not in (None, failed)  # it never ran
    store.upsert_document("d1", "Rent is due on the 1st.")
    assert store.enqueue("d1", "When is rent due?") not in (None, job)


def test_the_routers_checks_of_a_summary_go_when_the_summary_or_its_text_changes(store):
    """Issue 57: a check's outcome is about the summary that answered. A new summary (a
    refinement published, a revert, a fresh run) or a new text drops the document's
    outcomes, so the router learns the new summary afresh instead of holding the old one's
    disagreements against it; other documents' outcomes stay; a pinned document's
    suggestion changes nothing until it is accepted."""
    for doc in ("d1", "d2"):
        store.upsert_document(doc, f"Rent of {doc} is due on the 5th.")
        store.publish_version(doc, "Rent: 5th.", expected_version=None, created_by="cos")

    def disagree(doc: str, n: int = 2) -> None:
        for i in range(n):
            store.record_check(doc, f"Q{i}?", 0.9, "the 4th", "the 5th", False)

    disagree("d1")
    disagree("d2")
    assert store.check_counts() == (4, 4)
    store.publish_version("d1", "Rent: the 5th.", expected_version=1, created_by="refine")
    assert store.check_counts_by_document() == {"d2": (2, 2)}
    disagree("d1")
    store.set_current("d1", 1)  # a revert
    assert store.check_counts() == (2, 2)
    disagree("d1")
    store.set_current("d1", 1)  # the version already served: its outcomes stay
    assert store.check_counts() == (4, 4)
    disagree("d1")
    store.upsert_document("d1", "Rent of d1 is due on the 6th.")  # a new text
    assert store.check_counts_by_document() == {"d2": (2, 2)}
    store.set_pinned("d2", True)
    store.publish_version("d2", "Refined.", expected_version=1, created_by="refine")
    assert store.check_counts() == (2, 2)  # a suggestion: the served summary is the same


def test_open_without_schema_and_newer_schema_are_clear_errors(store_url, store):
    store.upsert_document("d1", "x")
    store.backend.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    with pytest.raises(StoreError, match="newer than this"):
        SummaryStore(store_url)


def test_postgres_without_schema_is_refused_when_not_creating(postgres_url):
    with pytest.raises(StoreError, match="no cos-integrations schema"):
        SummaryStore(postgres_url, create=False)


def test_a_store_that_cannot_be_opened_leaves_no_connection_pool_behind(postgres_server):
    import threading

    newer, empty = postgres_server.new_database(), postgres_server.new_database()
    store = SummaryStore(newer)
    store.backend.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    store.close()
    before = set(threading.enumerate())
    for url, create in ((newer, True), (empty, False)):  # a newer schema; none
        with pytest.raises(StoreError) as refused:
            SummaryStore(url, create=create)
        # the pool the failed open used is closed, its threads stopped, while the error
        # (and the store in its traceback) is still held: none is left for the garbage
        # collector (psycopg_pool's __del__ then tries to join its own thread)
        for thread in set(threading.enumerate()) - before:
            if thread.name.startswith("cos-store"):
                thread.join(timeout=2)
        left = [t.name for t in set(threading.enumerate()) - before if t.name.startswith("cos")]
        assert not left, (refused.value, left)


def cos(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "cos_integrations.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@pytest.fixture
def small_index(tmp_path):
    index = CoSIndex(tmp_path / "index", embedder=HashingEmbedder(256), config=CoSConfig.fast())
    engine = ChainOfSummaries(ScriptedFakeModel(thesis_facts=2), CoSConfig.fast(iterations=0))
    docs = [
        SourceDocument(doc_id=f"docs/{t}.md", text=make_document(6, topic=t))
        for t in ("lease", "garden", "parking")
    ]
    asyncio.run(index.aingest(docs, engine))
    index.store.record_event("miss", "docs/lease.md", "Who fixes the roof?")
    index.store.enqueue("docs/lease.md", "Who fixes the roof?")
    index.store.record_action("ana", "pin", "docs/lease.md", 1, "")
    index.store.close()
    return index


def test_bad_store_urls_are_one_line_errors_naming_the_url_without_password(
    small_index, postgres_server
):
    import pg_server

    bad = {
        "unreachable": f"postgresql://cos:hunter2@127.0.0.1:{pg_server._free_port()}/x",
        "wrong password": postgres_server.url("postgres", password="hunter2"),
        "no database": f"{postgres_server.url('no_such_db')[:-10]}no_such_db".replace(
            "cos-test-pw", "hunter2"
        ),
        "not a store URL": "mysql://cos:hunter2@db/cos",
    }
    before = (small_index.path / "cos.sqlite").stat().st_mtime_ns
    for why, url in bad.items():
        out = cos("review", "--index", str(small_index.path), "--store-url", url)
        assert out.returncode == 2, (why, out.stdout, out.stderr)
        lines = [x for x in out.stderr.splitlines() if x.strip()]
        assert len(lines) == 1 and lines[0].startswith("error:"), (why, out.stderr)
        assert "hunter2" not in out.stderr + out.stdout, why
        if why != "not a store URL":
            assert redact_url(url) in lines[0], (why, lines[0])
    # a database without the schema, read by a command that does not create one
    empty = postgres_server.new_database()
    out = cos("review", "--index", str(small_index.path), "--store-url", empty)
    assert out.returncode == 2 and "no cos-integrations schema" in out.stderr
    assert "cos-test-pw" not in out.stderr
    # a schema from a newer version of the package
    newer = postgres_server.new_database()
    future = SummaryStore(newer)
    future.backend.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    future.close()
    out = cos("review", "--index", str(small_index.path), "--store-url", newer)
    lines = [x for x in out.stderr.splitlines() if x.strip()]
    assert out.returncode == 2 and len(lines) == 1 and "newer than this" in lines[0]
    assert redact_url(newer) in lines[0] and "cos-test-pw" not in out.stderr
    # nothing was written anywhere: the index's own store and manifest are as they were
    assert (small_index.path / "cos.sqlite").stat().st_mtime_ns == before
    assert "postgresql" not in (small_index.path / "manifest.json").read_text()


def test_migrate_store_copies_verifies_is_idempotent_and_switches(small_index, postgres_url):
    src_file = small_index.path / "cos.sqlite"
    src = SummaryStore(src_file)
    before = {t: src.query(f"SELECT * FROM {t}") for t in ("documents", "events", "refine_jobs")}
    src.close()
    out = cos("migrate-store", "--index", str(small_index.path), "--to", postgres_url)
    assert out.returncode == 0, out.stderr
    assert "documents: 3 rows (3 copied now)" in out.stdout and "verified" in out.stdout
    assert "cos-test-pw" not in out.stdout
    again = cos("migrate-store", "--index", str(small_index.path), "--to", postgres_url)
    assert again.returncode == 0 and "documents: 3 rows (0 copied now)" in again.stdout
    dst = SummaryStore(postgres_url, create=False)
    assert [d.current_version for d in dst.documents()] == [1, 1, 1]
    assert [j.query for j in dst.jobs()] == ["Who fixes the roof?"]
    assert dst.actions("docs/lease.md")[0].user == "ana"
    dst.close()
    src = SummaryStore(src_file)  # the source: only read
    assert {t: src.query(f"SELECT * FROM {t}") for t in before} == before
    src.close()
    # the index works on the new store (vectors stay where they were)
    idx = CoSIndex(small_index.path, create=False, store_url=postgres_url)
    assert idx.store.backend.name == "postgresql"
    assert idx.search_summaries("lease item 1", 1)[0].doc_id == "docs/lease.md"
    idx.store.close()
    switched = cos(
        "migrate-store", "--index", str(small_index.path), "--to", postgres_url, "--switch"
    )
    assert switched.returncode == 0
    manifest = (small_index.path / "manifest.json").read_text()
    assert "postgresql://cos@127.0.0.1" in manifest and "cos-test-pw" not in manifest
    # new rows continue after the copied ids
    dst = SummaryStore(postgres_url, create=False)
    assert dst.enqueue("docs/garden.md", "A new question?") == 2
    dst.close()


def test_migrate_store_refuses_a_destination_holding_another_index(small_index, postgres_url):
    other = SummaryStore(postgres_url)
    other.upsert_document("someone-else", "text")
    other.close()
    out = cos("migrate-store", "--index", str(small_index.path), "--to", postgres_url)
    assert out.returncode == 2 and "does not match" in out.stderr and "documents" in out.stderr


def test_concurrent_publishers_on_postgres_never_lose_a_version(postgres_url):
    """Eight threads publish with compare-and-swap on one document: each success is a new
    version, versions have no gaps, and nothing is overwritten silently."""
    from concurrent.futures import ThreadPoolExecutor

    store = SummaryStore(postgres_url)
    store.upsert_document("d", "text")
    store.publish_version("d", "v1", expected_version=None, created_by="cos")

    def writer(i: int) -> int:
        won = 0
        deadline = time.time() + 3
        while time.time() < deadline and won < 5:
            cur = store.get_document("d").current_version
            if store.publish_version("d", f"w{i}", expected_version=cur, created_by="refine"):
                won += 1
        return won

    with ThreadPoolExecutor(8) as pool:
        wins = sum(pool.map(writer, range(8)))
    versions = [v.version for v in store.versions("d")]
    assert versions == list(range(1, len(versions) + 1)) and len(versions) == 1 + wins
    assert store.get_document("d").current_version == versions[-1]
    store.close()


def test_framework_components_take_a_store_url_and_never_keep_its_password(postgres_url):
    import json

    from langchain_ext import CoSDocumentTransformer
    from llamaindex_ext import CoSSummaryTransform

    transform = CoSSummaryTransform(llm=None, store_url=postgres_url)
    assert "cos-test-pw" not in json.dumps(transform.to_dict())  # pipeline cache keys
    assert transform.store_path == postgres_url.replace(":cos-test-pw", "")
    assert transform.store.backend.name == "postgresql"  # connected with the password
    transform.store.close()
    lc = CoSDocumentTransformer(llm=None, store_url=postgres_url)
    assert lc.store.backend.name == "postgresql"
    lc.store.close()


def test_a_store_of_0_2_is_rekeyed_when_it_opens(store_url):
    """Schema 4 keys questions with text.question_key (any language): a store made with
    0.2's keys (English articles dropped, ASCII punctuation only) is keyed again, keeping
    one bank question, one open job and one "not in source" record a key."""
    from cos_integrations.metrics import normalize_answer
    from cos_integrations.storage import store as module
    from cos_integrations.storage.db import open_backend

    backend = open_backend(store_url)
    with backend.lock() as tx:
        for version in (1, 2, 3):
            for stmt in backend.ddl(module._META if version == 1 else ""):
                tx.execute(stmt)
            for stmt in backend.ddl(module._MIGRATIONS[version]):
                tx.execute(stmt)
        tx.execute("INSERT INTO meta(key, value) VALUES('schema_version', '3')")
        tx.execute(
            "INSERT INTO documents(doc_id, content_hash, text, created_at, updated_at)"
            " VALUES('d', 'h', 't', 0, 0)"
        )
        for i, q in enumerate(["北京是首都吗？", "北京是首都吗?", "Who is the king?"]):
            tx.execute(
                "INSERT INTO questions(doc_id, question, norm, answers, origin, created_at)"
                " VALUES('d', ?, ?, '[\"x\"]', 'miss', ?)",
                (q, normalize_answer(q), i),
            )
            tx.execute(
                "INSERT INTO refine_jobs(doc_id, query, norm, status, created_at, updated_at)"
                " VALUES('d', ?, ?, 'pending', 0, 0)",
                (q, normalize_answer(q)),
            )
        tx.execute(
            "INSERT INTO not_in_source(doc_id, norm, query, created_at) VALUES('d', ?, ?, 0)",
            (normalize_answer("Who is the king?"), "Who is the king?"),
        )
    backend.close()
    store = SummaryStore(store_url)
    try:
        assert store.schema_version == SCHEMA_VERSION
        assert [q.question for q in store.questions("d")] == ["北京是首都吗？", "Who is the king?"]
        jobs = {j.query: j.status for j in store.jobs()}
        assert jobs == {
            "北京是首都吗？": "pending",
            "北京是首都吗?": "dropped",
            "Who is the king?": "pending",
        }
        assert store.enqueue("d", "北京是首都吗 ?") == store.jobs("pending")[0].id
        assert store.not_in_source("d", "who is THE king")
    finally:
        store.close()
