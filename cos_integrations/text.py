"""Token estimates, every text splitter (sentences, source chunks for the full-text
collection, sections of long documents that fit a context budget) and the one
language-neutral way text is compared (:func:`text_tokens`, :func:`quote_in`).

Sentences come from BlingFire's multilingual sentence breaker (``blingfire``), which needs
no language code: on the four development sets and a list of abbreviations ("e.g.",
"Fig. 2", "approx.", "z. B.", "C. J. Anderson", Chinese full stops) it kept the most gold
answers inside one sentence and split the abbreviations right 10 times in 12, where ICU's
BreakIterator did 6, pysbd 8 and the regular expression used before 5
(``benchmarks/sentence_splitters.py``, BENCHMARKS.md)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache

__all__ = [
    "question_key",
    "count_words",
    "estimate_tokens",
    "tokens_for_chars",
    "split_sections",
    "split_sentences",
    "complete_sentences",
    "chunk_text",
    "TokenCounter",
    "normalize_text",
    "text_tokens",
    "quote_in",
    "quote_span",
    "QUOTE_MATCH",
    "tokens_in",
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


# a sentence ends after . ! or ?: only where a paragraph is too long for its section
# (_pieces); every other split is split_sentences'
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+")


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


def _break_sentences(paragraph: str) -> list[str]:
    """One paragraph's sentences, by BlingFire's multilingual sentence breaker."""
    from blingfire import text_to_sentences

    out: list[str] = []
    for piece in text_to_sentences(paragraph).split("\n"):
        piece = piece.strip()
        # a piece that starts in lower case continues the sentence before it ('"Why?"
        # asked the fox.'): the one merge a measurement keeps (BENCHMARKS.md)
        if out and piece and piece[0].islower():
            out[-1] = f"{out[-1]} {piece}"
        elif piece:
            out.append(piece)
    return out


def split_sentences(text: str) -> list[str]:
    r"""Sentences, stripped, empty ones dropped, in any language (BlingFire's sentence
    breaker: abbreviations and initials do not end one; a Chinese full stop does). A
    sentence hard-wrapped over lines stays whole; a blank line, a list item or a heading
    always starts a new one.

    Examples:
        >>> split_sentences("It rained. Then it snowed! Cold")
        ['It rained.', 'Then it snowed!', 'Cold']
        >>> split_sentences("Running back C. J. Anderson led, e.g. in week 2. He ran.")
        ['Running back C. J. Anderson led, e.g. in week 2.', 'He ran.']
        >>> split_sentences('"Where to?" asked the fox. "Home," said the hen.')
        ['"Where to?" asked the fox.', '"Home," said the hen.']
        >>> split_sentences("北京是中国的首都。它很大。")
        ['北京是中国的首都。', '它很大。']
        >>> split_sentences("Bicycles must\nbe stored inside.\n\n# Keys\n- one key\n- two")
        ['Bicycles must be stored inside.', '# Keys', '- one key', '- two']
    """
    out: list[str] = []
    for line in _paragraph_lines(text):
        marker = ""
        for piece in _break_sentences(line):
            piece = piece.strip()
            if _NUMBERED.fullmatch(piece):  # "1." of a numbered item: not a sentence
                marker = f"{marker}{piece} "
            elif piece:
                out.append(marker + piece)
                marker = ""
        if marker:
            out.append(marker.strip())
    return out


# scripts written without spaces between words: each character is a token
_NO_SPACE_CHARS = (
    "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\U00020000-\U0002fa1f"
)
# and scripts written without spaces whose characters are letters rather than words (Thai,
# Lao, Khmer, Myanmar): each character a token where text is compared (normalize_text), so
# a Thai answer is found inside a Thai sentence; counted as words they are not (a chunk of
# 160 "words" would be 160 letters)
_LETTER_SCRIPTS = "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff"
_NO_SPACES = re.compile(f"([{_NO_SPACE_CHARS}{_LETTER_SCRIPTS}])")
# a word as chunk sizes and summary budgets count it: a run of text between spaces, or one
# character of a script written without spaces
_WORD = re.compile(f"[{_NO_SPACE_CHARS}]|[^\\s{_NO_SPACE_CHARS}]+")


def count_words(text: str) -> int:
    """Words in any script: runs of text between spaces, and each character of a script
    written without spaces (Chinese, Japanese, Korean), so that a chunk of 160 words is
    about as long in every language (a full-width mark such as "。" counts as one).

    Examples:
        >>> count_words("Rent is due on the 1st."), count_words("北京是中国的首都。")
        (6, 9)
    """
    return len(_WORD.findall(text))


@lru_cache(maxsize=4096)
def normalize_text(text: str) -> str:
    """Text as the hit path compares it, in any language: Unicode NFKC, case-folded,
    punctuation and symbols as spaces (letters, digits and marks of every script kept),
    characters of scripts written without spaces apart (Chinese, Japanese, Korean, Thai,
    Lao, Khmer, Myanmar), whitespace collapsed.

    Examples:
        >>> normalize_text("SARS-CoV-2 binds  ACE2 (Fig. 2).")
        'sars cov 2 binds ace2 fig 2'
        >>> normalize_text("Straße 5,5 km"), normalize_text("北京是首都")
        ('strasse 5 5 km', '北 京 是 首 都')
    """
    text = unicodedata.normalize("NFKC", text).casefold()
    kept = "".join(
        ch if unicodedata.category(ch)[0] in "LNM" else " " for ch in _NO_SPACES.sub(r" \1 ", text)
    )
    return " ".join(kept.split())


def text_tokens(text: str) -> list[str]:
    """:func:`normalize_text`'s tokens (a word, a number, or one character of a script
    written without spaces).

    Examples:
        >>> text_tokens("Kawann Short's 11 sacks")
        ['kawann', 'short', 's', '11', 'sacks']
    """
    return normalize_text(text).split()


# the share of a quote's tokens that must line up with the text, in order (quote_span): a
# small model copies a sentence with a word changed or added ("distinguish" for
# "distinguishes", "the largest known prime number" for "... prime"); a made-up sentence
# lines up with far less
QUOTE_MATCH = 0.8


def quote_span(quote: str, text: str, *, share: float = QUOTE_MATCH) -> str | None:
    """The words of ``text`` that ``quote`` copies, or ``None`` when it copies none. Both are
    compared as :func:`normalize_text` writes them (case, Unicode forms, punctuation and
    spacing do not matter), the quote aligned to the text in order (each token that lines up
    +1, each changed, left out or added one -1; the text before and after is free), and
    kept when its score reaches ``share`` of the quote's tokens. A quote cut with an
    ellipsis ("..." or "…") aligns part by part (the parts' spans joined). An empty quote
    copies nothing.

    Examples:
        >>> src = "The Panthers' defense gave up just 308 points, sixth in the league."
        >>> quote_span("Panthers' defense gave up just 308 points", src)
        'panthers defense gave up just 308 points'
        >>> quote_span("the panthers defense gave up 308 points", src)  # one word left out
        'the panthers defense gave up just 308 points'
        >>> quote_span("The Broncos defense gave up 300 points", src) is None
        True
        >>> quote_span("Die Verteidigung … 308 Punkte", "Die Verteidigung gab 308 Punkte ab")
        'die verteidigung 308 punkte'
    """
    parts = [normalize_text(p).split() for p in re.split(r"\.\.\.|…", quote)]
    parts = [p for p in parts if p]
    if not parts:
        return None
    tokens = text_tokens(text)
    spans = []
    for part in parts:
        found = _align(part, tokens)
        if found is None or found[0] < share * len(part):
            return None
        spans.append(" ".join(tokens[found[1] : found[2]]))
    return " ".join(spans)


def _align(part: list[str], tokens: list[str]) -> tuple[int, int, int] | None:
    """The best alignment of all of ``part`` to a stretch of ``tokens`` (match +1; mismatch,
    gap -1; free ends in ``tokens``): its score and the stretch's start and end."""
    if not tokens:
        return None
    n, m = len(part), len(tokens)
    prev = [0] * (m + 1)  # row 0: the quote may start anywhere in the text
    start = list(range(m + 1))
    for i in range(1, n + 1):
        cur, cur_start = [-i] + [0] * m, [0] * (m + 1)
        for j in range(1, m + 1):
            diag = prev[j - 1] + (1 if part[i - 1] == tokens[j - 1] else -1)
            up, left = prev[j] - 1, cur[j - 1] - 1
            if diag >= up and diag >= left:
                cur[j], cur_start[j] = diag, start[j - 1]
            elif up >= left:
                cur[j], cur_start[j] = up, start[j]
            else:
                cur[j], cur_start[j] = left, cur_start[j - 1]
        prev, start = cur, cur_start
    end = max(range(1, m + 1), key=lambda j: prev[j])
    return prev[end], start[end], end


def quote_in(quote: str, text: str) -> bool:
    """True when ``quote`` copies words of ``text`` (:func:`quote_span`).

    Examples:
        >>> quote_in("SARS CoV 2 binds ACE2", "SARS-CoV-2 binds ACE2 in the lung.")
        True
        >>> quote_in("ACE2 binds the spike protein of MERS", "SARS-CoV-2 binds ACE2.")
        False
    """
    return quote_span(quote, text) is not None


def tokens_in(text: str, where: str, *, share: float = 1.0) -> bool:
    """True when every token of ``text`` holding a digit, and tokens making at least
    ``share`` of its characters, occur among ``where``'s tokens (:func:`text_tokens`): an
    answer "in" a quote or a source, in any order ("Short, Kawann"). Digits compare with
    digits ("4" is not "four"); weighing tokens by length lets the short function words of
    any language count for little ("in the garage" is not in "in the basement").

    Examples:
        >>> tokens_in("Kawann Short", "Pro Bowl tackle Kawann Short led the team")
        True
        >>> tokens_in("4 sacks", "four sacks"), tokens_in("4 sacks", "4 big sacks")
        (False, True)
        >>> tokens_in("in the garage", "stored in the basement", share=0.5)
        False
    """
    mine = text_tokens(text)
    if not mine:
        return False
    have = set(text_tokens(where))
    if any(t not in have for t in mine if any(c.isdigit() for c in t)):
        return False
    return sum(len(t) for t in mine if t in have) >= share * sum(len(t) for t in mine)


def chunk_text(text: str, *, words: int = 160, overlap: int = 30) -> list[str]:
    """Chunks of about ``words`` words (:func:`count_words`) on sentence boundaries,
    ``overlap`` words shared; a sentence longer than ``words`` is cut at word boundaries.

    Examples:
        >>> len(chunk_text("One. Two. Three.", words=2, overlap=0))
        2
        >>> chunk_text("北京是首都。上海是城市。", words=6, overlap=0)
        ['北京是首都。', '上海是城市。']
    """
    if words <= overlap:
        raise ValueError("words must exceed overlap")
    sentences = split_sentences(text)
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for sent in sentences:
        n = count_words(sent)
        if current and size + n > words:
            chunks.append(" ".join(current))
            # carry the tail sentences (up to `overlap` words) into the next chunk
            tail: list[str] = []
            tail_size = 0
            for s in reversed(current):
                m = count_words(s)
                if tail_size + m > overlap:
                    break
                tail.insert(0, s)
                tail_size += m
            current, size = tail, tail_size
        if n > words:  # one enormous sentence: hard-split it
            ws = list(_WORD.finditer(sent))
            for i in range(0, len(ws), words - overlap):
                last = ws[min(i + words, len(ws)) - 1]
                chunks.append(" ".join(sent[ws[i].start() : last.end()].split()))
            current, size = [], 0
            continue
        current.append(sent)
        size += n
    if current:
        chunks.append(" ".join(current))
    return chunks or ([text.strip()] if text.strip() else [])


def complete_sentences(text: str) -> str:
    """Drop a last sentence cut off by a token cap (keep the text if little would remain).

    Examples:
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

    Examples:
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


def question_key(question: str) -> str:
    """What makes two questions the same question: their text as
    :func:`normalize_text` writes it (Unicode NFKC, case-folded,
    punctuation as spaces, whitespace collapsed), in any language; no word is dropped.

    Examples:
        >>> question_key("When is  rent due?") == question_key("when is rent due")
        True
        >>> question_key("Wann ist die Miete fällig?")
        'wann ist die miete fällig'
    """
    return normalize_text(question)
