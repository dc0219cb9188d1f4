"""Cache statistics: hit rate, tokens saved, and the paper's break-even point.

Break-even (per document): building the summary cost ``B`` tokens once; each query answered
from the summary instead of the full document saves ``source - summary`` tokens. After
``B / (source - summary)`` queries the summary has paid for itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cos_integrations.storage.store import SummaryStore

__all__ = ["compute_stats", "Stats", "DocumentStats"]


@dataclass
class DocumentStats:
    doc_id: str
    source_tokens: int
    summary_tokens: int
    build_tokens: int
    break_even: float | None


@dataclass
class Stats:
    """Each ask counted once: a summary ``hit``, a kept answer ``served`` (no model call:
    a verified answer, or ``repeats`` of them the unverified answer the same chunks gave an
    exact repeat), a ``miss``, or a miss refinement had found the sources silent on
    (``not_in_source``).

    Examples:
        >>> s = Stats(hits=3, served=5, misses=2)
        >>> s.queries, s.hit_rate
        (10, 0.8)
    """

    hits: int = 0
    served: int = 0  # asks a kept answer answered (verified, or a repeat's)
    repeats: int = 0  # of those, exact repeats served an unverified answer
    misses: int = 0
    not_in_source: int = 0  # queries refinement had found the source silent on
    context_tokens: int = 0
    full_document_tokens: int = 0
    # day -> (hits, queries)
    per_day: dict[str, tuple[int, int]] = field(default_factory=dict)
    # day -> tokens saved that day (full documents' tokens minus the context sent)
    saved_per_day: dict[str, int] = field(default_factory=dict)
    documents: list[DocumentStats] = field(default_factory=list)
    # the router's checks (serving/router.py): how many, how many disagreed; per document
    checks: int = 0
    disagreements: int = 0
    checks_by_document: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def queries(self) -> int:
        return self.hits + self.served + self.misses + self.not_in_source

    @property
    def hit_rate(self) -> float:
        """The share of asks answered without the source: summary hits and served answers."""
        return (self.hits + self.served) / self.queries if self.queries else 0.0

    @property
    def tokens_saved(self) -> int:
        return self.full_document_tokens - self.context_tokens


_DOCS = """
SELECT d.doc_id, COALESCE(MAX(v.source_tokens), 0) AS src,
    COALESCE(SUM(v.prompt_tokens + v.completion_tokens), 0) AS build,
    (SELECT c.summary_tokens FROM summary_versions c
     WHERE c.doc_id=d.doc_id AND c.version=d.current_version) AS cur
FROM documents d LEFT JOIN summary_versions v ON v.doc_id=d.doc_id
GROUP BY d.doc_id ORDER BY d.doc_id
"""

_DAYS = """
WITH src AS (
    SELECT doc_id, MAX(source_tokens) AS tokens FROM summary_versions GROUP BY doc_id
)
SELECT {day} AS day, SUM(CASE WHEN e.kind='hit' THEN 1 ELSE 0 END) AS hits,
    SUM(CASE WHEN e.kind IN ('answer', 'repeat') THEN 1 ELSE 0 END) AS served,
    SUM(CASE WHEN e.kind='repeat' THEN 1 ELSE 0 END) AS repeats,
    SUM(CASE WHEN e.kind='miss' THEN 1 ELSE 0 END) AS misses, COUNT(*) AS queries,
    SUM(e.context_tokens) AS context, COALESCE(SUM(src.tokens), 0) AS full_docs
FROM events e LEFT JOIN src ON src.doc_id=e.doc_id
GROUP BY 1 ORDER BY 1
"""


def compute_stats(store: SummaryStore) -> Stats:
    """Counters, per-day series and per-document break-even, from aggregate queries (a
    fixed number of queries, whatever the number of documents)."""
    s = Stats()
    for r in store.query(_DOCS):
        cur = r["cur"] or 0
        saving = r["src"] - cur
        s.documents.append(
            DocumentStats(
                r["doc_id"], r["src"], cur, r["build"], r["build"] / saving if saving > 0 else None
            )
        )
    s.checks, s.disagreements = store.check_counts()
    s.checks_by_document = store.check_counts_by_document()
    for r in store.query(_DAYS.format(day=store.backend.day("e.at"))):
        s.hits += r["hits"]
        s.served += r["served"]
        s.repeats += r["repeats"]
        s.misses += r["misses"]
        s.not_in_source += r["queries"] - r["hits"] - r["served"] - r["misses"]
        s.context_tokens += r["context"]
        s.full_document_tokens += r["full_docs"]
        s.per_day[r["day"]] = (r["hits"] + r["served"], r["queries"])
        s.saved_per_day[r["day"]] = r["full_docs"] - r["context"]
    return s
