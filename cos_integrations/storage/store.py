"""The durable store: documents, summary versions, question banks, refine jobs, counters.

One SQLite file (WAL mode) under the index directory. It is the single source of truth
that the CLI and the retrievers of both frameworks read and write; Chroma only holds
vectors derived from it, and anything missing there is rebuilt from here.

Example:
    >>> store = SummaryStore(":memory:")
    >>> store.upsert_document("d1", "Rent is due on the 5th.", source="lease.txt")
    True
    >>> store.get_document("d1").status
    'pending'
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cos_integrations.storage.db import Backend, StoreError, open_backend, redact_url
from cos_integrations.storage.refine_queue import RefineJob, RefineQueue
from cos_integrations.summarize.questions import QAPair
from cos_integrations.summarize.result import CoSResult
from cos_integrations.text import tokens_for_chars

__all__ = [
    "SummaryStore",
    "DocumentRecord",
    "SummaryVersion",
    "RefineJob",
    "Action",
    "DocumentRow",
    "content_hash",
    "OVERVIEW_SORTS",
    "OVERVIEW_FILTERS",
]

SCHEMA_VERSION = 2

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

# Each migration takes the schema from version N-1 to N. Version 1 is the base schema.
_MIGRATIONS: dict[int, str] = {1: _SCHEMA_V1, 2: _SCHEMA_V2}


def content_hash(text: str) -> str:
    """sha256 of the document text: what "unchanged" means."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class DocumentRecord:
    doc_id: str
    source: str
    title: str
    content_hash: str
    text: str
    status: str
    error: str | None
    current_version: int | None
    indexed_version: int | None
    indexed_hash: str | None
    pinned: bool


@dataclass
class SummaryVersion:
    doc_id: str
    version: int
    text: str
    status: str
    created_by: str
    reason: str
    config_hash: str
    content_hash: str
    val_score: float | None
    train_score: float | None
    summary_tokens: int
    source_tokens: int
    flags: list[str]
    created_at: float


@dataclass
class Action:
    """One owner action from the audit log (``cos pin``, the review page, ...)."""

    id: int
    at: float
    user: str
    action: str
    doc_id: str | None
    version: int | None
    detail: str


@dataclass
class DocumentRow:
    """A document's line in the overview: one aggregated query builds a page of these."""

    doc_id: str
    title: str
    status: str
    pinned: bool
    current_version: int | None
    summary_tokens: int | None
    source_tokens: int
    val_score: float | None
    flags: int
    suggestions: int
    hits: int
    misses: int
    pending_jobs: int


# overview sort keys -> ORDER BY (fixed strings: user input only picks a key)
OVERVIEW_SORTS: dict[str, str] = {
    "id": "d.doc_id",
    "missed": "misses DESC, d.doc_id",
    "hits": "hits DESC, d.doc_id",
    "flags": "flags DESC, d.doc_id",
    "score": "val_score IS NULL, val_score, d.doc_id",
}
OVERVIEW_FILTERS: dict[str, str] = {
    "all": "1=1",
    "flagged": "flags > 0",
    "pinned": "d.pinned = 1",
    "suggested": "suggestions > 0",
    "missed": "misses > 0",
    "failed": "d.status = 'failed'",
}


