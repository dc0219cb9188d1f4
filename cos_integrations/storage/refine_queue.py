"""The refine queue: jobs ``(doc_id, query)`` that a miss queues and workers lease.

Leases expire, so a job whose worker died is taken again; a job fails ``max_attempts``
times before it is ``dead``; a query the source does not answer is remembered per document
(``not_in_source``) so it is neither queued nor searched for again. The queue lives in the
store's database (:class:`~cos_integrations.storage.store.SummaryStore` composes this class), so a
job and the summary version it publishes share one transaction log.

Examples:
    >>> job_id = store.enqueue("docs/lease.md", "When is rent due?")   # doctest: +SKIP
    >>> job = store.lease("worker-1")                                  # doctest: +SKIP
    >>> store.finish_job(job.id, "worker-1", "published", "version 2") # doctest: +SKIP
    True
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from cos_integrations.storage.db import StorePart
from cos_integrations.text import question_key

__all__ = ["ALREADY_HELD", "STILL_MISSES", "UNSUPPORTED", "RefineJob", "RefineQueue"]

# Why a refine job's extractive teaching did not publish: a rejected job's stored result.
# ALREADY_HELD means the document is right (its summary already holds the source's
# answering sentence); the other two send the query on to the next document of the chunk
# ranking (Refiner's retarget): such a source has likely read a sibling passage's fact
# (measured: tiered-5-retry). The source's answer is kept as a verified answer either way.
UNSUPPORTED = "the source does not bear the answer out (its quote is not the source's, or lacks it)"
ALREADY_HELD = "the summary already holds the source's sentence that answers the query"
STILL_MISSES = "the summary with the source's sentence still does not answer the query"


@dataclass
class RefineJob:
    """One refine job: the query a document's summary missed, and its progress."""

    id: int
    doc_id: str
    query: str
    status: str
    attempts: int
    worker: str | None
    result: str | None
    error: str | None
    version: int | None = None  # the summary version the job published or suggested
    created_at: float | None = None
    updated_at: float | None = None
    asks: int = 1  # how often its question missed while it waited


# a job that ran to an outcome (not one that failed, was dropped or is still open)
_RAN = "'published', 'suggested', 'rejected', 'not_in_source'"


