"""What the store returns: plain records, one per row kind.

Examples:
    >>> DocumentRecord("d1", "lease.txt", "Lease", "ab12", "Rent ...", "pending", None,
    ...                None, None, None, False).status
    'pending'
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Action", "DocumentRecord", "DocumentRow", "SummaryVersion"]


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