class SummaryStore(RefineQueue):
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
        self._migrate(create)

    # ------------------------------------------------------------------ plumbing
    def _conn(self) -> Backend:
        """Reads: the backend runs each statement on this thread's connection."""
        return self.backend

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        """A write transaction (SQLite: BEGIN IMMEDIATE; PostgreSQL: with row locks)."""
        with self.backend.transaction() as tx:
            yield tx

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
        """Record a document's text; returns True when it is new or its content changed."""
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
            for table in ("documents", "summary_versions", "questions", "not_in_source"):
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

    # ------------------------------------------------------------------ summaries
    def save_result(
        self,
        doc_id: str,
        result: CoSResult,
        *,
        created_by: str = "cos",
        reason: str = "",
        flags: Sequence[str] = (),
    ) -> int:
        """Store a new summary version from an engine result, with its question bank.

        The version becomes current unless the document is pinned by a human; then it is
        kept as a ``suggested`` version to accept or reject.
        """
        doc = self.get_document(doc_id)
        if doc is None:
            raise KeyError(f"unknown document {doc_id!r}")
        best = result.best
        with self._tx() as tx:
            self._lock_document(tx, doc_id)
            version = self._next_version(tx, doc_id)
            status = "suggested" if doc.pinned else "published"
            self._insert_version(
                tx,
                doc_id,
                version,
                result.summary,
                status=status,
                created_by=created_by,
                reason=reason,
                config_hash=result.config_hash,
                text_hash=doc.content_hash,
                val=best.val_score if best else None,
                train=best.train_score if best else None,
                summary_tokens=result.summary_tokens,
                source_tokens=result.source_tokens,
                usage=result.usage.model_dump(),
                flags=flags,
                result_json=result.model_dump_json(),
            )
            # A fresh CoS run replaces the synthetic and human bank; miss questions stay.
            tx.execute("DELETE FROM questions WHERE doc_id=? AND origin!='miss'", (doc_id,))
            for q in result.questions:
                self._insert_question(tx, doc_id, q)
            if not doc.pinned:
                tx.execute(
                    "UPDATE documents SET current_version=?, status='summarized', error=NULL,"
                    " updated_at=? WHERE doc_id=?",
                    (version, time.time(), doc_id),
                )
        return version

    def publish_version(
        self,
        doc_id: str,
        text: str,
        *,
        expected_version: int | None,
        created_by: str,
        reason: str = "",
        val_score: float | None = None,
        train_score: float | None = None,
        summary_tokens: int = 0,
        flags: Sequence[str] = (),
        config_hash: str = "",
        force: bool = False,
    ) -> int | None:
        """Compare-and-swap: publish ``text`` only if the current version is still
        ``expected_version``. Returns the new version, or ``None`` if someone else won.

        On a pinned document a non-human version is stored as ``suggested`` and the
        current version does not move (unless ``force``).
        """
        with self._tx() as tx:
            row = tx.execute(
                "SELECT current_version, pinned, content_hash FROM documents WHERE doc_id=?"
                + self.backend.for_update,
                (doc_id,),
            ).fetchone()
            if row is None:
                raise KeyError(f"unknown document {doc_id!r}")
            if row["current_version"] != expected_version:
                return None
            version = self._next_version(tx, doc_id)
            suggest = bool(row["pinned"]) and created_by != "human" and not force
            self._insert_version(
                tx,
                doc_id,
                version,
                text,
                status="suggested" if suggest else "published",
                created_by=created_by,
                reason=reason,
                config_hash=config_hash,
                text_hash=row["content_hash"],
                val=val_score,
                train=train_score,
                summary_tokens=summary_tokens,
                source_tokens=0,
                usage={},
                flags=flags,
                result_json=None,
            )
            if not suggest:
                pinned = 1 if created_by == "human" else row["pinned"]
                tx.execute(
                    "UPDATE documents SET current_version=?, pinned=?, status='summarized',"
                    " updated_at=? WHERE doc_id=?",
                    (version, pinned, time.time(), doc_id),
                )
        return version

    def set_current(
        self, doc_id: str, version: int, *, expected_version: int | None | bool = False
    ) -> bool:
        """Make an existing version current (revert, or accept a suggestion). With
        ``expected_version`` (the version the caller saw, ``None`` for none) it is a
        compare-and-swap: returns False, changing nothing, when the current version moved
        meanwhile."""
        with self._tx() as tx:
            if expected_version is not False:
                row = tx.execute(
                    "SELECT current_version FROM documents WHERE doc_id=?"
                    + self.backend.for_update,
                    (doc_id,),
                ).fetchone()
                if row is None:
                    raise KeyError(f"unknown document {doc_id!r}")
                if row[0] != expected_version:
                    return False
            if not tx.execute(
                "SELECT 1 FROM summary_versions WHERE doc_id=? AND version=?", (doc_id, version)
            ).fetchone():
                raise KeyError(f"document {doc_id!r} has no version {version}")
            tx.execute(
                "UPDATE summary_versions SET status='published' WHERE doc_id=? AND version=?",
                (doc_id, version),
            )
            tx.execute(
                "UPDATE documents SET current_version=?, updated_at=? WHERE doc_id=?",
                (version, time.time(), doc_id),
            )
        return True

    def set_pinned(self, doc_id: str, pinned: bool) -> None:
        with self._tx() as tx:
            tx.execute("UPDATE documents SET pinned=? WHERE doc_id=?", (int(pinned), doc_id))

    def reject_version(self, doc_id: str, version: int) -> None:
        with self._tx() as tx:
            tx.execute(
                "UPDATE summary_versions SET status='rejected' WHERE doc_id=? AND version=?"
                " AND status='suggested'",
                (doc_id, version),
            )

    def require_current(self, doc_id: str) -> tuple[DocumentRecord, SummaryVersion]:
        """The document and its current summary; a :class:`StoreError` naming it when either
        is gone (e.g. deleted or retired by another process meanwhile)."""
        doc, current = self.get_document(doc_id), self.current_summary(doc_id)
        if doc is None or current is None:
            raise StoreError(
                f"document {doc_id!r} has no current summary any more (deleted, retired or "
                "failed meanwhile); ingest it again"
            )
        return doc, current

    def current_summary(self, doc_id: str) -> SummaryVersion | None:
        row = (
            self._conn()
            .execute(
                "SELECT v.* FROM summary_versions v JOIN documents d ON d.doc_id=v.doc_id"
                " AND d.current_version=v.version WHERE d.doc_id=?",
                (doc_id,),
            )
            .fetchone()
        )
        return _version(row) if row else None

    def versions(self, doc_id: str) -> list[SummaryVersion]:
        rows = (
            self._conn()
            .execute("SELECT * FROM summary_versions WHERE doc_id=? ORDER BY version", (doc_id,))
            .fetchall()
        )
        return [_version(r) for r in rows]

    def result_of(self, doc_id: str, version: int) -> CoSResult | None:
        row = (
            self._conn()
            .execute(
                "SELECT result_json FROM summary_versions WHERE doc_id=? AND version=?",
                (doc_id, version),
            )
            .fetchone()
        )
        return CoSResult.model_validate_json(row[0]) if row and row[0] else None

    def _lock_document(self, tx: Any, doc_id: str) -> None:
        """Serialise writers of one document's versions (PostgreSQL: a row lock; SQLite's
        write transaction already does)."""
        if self.backend.for_update:
            tx.execute(
                "SELECT 1 FROM documents WHERE doc_id=?" + self.backend.for_update, (doc_id,)
            )

    @staticmethod
    def _next_version(tx: Any, doc_id: str) -> int:
        row = tx.execute(
            "SELECT COALESCE(MAX(version), 0) FROM summary_versions WHERE doc_id=?", (doc_id,)
        ).fetchone()
        return int(row[0]) + 1

    @staticmethod
    def _insert_version(
        tx,
        doc_id,
        version,
        text,
        *,
        status,
        created_by,
        reason,
        config_hash,
        text_hash,
        val,
        train,
        summary_tokens,
        source_tokens,
        usage,
        flags,
        result_json,
    ) -> None:
        tx.execute(
            "INSERT INTO summary_versions(doc_id, version, text, status, created_by, reason,"
            " config_hash, content_hash, val_score, train_score, summary_tokens, source_tokens,"
            " calls, prompt_tokens, completion_tokens, cached_tokens, flags, result_json,"
            " created_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                doc_id,
                version,
                text,
                status,
                created_by,
                reason,
                config_hash,
                text_hash,
                val,
                train,
                summary_tokens,
                source_tokens,
                usage.get("calls", 0),
                usage.get("prompt_tokens", 0),
                usage.get("completion_tokens", 0),
                usage.get("cached_tokens", 0),
                json.dumps(list(flags)),
                result_json,
                time.time(),
            ),
        )

    # ------------------------------------------------------------------ questions
    def questions(self, doc_id: str) -> list[QAPair]:
        rows = (
            self._conn()
            .execute(
                "SELECT question, answers, split, origin FROM questions WHERE doc_id=? ORDER BY id",
                (doc_id,),
            )
            .fetchall()
        )
        return [
            QAPair(question=r[0], answers=json.loads(r[1]), split=r[2], origin=r[3]) for r in rows
        ]

    def add_question(self, doc_id: str, pair: QAPair) -> bool:
        with self._tx() as tx:
            return self._insert_question(tx, doc_id, pair)

    @staticmethod
    def _insert_question(tx: Any, doc_id: str, q: QAPair) -> bool:
        cur = tx.execute(
            "INSERT OR IGNORE INTO questions(doc_id, question, norm, answers, split, origin,"
            " created_at) VALUES(?,?,?,?,?,?,?)",
            (doc_id, q.question, q.key, json.dumps(q.answers), q.split, q.origin, time.time()),
        )
        return cur.rowcount > 0

    # ------------------------------------------------------------------ counters
    def record_event(
        self, kind: str, doc_id: str | None, query: str, *, context_tokens: int = 0
    ) -> None:
        """Log a ``hit``, ``miss`` or ``not_in_source`` for stats: one append-only INSERT in
        autocommit (no explicit transaction, no lock beyond the row's; on PostgreSQL
        concurrent queries never wait for each other here)."""
        self._conn().execute(
            "INSERT INTO events(at, kind, doc_id, query, context_tokens) VALUES(?,?,?,?,?)",
            (time.time(), kind, doc_id, query, context_tokens),
        )

    def event_counts(self) -> dict[str, int]:
        rows = self._conn().execute("SELECT kind, COUNT(*) FROM events GROUP BY kind").fetchall()
        return {r[0]: r[1] for r in rows}

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

    def events(self) -> list[Any]:
        return self._conn().execute("SELECT * FROM events ORDER BY id").fetchall()

    def recent_events(self, kind: str, limit: int = 50, offset: int = 0) -> list[Any]:
        """The newest events of one kind (``miss``, ``hit``, ``not_in_source``)."""
        return (
            self._conn()
            .execute(
                "SELECT * FROM events WHERE kind=? ORDER BY id DESC LIMIT ? OFFSET ?",
                (kind, limit, offset),
            )
            .fetchall()
        )

    def count_events(self, kind: str) -> int:
        sql = "SELECT COUNT(*) FROM events WHERE kind=?"
        return int(self._conn().execute(sql, (kind,)).fetchone()[0])

    # ------------------------------------------------------------------ oversight
    def record_action(
        self,
        user: str,
        action: str,
        doc_id: str | None = None,
        version: int | None = None,
        detail: str = "",
    ) -> None:
        """Append to the audit log (every owner action, from the CLI or the review page)."""
        with self._tx() as tx:
            tx.execute(
                "INSERT INTO actions(at, actor, action, doc_id, version, detail)"
                " VALUES(?,?,?,?,?,?)",
                (time.time(), user, action, doc_id, version, detail),
            )

    def actions(self, doc_id: str | None = None, limit: int = 200) -> list[Action]:
        """The audit log, newest first (of one document, or all)."""
        sql, args = "SELECT * FROM actions", ()
        if doc_id is not None:
            sql, args = sql + " WHERE doc_id=?", (doc_id,)
        rows = self._conn().execute(sql + " ORDER BY id DESC LIMIT ?", (*args, limit))
        return [
            Action(
                r["id"], r["at"], r["actor"], r["action"], r["doc_id"], r["version"], r["detail"]
            )
            for r in rows.fetchall()
        ]

    def document_rows(
        self, *, sort: str = "id", where: str = "all", limit: int = 50, offset: int = 0
    ) -> tuple[list[DocumentRow], int]:
        """A page of the overview and the number of documents the filter keeps: one query
        with the counts aggregated per document (no query per row)."""
        if sort not in OVERVIEW_SORTS:
            raise ValueError(f"sort must be one of {sorted(OVERVIEW_SORTS)}, not {sort!r}")
        if where not in OVERVIEW_FILTERS:
            raise ValueError(f"filter must be one of {sorted(OVERVIEW_FILTERS)}, not {where!r}")
        base = f"""
            WITH ev AS (
                SELECT doc_id, SUM(CASE WHEN kind='hit' THEN 1 ELSE 0 END) AS hits,
                    SUM(CASE WHEN kind='miss' THEN 1 ELSE 0 END) AS misses
                FROM events GROUP BY doc_id
            ), sug AS (
                SELECT doc_id, COUNT(*) AS n FROM summary_versions
                WHERE status='suggested' GROUP BY doc_id
            ), jobs AS (
                SELECT doc_id, COUNT(*) AS n FROM refine_jobs
                WHERE status IN ('pending', 'leased') GROUP BY doc_id
            ), docrows AS (
                SELECT d.doc_id, d.title, d.status, d.pinned, d.current_version,
                    v.summary_tokens, LENGTH(d.text) AS chars, v.val_score,
                    COALESCE({self.backend.json_len("v.flags")}, 0) AS flags,
                    COALESCE(sug.n, 0) AS suggestions, COALESCE(ev.hits, 0) AS hits,
                    COALESCE(ev.misses, 0) AS misses, COALESCE(jobs.n, 0) AS pending_jobs
                FROM documents d
                LEFT JOIN summary_versions v
                    ON v.doc_id=d.doc_id AND v.version=d.current_version
                LEFT JOIN ev ON ev.doc_id=d.doc_id
                LEFT JOIN sug ON sug.doc_id=d.doc_id
                LEFT JOIN jobs ON jobs.doc_id=d.doc_id
            )
            SELECT * FROM docrows d WHERE {OVERVIEW_FILTERS[where]}"""
        conn = self._conn()
        total = int(conn.execute(f"SELECT COUNT(*) FROM ({base}) AS page").fetchone()[0])
        rows = conn.execute(
            f"{base} ORDER BY {OVERVIEW_SORTS[sort]} LIMIT ? OFFSET ?", (limit, offset)
        ).fetchall()
        return [
            DocumentRow(
                doc_id=r["doc_id"],
                title=r["title"],
                status=r["status"],
                pinned=bool(r["pinned"]),
                current_version=r["current_version"],
                summary_tokens=r["summary_tokens"],
                source_tokens=tokens_for_chars(r["chars"]),
                val_score=r["val_score"],
                flags=r["flags"],
                suggestions=r["suggestions"],
                hits=r["hits"],
                misses=r["misses"],
                pending_jobs=r["pending_jobs"],
            )
            for r in rows
        ], total


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


def _version(row: Any) -> SummaryVersion:
    return SummaryVersion(
        doc_id=row["doc_id"],
        version=row["version"],
        text=row["text"],
        status=row["status"],
        created_by=row["created_by"],
        reason=row["reason"],
        config_hash=row["config_hash"],
        content_hash=row["content_hash"],
        val_score=row["val_score"],
        train_score=row["train_score"],
        summary_tokens=row["summary_tokens"],
        source_tokens=row["source_tokens"],
        flags=json.loads(row["flags"]),
        created_at=row["created_at"],
    )