class RefineQueue(StorePart):
    """Queue operations over the store's connection."""

    def enqueue(self, doc_id: str, query: str) -> int | None:
        """Queue a refine job; a pending job with the same normalised query is reused.
        Returns the job id, or ``None`` when the query is known not to be in the source,
        or a job already ran for it on the document's current text (whatever it found, a
        second round on the same text and question would find it again)."""
        norm = question_key(query)
        now = time.time()
        with self._tx() as tx:
            if tx.execute(
                "SELECT 1 FROM not_in_source WHERE doc_id=? AND norm=?", (doc_id, norm)
            ).fetchone():
                return None
            doc = tx.execute("SELECT content_hash FROM documents WHERE doc_id=?", (doc_id,))
            digest = (doc.fetchone() or [None])[0]
            if (
                digest is not None
                and tx.execute(
                    "SELECT 1 FROM refine_jobs WHERE doc_id=? AND norm=? AND content_hash=?"
                    f" AND status IN ({_RAN})",
                    (doc_id, norm, digest),
                ).fetchone()
            ):
                return None
            # the open-job unique index makes a concurrent duplicate a no-op, not an error
            row = tx.execute(
                "INSERT OR IGNORE INTO refine_jobs(doc_id, query, norm, status, created_at,"
                " updated_at, content_hash) VALUES(?,?,?,'pending',?,?,?) RETURNING id",
                (doc_id, query, norm, now, now, digest),
            ).fetchone()
            if row is None:  # asked again while its job waits: one more ask of it
                row = tx.execute(
                    "UPDATE refine_jobs SET asks=asks+1 WHERE doc_id=? AND norm=?"
                    " AND status IN ('pending','leased') RETURNING id",
                    (doc_id, norm),
                ).fetchone()
            return int(row[0])

    def lease(
        self, worker: str, *, lease_seconds: float = 600.0, min_asks: int = 1
    ) -> RefineJob | None:
        """Take the oldest pending job, or one whose lease expired (its worker died);
        a job of a document no other worker holds comes first, because two rounds on one
        document race to publish and the loser's calls are spent for nothing.
        ``min_asks``: only a job whose question missed at least that often (2: it came
        back). PostgreSQL: ``FOR UPDATE SKIP LOCKED``, so workers never wait for or take the
        same job; SQLite: the write transaction serialises them."""
        now = time.time()
        with self._tx() as tx:
            row = tx.execute(
                "SELECT * FROM refine_jobs WHERE (status='pending'"
                " OR (status='leased' AND lease_until < ?)) AND asks >= ?"
                " ORDER BY CASE WHEN doc_id IN (SELECT doc_id FROM refine_jobs"
                " WHERE status='leased' AND lease_until >= ?) THEN 1 ELSE 0 END, id LIMIT 1"
                + self.backend.skip_locked,
                (now, min_asks, now),
            ).fetchone()
            if row is None:
                return None
            tx.execute(
                "UPDATE refine_jobs SET status='leased', worker=?, lease_until=?,"
                " attempts=attempts+1, updated_at=? WHERE id=?",
                (worker, now + lease_seconds, now, row["id"]),
            )
            row = tx.execute("SELECT * FROM refine_jobs WHERE id=?", (row["id"],)).fetchone()
        return _job(row)

    def finish_job(
        self,
        job_id: int,
        worker: str,
        status: str,
        result: str = "",
        *,
        version: int | None = None,
    ) -> bool:
        """Close a leased job (``version``: the summary version it published or suggested);
        False when the lease was lost to another worker."""
        with self._tx() as tx:
            cur = tx.execute(
                "UPDATE refine_jobs SET status=?, result=?, version=?, lease_until=NULL,"
                " updated_at=? WHERE id=? AND worker=? AND status='leased'",
                (status, result, version, time.time(), job_id, worker),
            )
            if cur.rowcount and status == "not_in_source":
                row = tx.execute(
                    "SELECT doc_id, norm, query FROM refine_jobs WHERE id=?", (job_id,)
                ).fetchone()
                tx.execute(
                    "INSERT OR IGNORE INTO not_in_source(doc_id, norm, query, created_at)"
                    " VALUES(?,?,?,?)",
                    (row[0], row[1], row[2], time.time()),
                )
            return cur.rowcount > 0

    def fail_job(self, job_id: int, worker: str, error: str, *, max_attempts: int = 3) -> str:
        """Record a failure: back to pending, or ``dead`` after ``max_attempts``."""
        with self._tx() as tx:
            row = tx.execute("SELECT attempts FROM refine_jobs WHERE id=?", (job_id,)).fetchone()
            status = "dead" if row and row[0] >= max_attempts else "pending"
            tx.execute(
                "UPDATE refine_jobs SET status=?, error=?, lease_until=NULL, updated_at=?"
                " WHERE id=? AND worker=? AND status='leased'",
                (status, error[:2000], time.time(), job_id, worker),
            )
        return status

    def requeue_job(self, job_id: int, worker: str, reason: str) -> bool:
        """A leased job back to ``pending`` without spending an attempt: it did not fail,
        another job's version was published first (a compare-and-swap conflict), so its
        round is stale, not wrong. Bounded: each requeue follows someone's publication.
        False when the lease was lost to another worker."""
        with self._tx() as tx:
            cur = tx.execute(
                "UPDATE refine_jobs SET status='pending', error=?, lease_until=NULL,"
                " attempts=CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END, updated_at=?"
                " WHERE id=? AND worker=? AND status='leased'",
                (reason[:2000], time.time(), job_id, worker),
            )
            return cur.rowcount > 0

    def retry_job(self, job_id: int) -> bool:
        """A ``dead`` job back to ``pending`` with its attempts reset; False when the job
        is not dead (any more)."""
        with self._tx() as tx:
            cur = tx.execute(
                "UPDATE refine_jobs SET status='pending', attempts=0, error=NULL,"
                " updated_at=? WHERE id=? AND status='dead'",
                (time.time(), job_id),
            )
            return cur.rowcount > 0

    def drop_job(self, job_id: int) -> bool:
        """Give up on a ``dead`` job (status ``dropped``); False when it is not dead."""
        with self._tx() as tx:
            cur = tx.execute(
                "UPDATE refine_jobs SET status='dropped', updated_at=?"
                " WHERE id=? AND status='dead'",
                (time.time(), job_id),
            )
            return cur.rowcount > 0

    def job(self, job_id: int) -> RefineJob | None:
        row = self._conn().execute("SELECT * FROM refine_jobs WHERE id=?", (job_id,)).fetchone()
        return _job(row) if row else None

    def job_counts(self) -> dict[str, int]:
        """Jobs by status (pending, leased, published, not_in_source, dead, ...)."""
        rows = self._conn().execute("SELECT status, COUNT(*) FROM refine_jobs GROUP BY status")
        return {r[0]: r[1] for r in rows.fetchall()}

    def jobs_for(self, doc_ids: list[str]) -> list[RefineJob]:
        """Every job of these documents (one query), newest first."""
        if not doc_ids:
            return []
        marks = ",".join("?" * len(doc_ids))
        rows = self._conn().execute(
            f"SELECT * FROM refine_jobs WHERE doc_id IN ({marks}) ORDER BY id DESC", doc_ids
        )
        return [_job(r) for r in rows.fetchall()]

    def jobs(self, status: str | None = None) -> list[RefineJob]:
        sql, args = "SELECT * FROM refine_jobs", ()
        if status:
            sql, args = sql + " WHERE status=?", (status,)
        rows = self._conn().execute(sql + " ORDER BY id", args).fetchall()
        return [_job(r) for r in rows]

    def outcomes(self, query: str) -> dict[str, str]:
        """Per document, the status of its latest refine job for ``query`` (normalised):
        where a query was already taken, and what came of it."""
        rows = (
            self._conn()
            .execute(
                "SELECT doc_id, status FROM refine_jobs WHERE norm=? ORDER BY id",
                (question_key(query),),
            )
            .fetchall()
        )
        return {str(r[0]): str(r[1]) for r in rows}

    def not_in_source(self, doc_id: str, query: str) -> bool:
        return bool(
            self._conn()
            .execute(
                "SELECT 1 FROM not_in_source WHERE doc_id=? AND norm=?",
                (doc_id, question_key(query)),
            )
            .fetchone()
        )


def _job(row: Any) -> RefineJob:
    return RefineJob(
        id=row["id"],
        doc_id=row["doc_id"],
        query=row["query"],
        status=row["status"],
        attempts=row["attempts"],
        worker=row["worker"],
        result=row["result"],
        error=row["error"],
        version=row["version"] if "version" in row.keys() else None,
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        asks=int(row["asks"]) if "asks" in row.keys() else 1,
    )
