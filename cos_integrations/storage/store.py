"""The durable store: documents, summary versions, question banks, refine jobs, counters.

One SQLite file (WAL mode) under the index directory, or a PostgreSQL database. It is the
single source of truth that the CLI and the retrievers of both frameworks read and write;
Chroma only holds vectors derived from it, and anything missing there is rebuilt from here.

This module holds the schema, its migrations and the documents table;
:class:`SummaryStore` composes the other parts over the same connection:
:mod:`.versions` (summary versions and question banks), :mod:`.refine_queue` and
:mod:`.traffic` (events, the audit log, the overview).

Examples:
    >>> store = SummaryStore(":memory:")
    >>> store.upsert_document("d1", "Rent is due on the 5th.", source="lease.txt")
    True
    >>> store.get_document("d1").status
    'pending'
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cos_integrations.storage.answers import AnswerEntries, AnswerEntry
from cos_integrations.storage.checks import CheckLog
from cos_integrations.storage.db import StoreError, open_backend, redact_url
from cos_integrations.storage.records import Action, DocumentRecord, DocumentRow, SummaryVersion
from cos_integrations.storage.refine_queue import RefineJob, RefineQueue
from cos_integrations.storage.traffic import OVERVIEW_FILTERS, OVERVIEW_SORTS, TrafficLog
from cos_integrations.storage.versions import SummaryVersions
from cos_integrations.text import question_key

__all__ = [
    "SummaryStore",
    "DocumentRecord",
    "SummaryVersion",
    "RefineJob",
    "AnswerEntry",
    "Action",
    "DocumentRow",
    "content_hash",
    "OVERVIEW_SORTS",
    "OVERVIEW_FILTERS",
]

SCHEMA_VERSION = 4

_META = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"

_SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS documents (
    doc_id TEXT PRIMARY KEY,
    source TEXT NOT NULL DEFAULT '',
    title TEXT NOT NULL DEFAULT '',
    content_hash TEXT NOT NULL,
    text TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',
    error TEXT,
    current_version INTEGER,
    indexed_version INTEGER,
    indexed_hash TEXT,
    pinned INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS summary_versions (
    doc_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    text TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'published',
    created_by TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    config_hash TEXT NOT NULL DEFAULT '',
    content_hash TEXT NOT NULL DEFAULT '',
    val_score REAL,
    train_score REAL,
    summary_tokens INTEGER NOT NULL DEFAULT 0,
    source_tokens INTEGER NOT NULL DEFAULT 0,
    calls INTEGER NOT NULL DEFAULT 0,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cached_tokens INTEGER NOT NULL DEFAULT 0,
    flags TEXT NOT NULL DEFAULT '[]',
    result_json TEXT,
    created_at REAL NOT NULL,
    PRIMARY KEY (doc_id, version)
);
CREATE TABLE IF NOT EXISTS questions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    doc_id TEXT NOT NULL,
    question TEXT NOT NULL,
    norm TEXT NOT NULL,
    answers TEXT NOT NULL,
    split TEXT,
    origin TEXT NOT NULL,
    created_at REAL NOT NULL,
    UNIQUE (doc_id, norm)
);
CREATE TABLE IF NOT EXISTS refine_jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    doc_id TEXT NOT NULL,
    query TEXT NOT NULL,
    norm TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    lease_until REAL,
    worker TEXT,
    result TEXT,
    error TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS refine_jobs_open
    ON refine_jobs (doc_id, norm) WHERE status IN ('pending', 'leased');
CREATE TABLE IF NOT EXISTS not_in_source (
    doc_id TEXT NOT NULL, norm TEXT NOT NULL, query TEXT NOT NULL, created_at REAL NOT NULL,
    PRIMARY KEY (doc_id, norm)
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    doc_id TEXT,
    query TEXT,
    context_tokens INTEGER NOT NULL DEFAULT 0
);
"""

# Version 2: the owners' audit log (who did what to which document, when), the version a
# refine job published (so a miss can be followed to the version it taught), and one name
# for "refinement found the source silent": not_in_source (events said not_covered).
_SCHEMA_V2 = """
CREATE TABLE IF NOT EXISTS actions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    doc_id TEXT,
    version INTEGER,
    detail TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS actions_doc ON actions (doc_id, id);
ALTER TABLE refine_jobs ADD COLUMN version INTEGER;
CREATE INDEX IF NOT EXISTS events_doc ON events (doc_id, kind);
UPDATE events SET kind='not_in_source' WHERE kind='not_covered';
"""

