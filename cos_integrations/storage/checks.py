"""The router's checks: a question the summary path answered, also answered from the
source chunks, and whether the two answers agreed (:mod:`~cos_integrations.serving.router`).
An outcome speaks for the summary and the text it was made on: when a document's current
summary changes (a refinement published, a revert, a new summary) or its text does, its
outcomes are dropped (:meth:`CheckLog.drop_checks`), and the router learns the new summary
afresh instead of holding the old one's disagreements against it.

Examples:
    >>> from cos_integrations.storage.store import SummaryStore
    >>> store = SummaryStore(":memory:")
    >>> store.record_check("lease", "When is rent due?", 0.86, "the 1st", "the 1st", True)
    >>> store.check_counts()
    (1, 0)
"""

from __future__ import annotations

import time
from typing import Any

from cos_integrations.storage.db import StorePart

__all__ = ["CheckLog"]


class CheckLog(StorePart):
    """The checks' outcomes over the store's connection."""

    def record_check(
        self,
        doc_id: str,
        query: str,
        similarity: float,
        summary_answer: str | None,
        source_answer: str | None,
        agree: bool,
    ) -> None:
        """One outcome: ``query`` answered ``summary_answer`` from ``doc_id``'s summary
        (best similarity ``similarity``) and ``source_answer`` from the source chunks."""
        self._conn().execute(
            "INSERT INTO checks(at, doc_id, query, similarity, summary_answer, source_answer,"
            " agree) VALUES(?,?,?,?,?,?,?)",
            (time.time(), doc_id, query, similarity, summary_answer, source_answer, int(agree)),
        )

    def check_counts(self) -> tuple[int, int]:
        """The checks so far and how many disagreed."""
        row = self._conn().execute("SELECT COUNT(*), SUM(1 - agree) FROM checks").fetchone()
        return int(row[0]), int(row[1] or 0)

    def check_counts_by_document(self) -> dict[str, tuple[int, int]]:
        """Per document: its checks and how many disagreed (what an owner reads)."""
        rows = (
            self._conn()
            .execute("SELECT doc_id, COUNT(*), SUM(1 - agree) FROM checks GROUP BY doc_id")
            .fetchall()
        )
        return {str(r[0]): (int(r[1]), int(r[2] or 0)) for r in rows}

    @staticmethod
    def drop_checks(doc_id: str, tx: Any) -> None:
        """Forget the outcomes of ``doc_id``'s checks, in the transaction ``tx`` that
        changes its summary or its text (they were about another reading)."""
        tx.execute("DELETE FROM checks WHERE doc_id=?", (doc_id,))
