"""Token estimates and every text splitter: sentences, source chunks for the full-text
collection, and sections of long documents that fit a context budget. One sentence rule
(``_SENTENCE``: after ``.``, ``!`` or ``?``) serves them all."""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = [
    "estimate_tokens",
    "tokens_for_chars",
    "split_sections",
    "split_sentences",
    "complete_sentences",
    "chunk_text",
    "TokenCounter",
]

TokenCounter = Callable[[str], int]


def estimate_tokens(text: str) -> int:
    """A conservative token estimate (~3.6 characters per token for English BPE vocabularies).

    Pass a real tokenizer's counter to :class:`~cos_integrations.ChainOfSummaries` where exact
    numbers matter; usage figures always come from the API, not from this estimate.
    """
    return tokens_for_chars(len(text)) if text else 0


def tokens_for_chars(chars: int) -> int:
    """:func:`estimate_tokens` from a length alone (the store counts characters in SQL)."""
    return int(chars / 3.6) + 1 if chars else 0


# a sentence ends after . ! or ?, but not after an initial ("C. J. Anderson") or a title
_SENTENCE = re.compile(r"(?<=[.!?])(?<!\b[A-Z]\.)(?<!\b(?:Mr|Ms|Dr|Jr|Sr|St|vs)\.)(?<!\bMrs\.)\s+")


# a line that starts a block of its own: a list item, a heading, a quote, a table row
_NUMBERED = re.compile(r"\d+[.)]")
_BLOCK = re.compile(r"\s*(?:[-*+>|#]|\d+[.)]\s)")


def _paragraph_lines(text: str) -> list[str]:
    """The text's lines with hard-wrapped ones joined: a line continues the one before it
    unless a blank line separates them or it starts a block (list item, heading, ...)."""
    units: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if not line.strip() or (current and _BLOCK.match(line)):
            if current:
                units.append(" ".join(current))
            current = []
        if line.strip():
            current.append(line.strip())
    if current:
        units.append(" ".join(current))
    return units


def split_sentences(text: str) -> list[str]:
    r"""Sentences (split after ``.``, ``!`` or ``?``), stripped, empty ones dropped. A
    sentence hard-wrapped over lines stays whole; a blank line, a list item or a heading
    always starts a new one.

    Example:
        >>> split_sentences("One. Two! Three")
        ['One.', 'Two!', 'Three']
        >>> split_sentences("Running back C. J. Anderson led. Dr. Who ran.")
        ['Running back C. J. Anderson led.', 'Dr. Who ran.']
        >>> split_sentences("Bicycles must\nbe stored inside.\n\n# Keys\n- one key\n- two")
        ['Bicycles must be stored inside.', '# Keys', '- one key', '- two']
    """
    out: list[str] = []
    for line in _paragraph_lines(text):
        marker = ""
        for piece in _SENTENCE.split(line):
            piece = piece.strip()
            if _NUMBERED.fullmatch(piece):  # "1." of a numbered item: not a sentence
                marker = f"{marker}{piece} "
            elif piece:
                out.append(marker + piece)
                marker = ""
        if marker:
            out.append(marker.strip())
    return out


def chunk_text(text: str, *, words: int = 160, overlap: int = 30) -> list[str]:
    """Chunks of about ``words`` words on sentence boundaries, ``overlap`` words shared.

    Example:
        >>> len(chunk_text("One. Two. Three.", words=2, overlap=0))
        2
    """
    if words <= overlap:
        raise ValueError("words must exceed overlap")
    sentences = split_sentences(text)
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


def complete_sentences(text: str) -> str:
    """Drop a last sentence cut off by a token cap (keep the text if little would remain).

    Example:
        >>> complete_sentences("Rent is due on the 1st. A late fee of")
        'Rent is due on the 1st.'
    """
    text = text.strip()
    if not text or text[-1] in ".!?\"')]":
        return text
    cut = max(text.rfind(". "), text.rfind("! "), text.rfind("? "), text.rfind(".\n"))
    return text[: cut + 1] if cut > len(text) // 3 else text


def _pieces(text: str, budget: int, count: TokenCounter) -> list[str]:
    """Paragraphs, then sentences, then hard cuts: every piece fits ``budget``."""
    out: list[str] = []
    for para in re.split(r"\n\s*\n", text):
        para = para.strip()
        if not para:
            continue
        if count(para) <= budget:
            out.append(para)
            continue
        for sent in _SENTENCE.split(para):
            if count(sent) <= budget:
                out.append(sent)
                continue
            step = max(1, int(len(sent) * budget / max(count(sent), 1)))
            out.extend(sent[i : i + step] for i in range(0, len(sent), step))
    return out


def split_sections(text: str, budget: int, count: TokenCounter = estimate_tokens) -> list[str]:
    """Split ``text`` into consecutive sections of at most ``budget`` tokens each.

    Boundaries fall between paragraphs where possible, then between sentences; nothing is
    dropped, and sections are balanced in size rather than greedily filled.

    Example:
        >>> parts = split_sections("a. " * 1000, budget=200)
        >>> len(parts) > 1 and all(estimate_tokens(p) <= 200 for p in parts)
        True
    """
    if budget <= 0:
        raise ValueError("budget must be positive")
    if count(text) <= budget:
        return [text]
    pieces = _pieces(text, budget, count)
    total = sum(count(p) for p in pieces)
    n = max(1, -(-total // budget))
    target = min(budget, -(-total // n) + 1)
    sections: list[list[str]] = [[]]
    size = 0
    for piece in pieces:
        t = count(piece)
        if sections[-1] and size + t > target:
            sections.append([])
            size = 0
        sections[-1].append(piece)
        size += t + 1
    joined = ["\n\n".join(s) for s in sections if s]
    # The balanced target may be exceeded by joining overhead: fall back to the hard budget.
    if any(count(s) > budget for s in joined):
        return _greedy(pieces, budget, count)
    return joined


def _greedy(pieces: list[str], budget: int, count: TokenCounter) -> list[str]:
    sections: list[str] = []
    current = ""
    for piece in pieces:
        candidate = f"{current}\n\n{piece}" if current else piece
        if current and count(candidate) > budget:
            sections.append(current)
            current = piece
        else:
            current = candidate
    if current:
        sections.append(current)
    return sections