# Version 3: questions looked up by their normalised text across documents (a query that
# missed once and whose source answer a refine job found: the retriever routes it there).
_SCHEMA_V3 = """
CREATE INDEX IF NOT EXISTS questions_norm ON questions (norm, origin);
"""

# Version 4: verified answers (storage/answers.py), served again without a model call; the
# text a refine job read (a job that could not teach is not run again on that text), and
# how often its question missed while it waited (a worker may take only those that came
# back); the router's checks (serving/router.py: where the summaries may answer). Question
# keys become text.question_key's (_rekey: any language, no English article dropped).
_SCHEMA_V4 = """
CREATE TABLE IF NOT EXISTS answers (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    doc_id TEXT NOT NULL,
    question TEXT NOT NULL,
    key TEXT NOT NULL UNIQUE,
    answer TEXT NOT NULL,
    quote TEXT NOT NULL,
    origin TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    version INTEGER,
    citation TEXT NOT NULL DEFAULT '',
    bar REAL,
    served INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS answers_doc ON answers (doc_id);
ALTER TABLE refine_jobs ADD COLUMN content_hash TEXT;
ALTER TABLE refine_jobs ADD COLUMN asks INTEGER NOT NULL DEFAULT 1;
CREATE TABLE IF NOT EXISTS checks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    doc_id TEXT NOT NULL,
    query TEXT NOT NULL,
    similarity REAL NOT NULL,
    summary_answer TEXT,
    source_answer TEXT,
    agree INTEGER NOT NULL
);
"""

# Each migration takes the schema from version N-1 to N. Version 1 is the base schema.
_MIGRATIONS: dict[int, str] = {1: _SCHEMA_V1, 2: _SCHEMA_V2, 3: _SCHEMA_V3, 4: _SCHEMA_V4}


