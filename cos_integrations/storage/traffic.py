"""The store's traffic and audit log: hits, misses, owner actions, and the overview built
from them.

A part of :class:`~cos_integrations.storage.store.SummaryStore`: events are append-only
single INSERTs in autocommit (concurrent queries never wait for each other); every owner
action, from the CLI or the review page, is one row of the audit log; the overview is one
aggregated query per page.

Examples:
    >>> store.record_event("miss", "d1", "When is rent due?")          # doctest: +SKIP
    >>> store.count_events("miss")                                    # doctest: +SKIP
    1
"""

from __future__ import annotations

import time
from typing import Any

from cos_integrations.storage.db import StorePart
from cos_integrations.storage.records import Action, DocumentRow
from cos_integrations.text import tokens_for_chars

__all__ = ["Action", "DocumentRow", "OVERVIEW_FILTERS", "OVERVIEW_SORTS", "TrafficLog"]


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


class TrafficLog(StorePart):
    """Events, the audit log and the overview over the store's connection."""

    def record_event(
        self, kind: str, doc_id: str | None, query: str, *, context_tokens: int = 0
    ) -> None:
        """Log a ``hit``, ``miss``, ``not_in_source``, ``answer`` or ``repeat`` for stats:
        one append-only INSERT in autocommit (no explicit transaction, no lock beyond the
        row's; on PostgreSQL concurrent queries never wait for each other here)."""
        self._conn().execute(
            "INSERT INTO events(at, kind, doc_id, query, context_tokens) VALUES(?,?,?,?,?)",
            (time.time(), kind, doc_id, query, context_tokens),
        )

    def event_counts(self) -> dict[str, int]:
        rows = self._conn().execute("SELECT kind, COUNT(*) FROM events GROUP BY kind").fetchall()
        return {r[0]: r[1] for r in rows}

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
