"""Cache statistics: hit rate, tokens saved, and the paper's break-even point.

Break-even (per document): building the summary cost ``B`` tokens once; each query answered
from the summary instead of the full document saves ``source - summary`` tokens. After
``B / (source - summary)`` queries the summary has paid for itself.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from .store import SummaryStore

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
    hits: int = 0
    misses: int = 0
    not_covered: int = 0
    context_tokens: int = 0
    full_document_tokens: int = 0
    per_day: dict[str, tuple[int, int]] = field(default_factory=dict)
    documents: list[DocumentStats] = field(default_factory=list)

    @property
    def queries(self) -> int:
        return self.hits + self.misses + self.not_covered

    @property
    def hit_rate(self) -> float:
        return self.hits / self.queries if self.queries else 0.0

    @property
    def tokens_saved(self) -> int:
        return self.full_document_tokens - self.context_tokens


def compute_stats(store: SummaryStore) -> Stats:
    s = Stats()
    source_tokens: dict[str, int] = {}
    for doc in store.documents():
        versions = store.versions(doc.doc_id)
        cur = store.current_summary(doc.doc_id)
        src = max((v.source_tokens for v in versions), default=0)
        source_tokens[doc.doc_id] = src
        build = 0
        for v in versions:
            res = store.result_of(doc.doc_id, v.version)
            if res is not None:
                build += res.usage.prompt_tokens + res.usage.completion_tokens
        saving = src - (cur.summary_tokens if cur else 0)
        s.documents.append(
            DocumentStats(
                doc.doc_id,
                src,
                cur.summary_tokens if cur else 0,
                build,
                build / saving if saving > 0 else None,
            )
        )
    days: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for ev in store.events():
        day = datetime.fromtimestamp(ev["at"]).strftime("%Y-%m-%d")
        days[day][1] += 1
        if ev["kind"] == "hit":
            s.hits += 1
            days[day][0] += 1
        elif ev["kind"] == "miss":
            s.misses += 1
        else:
            s.not_covered += 1
        s.context_tokens += ev["context_tokens"]
        s.full_document_tokens += source_tokens.get(ev["doc_id"] or "", 0)
    s.per_day = {d: (h, t) for d, (h, t) in sorted(days.items())}
    return s
