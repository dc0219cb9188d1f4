"""The owners' actions and views, once for the ``cos`` CLI and the review page.

Every action on a summary (pin an edited text, unpin, accept or reject a suggestion, revert,
queue a refine job with the owner's own question, retry or drop a dead job) lives here: it
checks its precondition with the store's compare-and-swap, re-indexes what changed and
writes the audit log (who, what, when). The CLI commands and the web routes only parse
input and call these, so the two can never disagree. The views (a document with its
versions, bank and highlights; the recent misses and what became of them; a word diff)
are read-only and build each page from a fixed number of queries.

Examples:
    >>> from cos_integrations import oversight                       # doctest: +SKIP
    >>> v = oversight.pin_summary(index, "lease", "Rent is due on the 5th.",
    ...                           expected_version=1, user="ana")    # doctest: +SKIP
    >>> oversight.revert(index, "lease", 1, expected_version=v, user="ana")  # doctest: +SKIP
"""

from __future__ import annotations

import difflib
import getpass
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cos_integrations.serving.hit_rule import is_grounded
from cos_integrations.storage.store import Action, DocumentRecord, SummaryVersion
from cos_integrations.summarize.guard import summary_flags, unfaithful_spans
from cos_integrations.text import estimate_tokens, question_key

if TYPE_CHECKING:
    from cos_integrations.serving.index import CoSIndex
    from cos_integrations.storage.answers import AnswerEntry
    from cos_integrations.storage.refine_queue import RefineJob

__all__ = [
    "ActionRefused",
    "default_user",
    "pin_summary",
    "unpin",
    "accept",
    "reject",
    "revert",
    "enqueue_question",
    "retry_job",
    "drop_job",
    "DocumentView",
    "BankQuestion",
    "document_view",
    "MissRow",
    "recent_misses",
    "word_diff",
    "highlight_spans",
]


class ActionRefused(Exception):
    """An owner action whose precondition does not hold (the summary changed meanwhile,
    the version is not a suggestion, the job is not dead): nothing was written. An unknown
    document or version is a ``KeyError``."""


def default_user() -> str:
    """Who acts when no one is named: ``COS_USER``, else the login name."""
    try:
        return os.environ.get("COS_USER") or getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        return "unknown"


def _document(index: CoSIndex, doc_id: str) -> DocumentRecord:
    doc = index.store.get_document(doc_id)
    if doc is None:
        raise KeyError(f"no document {doc_id!r} in {index.path}")
    return doc


def _changed(doc_id: str, expected: int | None, now: int | None) -> ActionRefused:
    return ActionRefused(
        f"{doc_id}: the summary changed meanwhile (you saw v{expected}, it is now v{now}); "
        "nothing was changed: look again and retry"
    )


def pin_summary(
    index: CoSIndex,
    doc_id: str,
    text: str,
    *,
    expected_version: int | None,
    user: str,
    reason: str = "",
) -> int:
    """Publish ``text`` as a human summary that refinement never overwrites (it only
    suggests), if the current version is still ``expected_version``; returns the new
    version. Raises :class:`ActionRefused` when the text is empty or the summary moved."""
    doc = _document(index, doc_id)
    text = text.strip()
    if not text:
        raise ActionRefused(f"{doc_id}: the summary is empty; nothing was changed")
    version = index.store.publish_version(
        doc_id,
        text,
        expected_version=expected_version,
        created_by="human",
        reason=reason or f"pinned by {user}",
        summary_tokens=estimate_tokens(text),
        flags=summary_flags(text, doc.text),
        force=True,
    )
    if version is None:
        raise _changed(doc_id, expected_version, _document(index, doc_id).current_version)
    index.sync_document(doc_id)
    index.store.record_action(user, "pin", doc_id, version, reason)
    return version


def unpin(index: CoSIndex, doc_id: str, *, user: str) -> None:
    """Let refinement publish new versions of this document again."""
    _document(index, doc_id)
    index.store.set_pinned(doc_id, False)
    index.store.record_action(user, "unpin", doc_id)


