"""Split source text into overlapping chunks for the full-text collection."""

from __future__ import annotations

import re

__all__ = ["chunk_text"]

_SENT = re.compile(r"(?<=[.!?])\s+|\n\s*\n")


def chunk_text(text: str, *, words: int = 160, overlap: int = 30) -> list[str]:
    """Chunks of about ``words`` words on sentence boundaries, ``overlap`` words shared.

    Example:
        >>> len(chunk_text("One. Two. Three.", words=2, overlap=0))
        2
    """
    if words <= overlap:
        raise ValueError("words must exceed overlap")
    sentences = [s.strip() for s in _SENT.split(text) if s and s.strip()]
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for sent in sentences:
        n = len(sent.split())
        if current and size + n > words:
            chunks.append(" ".join(current))
            # carry the tail sentences (up to `overlap` words) into the next chunk
            tail: list[str] = []
            tail_size = 0
            for s in reversed(current):
                if tail_size + len(s.split()) > overlap:
                    break
                tail.insert(0, s)
                tail_size += len(s.split())
            current, size = tail, tail_size
        if n > words:  # one enormous sentence: hard-split it
            ws = sent.split()
            for i in range(0, len(ws), words - overlap):
                piece = ws[i : i + words]
                chunks.append(" ".join(piece))
            current, size = [], 0
            continue
        current.append(sent)
        size += n
    if current:
        chunks.append(" ".join(current))
    return chunks or ([text.strip()] if text.strip() else [])
