"""Answer metrics: SQuAD/TriviaQA token F1, exact match and ROUGE-L.

Normalisation follows the official SQuAD v1.1 script (and TriviaQA's, which also turns
underscores into spaces): lowercase, punctuation to space, drop ``a``/``an``/``the``,
collapse whitespace; in another language, as MLQA's script does (``language=``: that
language's articles, and Chinese scored by character). Scores against several gold aliases
take the maximum.

Examples:
    >>> squad_f1("the Eiffel Tower", ["Eiffel tower in Paris"])
    0.6666666666666666
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterable

__all__ = [
    "normalize_answer",
    "squad_f1",
    "exact_match",
    "rouge_l",
    "is_unanswered",
]


_ARTICLES = re.compile(r"\b(a|an|the)\b")
# MLQA's articles per language (its evaluation script); Chinese is compared by character
_LANGUAGE_ARTICLES = {
    "en": _ARTICLES,
    "de": re.compile(r"\b(der|die|das|des|dem|den|ein|eine|einer|eines|einem|einen)\b"),
    "es": re.compile(r"\b(un|una|unos|unas|el|la|los|las)\b"),
    "vi": re.compile(r"\b(của|là|cái|chiếc|những)\b"),
}
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


def normalize_answer(text: str, language: str = "en") -> str:
    """Lowercase, punctuation and underscores to space, drop the ``language``'s articles,
    collapse spaces (Chinese: one token a character, as MLQA scores it).

    Examples:
        >>> normalize_answer("The Rhine"), normalize_answer("der Rhein", "de")
        ('rhine', 'rhein')
    """
    text = text.lower().replace("_", " ")
    if language == "en":  # the SQuAD script's ASCII punctuation (and the store's keys)
        text = "".join(" " if ch in _PUNCT else ch for ch in text)
    else:  # MLQA's: every Unicode punctuation mark
        text = "".join(
            " " if ch in _PUNCT or unicodedata.category(ch).startswith("P") else ch for ch in text
        )
    articles = _LANGUAGE_ARTICLES.get(language.split("-")[0].lower())
    if articles is not None:
        text = articles.sub(" ", text)
    if language.startswith("zh"):
        text = " ".join(ch for ch in text if not ch.isspace())
    return " ".join(text.split())


def is_unanswered(answer: str | None) -> bool:
    """True for an empty answer or an "I don't know"-style refusal."""
    if answer is None:
        return True
    norm = normalize_answer(answer)
    if norm in _UNANSWERED:
        return True
    return norm.startswith(("i don t know", "i do not know", "not in summary", "not mentioned"))


def _aliases(gold: str | Iterable[str]) -> list[str]:
    return [gold] if isinstance(gold, str) else list(gold)


def _f1(prediction: str, truth: str, language: str = "en") -> float:
    pred = normalize_answer(prediction, language).split()
    gold = normalize_answer(truth, language).split()
    if not pred or not gold:
        return float(pred == gold)
    common = Counter(pred) & Counter(gold)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred)
    recall = same / len(gold)
    return 2 * precision * recall / (precision + recall)


def squad_f1(prediction: str, gold: str | Iterable[str], language: str = "en") -> float:
    """Token F1 of ``prediction`` against the best of the gold aliases (0.0 if unanswered),
    normalised for ``language`` (:func:`normalize_answer`).

    Examples:
        >>> squad_f1("den Rhein", ["der Rhein"], "de"), squad_f1("den Rhein", ["der Rhein"])
        (1.0, 0.5)
    """
    if is_unanswered(prediction):
        return 0.0
    return max((_f1(prediction, g, language) for g in _aliases(gold)), default=0.0)


def exact_match(prediction: str, gold: str | Iterable[str], language: str = "en") -> float:
    """1.0 when the normalised prediction equals a normalised gold alias, else 0.0."""
    if is_unanswered(prediction):
        return 0.0
    norm = normalize_answer(prediction, language)
    return float(any(norm == normalize_answer(g, language) for g in _aliases(gold)))


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
