"""Answer metrics: SQuAD/TriviaQA token F1, exact match and ROUGE-L.

Normalisation follows the official SQuAD v1.1 script (and TriviaQA's, which also turns
underscores into spaces): lowercase, punctuation to space, drop ``a``/``an``/``the``,
collapse whitespace. Scores against several gold aliases take the maximum.

Example:
    >>> squad_f1("the Eiffel Tower", ["Eiffel tower in Paris"])
    0.6666666666666666
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence

from .text import split_sentences

__all__ = [
    "normalize_answer",
    "squad_f1",
    "exact_match",
    "rouge_l",
    "is_unanswered",
    "is_grounded",
    "echoes_question",
    "is_supported",
    "supporting_sentence",
    "question_keys",
    "key_overlap",
    "focus_sentences",
    "SUPPORT_OVERLAP",
]

_STOP = {
    "in",
    "on",
    "at",
    "of",
    "to",
    "for",
    "by",
    "with",
    "from",
    "and",
    "or",
    "is",
    "are",
    "be",
    "it",
    "its",
    "this",
    "that",
    "there",
    "their",
    "they",
    "which",
    "who",
    "as",
    "per",
    "each",
}

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation) | {"‘", "’", "“", "”", "–", "—", "´"}
_UNANSWERED = {
    "i don t know",
    "i do not know",
    "don t know",
    "unknown",
    "not in summary",
    "not in content",
    "not mentioned",
    "not stated",
    "not provided",
    "not available",
    "no answer",
    "n a",
    "",
}


def normalize_answer(text: str) -> str:
    """Lowercase, punctuation and underscores to space, drop articles, collapse spaces."""
    text = text.lower().replace("_", " ")
    text = "".join(" " if ch in _PUNCT else ch for ch in text)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def is_unanswered(answer: str | None) -> bool:
    """True for an empty answer or an "I don't know"-style refusal."""
    if answer is None:
        return True
    norm = normalize_answer(answer)
    if norm in _UNANSWERED:
        return True
    return norm.startswith(("i don t know", "i do not know", "not in summary", "not mentioned"))


def is_grounded(answer: str | None, context: str, *, min_share: float = 0.5) -> bool:
    """True when the answer's content words occur in ``context``: every number, and at
    least ``min_share`` of the other words. Small models answer from unrelated text with
    confidence; an answer that is not in what it was drawn from is not a cache hit."""
    if answer is None or is_unanswered(answer):
        return False
    words = [w for w in normalize_answer(answer).split() if w not in _STOP]
    if not words:
        return True
    have = set(normalize_answer(context).split())
    numbers = [w for w in words if any(c.isdigit() for c in w)]
    if any(n not in have for n in numbers):
        return False
    return sum(w in have for w in words) / len(words) >= min_share


def echoes_question(answer: str | None, question: str) -> bool:
    """True when every content word of the answer is already in the question.

    A small model that finds nothing in its context often answers with the question's own
    subject ("Who presented the mace to the Scottish Parliament?" -> "Scottish Parliament"),
    and that answer is always "grounded", since the context mentions the subject too. It is
    not an answer, so it must not count as a cache hit.

    Example:
        >>> echoes_question("the Parliament", "Who gave the mace to the Parliament?")
        True
        >>> echoes_question("the Queen", "Who gave the mace to the Parliament?")
        False
    """
    if answer is None:
        return False
    words = [w for w in normalize_answer(answer).split() if w not in _STOP]
    if not words:
        return False
    asked = set(normalize_answer(question).split())
    return all(w in asked for w in words)


_ASKING = {
    "what", "when", "where", "who", "whom", "whose", "which", "why", "how", "many", "much",
    "did", "does", "do", "was", "were", "has", "have", "had", "can", "could", "would", "will",
    "name", "called", "type", "kind", "year", "not", "also", "about", "into", "than",
    "take", "took", "place", "happen", "happened", "occur", "occurred",
}  # fmt: skip


def _stem(word: str) -> str:
    return word[:6] if len(word) > 6 else word.rstrip("s")


# the share of a question's key words one sentence must hold to support an answer
# (is_supported) or to be read at all by a focused hit context (focus_sentences)
SUPPORT_OVERLAP = 0.5


def question_keys(question: str, *, exclude: str | None = None) -> set[str]:
    """The question's key words: content words that are neither question words nor part
    of ``exclude`` (an answer), as crude stems. The one notion of "what the question
    speaks of" behind :func:`is_supported` and :func:`focus_sentences`.

    Example:
        >>> sorted(question_keys("Who led the Panthers in sacks?"))
        ['led', 'panthe', 'sack']
    """
    given = {_stem(w) for w in normalize_answer(exclude).split()} if exclude else set()
    return {
        _stem(w)
        for w in normalize_answer(question).split()
        if w not in _STOP and w not in _ASKING and _stem(w) not in given
    }


def key_overlap(keys: set[str], sentence: str) -> float:
    """The share of ``keys`` (see :func:`question_keys`) that ``sentence`` holds."""
    if not keys:
        return 1.0
    have = {_stem(w) for w in normalize_answer(sentence).split()}
    return len(keys & have) / len(keys)


def is_supported(
    answer: str | None, question: str, context: str, *, min_overlap: float = SUPPORT_OVERLAP
) -> bool:
    """True when ONE sentence of ``context`` holds the answer (see :func:`is_grounded`) and
    at least ``min_overlap`` of the question's key words (content words that are neither
    question words nor part of the answer; crude stems). A small model asked about a fact
    its context lacks picks a plausible name from an unrelated sentence ("Where did the
    spring meetings of the NFL owners take place?" -> the stadium's city); that sentence
    does not speak of what was asked.

    Example:
        >>> ctx = "Kawann Short led the team in sacks. The game was in Santa Clara."
        >>> is_supported("Kawann Short", "Who led the Panthers in sacks?", ctx)
        True
        >>> is_supported("Santa Clara", "Where did the owners meet in spring?", ctx)
        False
    """
    return supporting_sentence(answer, question, context, min_overlap=min_overlap) is not None


def supporting_sentence(
    answer: str | None, question: str, context: str, *, min_overlap: float = SUPPORT_OVERLAP
) -> str | None:
    """The sentence of ``context`` that holds ``answer`` and the most of the question's
    key words (at least ``min_overlap`` of them, and one; the first on a tie), or ``None``: the
    evidence :func:`is_supported` looks for, and what an extractive refinement appends.

    Example:
        >>> ctx = "The Panthers lost. Kawann Short led the Panthers in sacks."
        >>> supporting_sentence("Kawann Short", "Who led the Panthers in sacks?", ctx)
        'Kawann Short led the Panthers in sacks.'
    """
    if not is_grounded(answer, context):
        return None
    assert answer is not None
    keys = question_keys(question, exclude=answer)
    best: tuple[float, str] | None = None
    for sentence in split_sentences(context):
        if not is_grounded(answer, sentence):
            continue
        overlap = key_overlap(keys, sentence)
        if overlap >= min_overlap and overlap > 0 and (best is None or overlap > best[0]):
            best = (overlap, sentence)
    return best[1] if best else None


def focus_sentences(
    question: str,
    texts: Sequence[str],
    *,
    limit: int = 4,
    min_overlap: float = SUPPORT_OVERLAP,
) -> list[list[str]]:
    """Per text, its sentences that could support an answer to ``question``: those that
    hold at least ``min_overlap`` of its key words (the bar :func:`is_supported` sets), at
    most ``limit`` over all texts, the best first (ties: the earlier text and sentence),
    each text's kept in their own order. A hit context cut to these costs a fifth of a
    summary and a chunk, and loses only sentences that the support check would not accept
    as the answer's evidence anyway.

    Example:
        >>> focus_sentences("Who led the Panthers in sacks?",
        ...     ["The game was in Santa Clara. Kawann Short led the team in sacks."])
        [['Kawann Short led the team in sacks.']]
    """
    keys = question_keys(question)
    scored = [
        (key_overlap(keys, s), t, i, s)
        for t, text in enumerate(texts)
        for i, s in enumerate(split_sentences(text))
    ]
    kept = sorted((x for x in scored if x[0] >= min_overlap), key=lambda x: (-x[0], x[1], x[2]))
    chosen = sorted(kept[:limit], key=lambda x: (x[1], x[2]))
    return [[s for _, t, _, s in chosen if t == n] for n in range(len(texts))]


def _aliases(gold: str | Iterable[str]) -> list[str]:
    return [gold] if isinstance(gold, str) else list(gold)


def _f1(prediction: str, truth: str) -> float:
    pred = normalize_answer(prediction).split()
    gold = normalize_answer(truth).split()
    if not pred or not gold:
        return float(pred == gold)
    common = Counter(pred) & Counter(gold)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred)
    recall = same / len(gold)
    return 2 * precision * recall / (precision + recall)


def squad_f1(prediction: str, gold: str | Iterable[str]) -> float:
    """Token F1 of ``prediction`` against the best of the gold aliases (0.0 if unanswered)."""
    if is_unanswered(prediction):
        return 0.0
    return max((_f1(prediction, g) for g in _aliases(gold)), default=0.0)


def exact_match(prediction: str, gold: str | Iterable[str]) -> float:
    """1.0 when the normalised prediction equals a normalised gold alias, else 0.0."""
    if is_unanswered(prediction):
        return 0.0
    norm = normalize_answer(prediction)
    return float(any(norm == normalize_answer(g) for g in _aliases(gold)))


def _lcs(a: list[str], b: list[str]) -> int:
    if not a or not b:
        return 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b, 1):
            cur.append(prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1]))
        prev = cur
    return prev[-1]


def rouge_l(prediction: str, gold: str | Iterable[str]) -> float:
    """ROUGE-L F-measure (longest common token subsequence), max over gold aliases."""
    pred = normalize_answer(prediction).split()
    best = 0.0
    for g in _aliases(gold):
        ref = normalize_answer(g).split()
        lcs = _lcs(pred, ref)
        if lcs:
            p, r = lcs / len(pred), lcs / len(ref)
            best = max(best, 2 * p * r / (p + r))
    return best
