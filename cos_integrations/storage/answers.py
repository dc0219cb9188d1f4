"""Verified answers: a question's answer found in a document's source, kept to be served
again without a model call.

An entry is made whenever the product holds an answer grounded in the source with a
verbatim quote from it: a miss answered from the source chunks, a refine job that read the
source, a hit whose answer the source holds. It records the question (and its key: the
question as :func:`~cos_integrations.text.normalize_text` writes it, in any language), the
answer, the quote, the document and the content hash of the text it was verified on, the
summary version of the time, and its citation. An entry is never served for a text it was
not verified on: a lookup joins the document's current hash, and a changed document's
entries are dropped when its new text is stored (:meth:`SummaryStore.upsert_document`).

``bar`` is the entry's own similarity bar for a reworded question (``None``: the index's
default): it rises above the similarity of a verified question of the same document whose
answer differs (:meth:`AnswerEntries.raise_bar`), so a near-duplicate that asks something
else is not served this entry. Their vectors live in a Chroma collection beside the
summaries' (:class:`~cos_integrations.serving.index.CoSIndex`); the store is the truth.

Examples:
    >>> from cos_integrations.storage.store import SummaryStore
    >>> store = SummaryStore(":memory:")
    >>> _ = store.upsert_document("lease", "Rent is due on the 5th.")
    >>> entry = store.put_answer("lease", "When is rent due?", "the 5th",
    ...                          "Rent is due on the 5th.", "miss")
    >>> store.answer_for("when is rent due").answer
    'the 5th'
    >>> _ = store.upsert_document("lease", "Rent is due on the 1st.")  # the text changed
    >>> store.answer_for("when is rent due") is None
    True
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cos_integrations.storage.db import StorePart
from cos_integrations.text import question_key

__all__ = ["AnswerEntry", "AnswerEntries", "ANSWER_ORIGINS", "REPEAT", "question_key"]

# Where an entry's answer came from, the reading that is kept first: a miss read the top
# source chunks (what chunk RAG answers, the reference the product is never worse than), a
# refine job the whole source (kept where the chunks' answer was not verified: on the SQuAD
# stream the 1.5B model's whole-source answers replaced right chunk answers with wrong ones,
# BENCHMARKS.md "Refinement: only where it pays"), a hit the summary's sentences
# (and the source was found to hold the answer), a check one verified entry's source
# sentence (a reworded question answered from it as the entry was). A later reading never
# replaces one kept before it here. Last, not verified: a repeat, the source chunks' answer
# to a question when no sentence of the source holds it verbatim, kept with no quote and
# with what it was read from (``citation``: the chunks and their documents' texts) so that
# the same question over the same chunks is not paid for again (what an exact-prompt cache
# does); served to an exact repeat only, never to a rewording.
ANSWER_ORIGINS: tuple[str, ...] = ("miss", "refine", "hit", "check", "repeat")
# the one origin that is not verified against a sentence of the source
REPEAT = "repeat"


@dataclass
class AnswerEntry:
    """One verified answer (see the module docstring).

    Examples:
        >>> e = AnswerEntry(1, "lease", "When is rent due?", "when is rent due", "the 5th",
        ...                 "Rent is due on the 5th.", "miss", "ab12", None, "lease.md", None,
        ...                 0, 0.0)
        >>> e.origin, e.answer
        ('miss', 'the 5th')
    """

    id: int
    doc_id: str
    question: str
    key: str
    answer: str
    quote: str
    origin: str
    content_hash: str
    version: int | None
    citation: str
    bar: float | None
    served: int
    created_at: float


class AnswerEntries(StorePart):
    """The verified answers over the store's connection."""

    def put_answer(
        self,
        doc_id: str,
        question: str,
        answer: str,
        quote: str,
        origin: str,
        *,
        version: int | None = None,
        citation: str = "",
        content_hash: str | None = None,
    ) -> AnswerEntry | None:
        """Keep ``answer`` to ``question``, verified in ``doc_id``'s source by ``quote``.

        ``content_hash``: the text it was verified on (default: the document's current
        text); an answer verified on a text that is no longer current is not kept. An entry
        for the same question from an equal or stronger reading
        (:data:`ANSWER_ORIGINS`) stays; a weaker one is replaced. A ``"repeat"`` has no
        quote. Returns the entry kept (new or replaced), ``None`` when nothing changed."""
        if origin not in ANSWER_ORIGINS:
            raise ValueError(f"origin must be one of {ANSWER_ORIGINS}, not {origin!r}")
        key = question_key(question)
        if not key or not answer.strip() or (not quote.strip() and origin != REPEAT):
            return None
        with self._tx() as tx:
            doc = tx.execute(
                "SELECT content_hash, status FROM documents WHERE doc_id=?", (doc_id,)
            ).fetchone()
            if doc is None or doc["status"] == "retired":
                return None
            if content_hash is not None and content_hash != doc["content_hash"]:
                return None
            old = tx.execute(
                "SELECT id, origin, content_hash FROM answers WHERE key=?"
                + self.backend.for_update,
                (key,),
            ).fetchone()
            if old is not None:
                current = old["content_hash"] == _current_hash(tx, old["id"])
                # a repeat gives way to the newer read of the same question
                newer = origin == REPEAT == old["origin"]
                if current and _rank(old["origin"]) <= _rank(origin) and not newer:
                    return None
                tx.execute("DELETE FROM answers WHERE id=?", (old["id"],))
            row = tx.execute(
                "INSERT INTO answers(doc_id, question, key, answer, quote, origin,"
                " content_hash, version, citation, served, created_at)"
                " VALUES(?,?,?,?,?,?,?,?,?,0,?) RETURNING *",
                (
                    doc_id,
                    question,
                    key,
                    answer.strip(),
                    quote.strip(),
                    origin,
                    doc["content_hash"],
                    version,
                    citation,
                    time.time(),
                ),
            ).fetchone()
        return _entry(row)

    def answer_for(self, key: str) -> AnswerEntry | None:
        """The entry of a question key (:func:`question_key`), when it was verified on its
        document's current text; else ``None``."""
        row = self._conn().execute(_CURRENT + " AND a.key=?", (key,)).fetchone()
        return _entry(row) if row else None

    def answers_by_id(self, ids: Sequence[int]) -> dict[int, AnswerEntry]:
        """The entries with these ids that were verified on their document's current text."""
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self._conn().execute(_CURRENT + f" AND a.id IN ({marks})", tuple(ids)).fetchall()
        return {int(r["id"]): _entry(r) for r in rows}

    def answers(self, doc_id: str | None = None) -> list[AnswerEntry]:
        """Every current entry (of ``doc_id``), oldest first."""
        sql, args = _CURRENT, ()
        if doc_id is not None:
            sql, args = sql + " AND a.doc_id=?", (doc_id,)
        return [_entry(r) for r in self._conn().execute(sql + " ORDER BY a.id", args).fetchall()]

    def raise_bar(self, entry_id: int, bar: float) -> None:
        """Serve entry ``entry_id`` to a reworded question only from similarity ``bar`` on
        (a bar never falls this way)."""
        with self._tx() as tx:
            tx.execute(
                "UPDATE answers SET bar=? WHERE id=? AND (bar IS NULL OR bar < ?)",
                (bar, entry_id, bar),
            )

    def note_served(self, entry_id: int) -> None:
        """Count one serve of the entry (autocommit, as an event)."""
        self._conn().execute("UPDATE answers SET served=served+1 WHERE id=?", (entry_id,))

    def drop_answers(self, doc_id: str, tx: Any = None) -> None:
        """Forget every entry of ``doc_id`` (its text changed, or it is gone)."""
        if tx is not None:
            tx.execute("DELETE FROM answers WHERE doc_id=?", (doc_id,))
            return
        with self._tx() as own:
            own.execute("DELETE FROM answers WHERE doc_id=?", (doc_id,))

    def answer_ids(self, ids: Sequence[int]) -> list[int]:
        """Which of ``ids`` the store holds at all (current or not)."""
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        sql = f"SELECT id FROM answers WHERE id IN ({marks})"
        return [int(r[0]) for r in self._conn().execute(sql, tuple(ids)).fetchall()]

    def answer_count(self) -> int:
        return int(self._conn().execute("SELECT COUNT(*) FROM answers").fetchone()[0])


_CURRENT = (
    "SELECT a.* FROM answers a JOIN documents d ON d.doc_id=a.doc_id"
    " WHERE d.content_hash=a.content_hash AND d.status != 'retired'"
)


def _current_hash(tx: Any, entry_id: int) -> str | None:
    row = tx.execute(
        "SELECT d.content_hash FROM answers a JOIN documents d ON d.doc_id=a.doc_id"
        " WHERE a.id=? AND d.status != 'retired'",
        (entry_id,),
    ).fetchone()
    return row[0] if row else None


def _rank(origin: str) -> int:
    return ANSWER_ORIGINS.index(origin) if origin in ANSWER_ORIGINS else len(ANSWER_ORIGINS)


def _entry(row: Any) -> AnswerEntry:
    return AnswerEntry(
        id=int(row["id"]),
        doc_id=row["doc_id"],
        question=row["question"],
        key=row["key"],
        answer=row["answer"],
        quote=row["quote"],
        origin=row["origin"],
        content_hash=row["content_hash"],
        version=row["version"],
        citation=row["citation"],
        bar=row["bar"],
        served=int(row["served"]),
        created_at=float(row["created_at"]),
    )