def content_hash(text: str) -> str:
    """sha256 of the document text: what "unchanged" means."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class SummaryStore(SummaryVersions, RefineQueue, TrafficLog, AnswerEntries, CheckLog):
    """Durable state in SQLite (a file, WAL, busy timeout; the default) or PostgreSQL
    (``postgresql://...``); safe across threads and processes on both.

    ``create=False`` refuses a database without the schema instead of creating it.
    Connection problems, a missing or newer schema raise
    :class:`~cos_integrations.storage.db.StoreError` naming the URL without its password.
    """

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.backend = open_backend(path)
        self.path = str(path) if self.backend.name == "sqlite" else redact_url(str(path))
        self.url = self.backend.url
        try:
            self._migrate(create)
        except BaseException:
            # refused (no schema, a newer one) or failed: nothing keeps the backend, so its
            # connections (PostgreSQL: a pool and its threads) are closed here
            self.backend.close()
            raise

    # ------------------------------------------------------------------ plumbing
    @contextmanager
    def sync_lock(self) -> Iterator[None]:
        """Hold a cross-process lock while vectors are rewritten, so two workers never
        interleave the Chroma writes of different versions (SQLite: the write lock;
        PostgreSQL: an advisory lock); the store's writes inside it join its transaction."""
        with self.backend.lock():
            yield

    def _migrate(self, create: bool) -> None:
        exists = self.backend.has_table("meta")
        if not exists and not create:
            raise StoreError(
                f"{self.path} has no cos-integrations schema; create the index with "
                "`cos ingest`, or copy one there with `cos migrate-store`"
            )
        current = self._schema_version() if exists else 0
        if current > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} has schema version {current}, newer than this cos-integrations "
                f"({SCHEMA_VERSION}); upgrade the package"
            )
        if current == SCHEMA_VERSION:
            return
        with self.backend.lock() as tx:  # one process migrates; the others wait, then see it
            for stmt in self.backend.ddl(_META):
                tx.execute(stmt)
            row = tx.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            current = int(row[0]) if row else 0
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for stmt in self.backend.ddl(_MIGRATIONS[version]):
                    tx.execute(stmt)
                if version == 4 and current > 0:
                    _rekey(tx)
                tx.execute(
                    "INSERT INTO meta(key, value) VALUES('schema_version', ?)"
                    " ON CONFLICT (key) DO UPDATE SET value=excluded.value",
                    (str(version),),
                )

    def _schema_version(self) -> int:
        row = self._conn().execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return int(row[0]) if row else 0

    @property
    def schema_version(self) -> int:
        return self._schema_version()

    def close(self) -> None:
        self.backend.close()

    # ------------------------------------------------------------------ documents
    def upsert_document(self, doc_id: str, text: str, *, source: str = "", title: str = "") -> bool:
        """Record a document's text; returns True when it is new or its content changed.

        A changed text drops what was verified on the old one: the document's verified
        answers, its "not in source" records, the questions misses added to its bank
        (a refine job read them off the old text) and the router's checks of it; a later
        ask reads the new text."""
        digest = content_hash(text)
        now = time.time()
        with self._tx() as tx:
            new = tx.execute(
                "INSERT OR IGNORE INTO documents(doc_id, source, title, content_hash, text,"
                " status, created_at, updated_at) VALUES(?,?,?,?,?,'pending',?,?)"
                " RETURNING doc_id",
                (doc_id, source, title, digest, text, now, now),
            ).fetchone()
            if new is not None:
                return True
            row = tx.execute(
                "SELECT content_hash FROM documents WHERE doc_id=?" + self.backend.for_update,
                (doc_id,),
            ).fetchone()
            changed = row["content_hash"] != digest
            tx.execute(
                "UPDATE documents SET source=?, title=?, content_hash=?, text=?, updated_at=?,"
                " status=CASE WHEN ? THEN 'pending' WHEN status='retired' THEN"
                " (CASE WHEN current_version IS NULL THEN 'pending' ELSE 'summarized' END)"
                " ELSE status END WHERE doc_id=?",
                (source, title, digest, text, now, changed, doc_id),
            )
            if changed:
                self.drop_answers(doc_id, tx)
                self.drop_checks(doc_id, tx)
                tx.execute("DELETE FROM not_in_source WHERE doc_id=?", (doc_id,))
                tx.execute("DELETE FROM questions WHERE doc_id=? AND origin='miss'", (doc_id,))
            return changed

    def get_document(self, doc_id: str) -> DocumentRecord | None:
        row = self._conn().execute("SELECT * FROM documents WHERE doc_id=?", (doc_id,)).fetchone()
        return _doc(row) if row else None

    def documents(self) -> list[DocumentRecord]:
        rows = self._conn().execute("SELECT * FROM documents ORDER BY doc_id").fetchall()
        return [_doc(r) for r in rows]

    def retire_document(self, doc_id: str) -> bool:
        """Mark a document whose source is gone ``retired``: its summary history, question
        bank and events stay, the index drops its vectors, and ingesting its text again
        brings it back. Returns False when there is no such document."""
        with self._tx() as tx:
            cur = tx.execute(
                "UPDATE documents SET status='retired', indexed_version=NULL, indexed_hash=NULL,"
                " updated_at=? WHERE doc_id=?",
                (time.time(), doc_id),
            )
            tx.execute("DELETE FROM refine_jobs WHERE doc_id=? AND status='pending'", (doc_id,))
            return cur.rowcount > 0

    def delete_document(self, doc_id: str) -> None:
        with self._tx() as tx:
            for table in ("documents", "summary_versions", "questions", "not_in_source", "answers"):
                tx.execute(f"DELETE FROM {table} WHERE doc_id=?", (doc_id,))
            tx.execute("DELETE FROM refine_jobs WHERE doc_id=? AND status='pending'", (doc_id,))

    def is_current(self, doc_id: str, text_hash: str, config_hash: str) -> bool:
        """True when the document's current summary was made from this text with this config
        (or is a human-pinned summary of this text): summarising again would waste calls."""
        row = (
            self._conn()
            .execute(
                "SELECT d.content_hash AS dh, v.content_hash AS vh, v.config_hash AS ch,"
                " v.created_by AS creator FROM documents d JOIN summary_versions v"
                " ON v.doc_id=d.doc_id AND v.version=d.current_version WHERE d.doc_id=?",
                (doc_id,),
            )
            .fetchone()
        )
        if row is None or row["dh"] != text_hash or row["vh"] != text_hash:
            return False
        return row["creator"] in ("refine", "human") or row["ch"] == config_hash

    def mark_failed(self, doc_id: str, error: str) -> None:
        with self._tx() as tx:
            tx.execute(
                "UPDATE documents SET status='failed', error=?, updated_at=? WHERE doc_id=?",
                (error[:2000], time.time(), doc_id),
            )

    def mark_indexed(self, doc_id: str, version: int | None, text_hash: str) -> None:
        with self._tx() as tx:
            tx.execute(
                "UPDATE documents SET indexed_version=?, indexed_hash=? WHERE doc_id=?",
                (version, text_hash, doc_id),
            )

    def needs_index(self) -> list[str]:
        """Documents whose vectors in Chroma are behind the store (e.g. after a crash)."""
        rows = (
            self._conn()
            .execute(
                "SELECT doc_id FROM documents WHERE current_version IS NOT NULL"
                " AND status != 'retired' AND ("
                " indexed_version IS NULL OR indexed_version != current_version"
                " OR indexed_hash IS NULL OR indexed_hash != content_hash) ORDER BY doc_id"
            )
            .fetchall()
        )
        return [r[0] for r in rows]

    # ------------------------------------------------------------------ rows
    def copy_rows(self, table: str, rows: Sequence[Any]) -> int:
        """Insert rows read from another store's ``table`` (same schema), keys included,
        in one transaction; rows whose key exists are skipped. Returns how many were new."""
        if not rows:
            return 0
        cols = list(rows[0].keys())
        sql = (
            f"INSERT OR IGNORE INTO {table}({', '.join(cols)}) VALUES({', '.join('?' * len(cols))})"
        )
        copied = 0
        with self._tx() as tx:
            for row in rows:
                copied += max(tx.execute(sql, tuple(row[c] for c in cols)).rowcount, 0)
        return copied

    def query(self, sql: str, args: Sequence[object] = ()) -> list[Any]:
        """A read-only query of the store's tables (reports such as :mod:`.stats`)."""
        return self._conn().execute(sql, tuple(args)).fetchall()


