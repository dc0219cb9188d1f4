"""The store's summary versions and question banks: every summary a document has had, which
one is current, and the questions it was tested with.

A part of :class:`~cos_integrations.storage.store.SummaryStore` (which composes this
class with the refine queue and the traffic log): versions are append-only; publishing is a
compare-and-swap on the current version, so two refine workers never both win; a human pin
turns a machine's new version into a ``suggested`` one to accept or reject.

Examples:
    >>> v = store.publish_version("d1", "Rent: 900 euros.", expected_version=1,
    ...                           created_by="human")                 # doctest: +SKIP
    >>> store.current_summary("d1").version == v                      # doctest: +SKIP
    True
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from cos_integrations.storage.checks import CheckLog
from cos_integrations.storage.db import StoreError
from cos_integrations.storage.records import DocumentRecord, SummaryVersion
from cos_integrations.summarize.questions import QAPair
from cos_integrations.summarize.result import CoSResult

__all__ = ["SummaryVersion", "SummaryVersions"]


class SummaryVersions(CheckLog):
    """Summary versions and question banks over the store's connection (a new current
    summary drops the router's checks of the old one: :meth:`CheckLog.drop_checks`)."""

    def get_document(self, doc_id: str) -> DocumentRecord | None:  # provided by the store
        raise NotImplementedError

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
                self.drop_checks(doc_id, tx)  # the router's outcomes were the old summary's
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
                self.drop_checks(doc_id, tx)
        return version

    def set_current(
        self, doc_id: str, version: int, *, expected_version: int | None | bool = False
    ) -> bool:
        """Make an existing version current (revert, or accept a suggestion). With
        ``expected_version`` (the version the caller saw, ``None`` for none) it is a
        compare-and-swap: returns False, changing nothing, when the current version moved
        meanwhile."""
        with self._tx() as tx:
            row = tx.execute(
                "SELECT current_version FROM documents WHERE doc_id=?" + self.backend.for_update,
                (doc_id,),
            ).fetchone()
            if row is None:
                raise KeyError(f"unknown document {doc_id!r}")
            if expected_version is not False and row[0] != expected_version:
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
            if row[0] != version:  # the served summary changed: its outcomes were the old one's
                self.drop_checks(doc_id, tx)
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