def _pending_suggestion(index: CoSIndex, doc_id: str, version: int) -> None:
    _document(index, doc_id)
    suggested = {v.version for v in index.store.versions(doc_id) if v.status == "suggested"}
    if version not in suggested:
        raise ActionRefused(f"{doc_id}: v{version} is not a pending suggestion")


def _make_current(
    index: CoSIndex, doc_id: str, version: int, expected: int | None | bool, user: str, verb: str
) -> None:
    doc = _document(index, doc_id)
    moved = index.store.set_current(doc_id, version, expected_version=expected)  # KeyError
    if not moved:
        raise _changed(doc_id, expected, _document(index, doc_id).current_version)
    index.sync_document(doc_id)
    index.store.record_action(user, verb, doc_id, version, f"was v{doc.current_version}")


def revert(
    index: CoSIndex,
    doc_id: str,
    version: int,
    *,
    user: str,
    expected_version: int | None | bool = False,
) -> None:
    """Make an earlier version current again and re-index it; with ``expected_version``
    (the version the owner saw) refused when the summary moved meanwhile."""
    _make_current(index, doc_id, version, expected_version, user, "revert")


def accept(
    index: CoSIndex,
    doc_id: str,
    version: int,
    *,
    user: str,
    expected_version: int | None | bool = False,
) -> None:
    """Accept a suggested version of a pinned document (it becomes current)."""
    _pending_suggestion(index, doc_id, version)
    _make_current(index, doc_id, version, expected_version, user, "accept")


def reject(index: CoSIndex, doc_id: str, version: int, *, user: str) -> None:
    """Reject a suggested version of a pinned document."""
    _pending_suggestion(index, doc_id, version)
    index.store.reject_version(doc_id, version)
    index.store.record_action(user, "reject", doc_id, version)


def enqueue_question(index: CoSIndex, doc_id: str, question: str, *, user: str) -> int:
    """Queue a refine job with the owner's own question; returns the job id."""
    _document(index, doc_id)
    question = " ".join(question.split())
    if not question:
        raise ActionRefused("the question is empty; nothing was queued")
    job_id = index.store.enqueue(doc_id, question)
    if job_id is None:
        raise ActionRefused(f"{doc_id}: refinement already found the source silent on that")
    index.store.record_action(user, "enqueue", doc_id, None, question)
    return job_id


def _job_action(index: CoSIndex, job_id: int, user: str, verb: str) -> None:
    job = index.store.job(job_id)
    if job is None:
        raise ActionRefused(f"no refine job {job_id}")
    done = index.store.retry_job(job_id) if verb == "retry" else index.store.drop_job(job_id)
    if not done:
        raise ActionRefused(f"job {job_id} is {job.status}, not dead; nothing was changed")
    index.store.record_action(user, verb, job.doc_id, None, f"job {job_id}: {job.query}")


def retry_job(index: CoSIndex, job_id: int, *, user: str) -> None:
    """A dead refine job back to the queue, its attempts reset."""
    _job_action(index, job_id, user, "retry")


def drop_job(index: CoSIndex, job_id: int, *, user: str) -> None:
    """Give up on a dead refine job."""
    _job_action(index, job_id, user, "drop")


# ---------------------------------------------------------------------- views


@dataclass
class BankQuestion:
    """A bank question against the current summary: ``f1`` as the run that made the
    version scored it (``None`` when that run did not ask it), and ``stated``: a gold
    answer occurs in the summary (a text check, no model call)."""

    question: str
    answers: list[str]
    origin: str
    split: str | None
    f1: float | None
    stated: bool

    @property
    def passed(self) -> bool:
        return self.f1 >= 0.5 if self.f1 is not None else self.stated


@dataclass
class DocumentView:
    doc: DocumentRecord
    current: SummaryVersion | None
    versions: list[SummaryVersion]
    bank: list[BankQuestion]
    spans: list[tuple[int, int, str]]  # unfaithful numbers and names in the current text
    actions: list[Action]
    jobs: list[RefineJob] = field(default_factory=list)
    # the verified answers kept on its current text, and the router's checks of its
    # summary's answers against its source chunks (how many, how many disagreed)
    answers: list[AnswerEntry] = field(default_factory=list)
    checks: tuple[int, int] = (0, 0)