def _rekey(tx: Any) -> None:
    """Version 4: a question's key is :func:`~cos_integrations.text.question_key` (Unicode
    punctuation and forms, in any language; no English article dropped), as the verified
    answers' are. The keys of a store made before are written again; two bank questions of
    a document that now share a key keep the first, of two open refine jobs the later is
    dropped, and "not in source" records keep one a key."""
    reads = {
        "questions": "SELECT id, doc_id, question, 'open' FROM questions ORDER BY id",
        "refine_jobs": "SELECT id, doc_id, query, status FROM refine_jobs ORDER BY id",
    }
    for table, sql in reads.items():
        rows = tx.execute(sql).fetchall()
        # first out of the way of the unique keys, then each row its new key
        tx.execute(f"UPDATE {table} SET norm = '#' || CAST(id AS TEXT)")
        seen: set[tuple[str, str]] = set()
        for row_id, doc_id, text, status in rows:
            key = question_key(text)
            if status in ("open", "pending", "leased"):
                if (doc_id, key) in seen:
                    if table == "questions":
                        tx.execute("DELETE FROM questions WHERE id=?", (row_id,))
                        continue
                    tx.execute("UPDATE refine_jobs SET status='dropped' WHERE id=?", (row_id,))
                seen.add((doc_id, key))
            tx.execute(f"UPDATE {table} SET norm=? WHERE id=?", (key, row_id))
    silent = tx.execute("SELECT doc_id, query, created_at FROM not_in_source").fetchall()
    tx.execute("DELETE FROM not_in_source")
    kept: set[tuple[str, str]] = set()
    for doc_id, query, at in silent:
        key = question_key(query)
        if (doc_id, key) not in kept:
            kept.add((doc_id, key))
            tx.execute(
                "INSERT INTO not_in_source(doc_id, norm, query, created_at) VALUES(?,?,?,?)",
                (doc_id, key, query, at),
            )


def _doc(row: Any) -> DocumentRecord:
    return DocumentRecord(
        doc_id=row["doc_id"],
        source=row["source"],
        title=row["title"],
        content_hash=row["content_hash"],
        text=row["text"],
        status=row["status"],
        error=row["error"],
        current_version=row["current_version"],
        indexed_version=row["indexed_version"],
        indexed_hash=row["indexed_hash"],
        pinned=bool(row["pinned"]),
    )