def document_view(index: CoSIndex, doc_id: str) -> DocumentView:
    """Everything the document page shows, from a fixed number of queries."""
    store = index.store
    doc = _document(index, doc_id)
    versions = store.versions(doc_id)
    current = next((v for v in versions if v.version == doc.current_version), None)
    scores: dict[str, float] = {}
    if current is not None:
        result = store.result_of(doc_id, current.version)
        best = result.best if result is not None else None
        if best is not None:
            scores = {question_key(s.question): s.f1 for s in best.scores}
    text = current.text if current else ""
    bank = [
        BankQuestion(
            q.question,
            q.answers,
            q.origin,
            q.split,
            scores.get(question_key(q.question)),
            any(is_grounded(a, text) for a in q.answers),
        )
        for q in store.questions(doc_id)
    ]
    return DocumentView(
        doc,
        current,
        versions,
        bank,
        unfaithful_spans(text, doc.text) if text else [],
        store.actions(doc_id),
        store.jobs_for([doc_id]),
        store.answers(doc_id),
        store.check_counts_by_document().get(doc_id, (0, 0)),
    )


@dataclass
class MissRow:
    """A recent miss and what became of it."""

    at: float
    query: str
    doc_id: str | None
    outcome: str  # pending | refined | suggested | not in source | rejected | dead | ...
    version: int | None
    detail: str


_OUTCOME = {
    "pending": "pending",
    "leased": "being refined",
    "published": "refined",
    "suggested": "suggested (pinned)",
    "not_in_source": "not in source",
    "rejected": "not refined",
    "dead": "failed",
    "dropped": "dropped",
    "conflict": "pending",
}


def recent_misses(index: CoSIndex, limit: int = 50, offset: int = 0) -> tuple[list[MissRow], int]:
    """The newest misses, each with its refine job's outcome (two queries in all)."""
    store = index.store
    events = store.recent_events("miss", limit, offset)
    jobs = store.jobs_for(sorted({e["doc_id"] for e in events if e["doc_id"]}))
    by_key: dict[tuple[str, str], RefineJob] = {}
    for job in jobs:  # newest first: the first seen per (doc, query) wins
        by_key.setdefault((job.doc_id, question_key(job.query)), job)
    rows = []
    for e in events:
        job = by_key.get((e["doc_id"] or "", question_key(e["query"] or "")))
        if job is None:
            rows.append(MissRow(e["at"], e["query"], e["doc_id"], "not queued", None, ""))
            continue
        rows.append(
            MissRow(
                e["at"],
                e["query"],
                e["doc_id"],
                _OUTCOME.get(job.status, job.status),
                job.version,
                job.error or job.result or "",
            )
        )
    return rows, store.count_events("miss")


_TOKEN = re.compile(r"\s+|[^\s]+")


def word_diff(old: str, new: str) -> list[tuple[str, str]]:
    """A word-level diff: ``(op, text)`` pieces with op ``=``, ``-`` (only in ``old``) or
    ``+`` (only in ``new``); joining the ``=`` and ``+`` pieces gives ``new``."""
    a, b = _TOKEN.findall(old), _TOKEN.findall(new)
    out: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(("=", "".join(a[i1:i2])))
            continue
        if i2 > i1:
            out.append(("-", "".join(a[i1:i2])))
        if j2 > j1:
            out.append(("+", "".join(b[j1:j2])))
    return out


def highlight_spans(text: str, spans: list[tuple[int, int, str]]) -> list[tuple[str, str]]:
    """``text`` cut into ``(kind, piece)`` with kind ``""`` for plain text and the span's
    kind (``number``, ``name``) for a piece the guard could not find in the source."""
    out: list[tuple[str, str]] = []
    pos = 0
    for start, end, kind in spans:
        if start > pos:
            out.append(("", text[pos:start]))
        out.append((kind, text[start:end]))
        pos = end
    if pos < len(text):
        out.append(("", text[pos:]))
    return out
