"""The hit rule, in one place: when a summary answers a query, and from what.

A query's best summary is a **hit** when

1. its cosine similarity clears the threshold (:attr:`HitRule.threshold`; by default the
   index's own, calibrated from the questions it knows at :attr:`HitRule.calibration_quantile`,
   see ``CoSIndex.calibrate_threshold``);
2. with the model judge (``judge="llm"``), its document also holds the top source chunk of
   the whole collection (:attr:`HitRule.verify_route`: the summary and the chunks agree on
   where the answer is, so the judge's call is not wasted on a query the two route apart);
3. the hit context (:attr:`HitRule.hit_context`; ``"focused"``: the sentences of the best
   summary and its document's best chunk that hold half of the query's key words, at most
   :attr:`HitRule.focus_sentences` of them, :func:`focus_sentences`) is not empty;
4. the judge's answer from that context passes the required checks
   (:meth:`HitRule.required_checks`): it is in the context (:func:`is_grounded`), one
   sentence holds it and half the query's key words (:func:`is_supported`, on by default),
   optionally it does not echo the query (:func:`echoes_question`) and the document's best
   chunk holds it too (``verify_chunk``).

A rule is a frozen value: the core retriever, both frameworks' retrievers, ``cos query``
and ``cos eval`` take one (``rule=``), and an index records the one it was calibrated with
(``CoSIndex.hit_rule``, in its manifest), which a retriever given no rule uses. The
defaults are the measured ones (BENCHMARKS.md; :mod:`cos_integrations.defaults` says why).
The evidence functions below are the rule's checks; refinement uses
:func:`supporting_sentence` to find the sentence it appends.

Example:
    >>> rule = HitRule(judge="llm")
    >>> rule.context, rule.routes, rule.required_checks()
    ('focused', True, ['in_context', 'supported'])
    >>> HitRule(judge="llm", require_support=False, threshold=0.85).required_checks()
    ['in_context']
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cos_integrations.defaults import (
    CALIBRATION_QUANTILE,
    DEFAULT_ANSWERED_MISS_SIMILARITY,
    DEFAULT_ANSWERED_MISSES,
    DEFAULT_HIT_CONTEXT,
    DEFAULT_REJECT_ECHO,
    DEFAULT_REQUIRE_SUPPORT,
    DEFAULT_VERIFY_CHUNK,
    DEFAULT_VERIFY_ROUTE,
    FOCUS_SENTENCES,
    HitContext,
    Judge,
)
from cos_integrations.metrics import is_unanswered, normalize_answer, squad_f1
from cos_integrations.text import split_sentences

# the answer checks (they lived in metrics.py until 0.1, which still lends their names)
EVIDENCE: tuple[str, ...] = (
    "is_grounded",
    "answers_agree",
    "echoes_question",
    "is_supported",
    "supporting_sentence",
    "question_keys",
    "key_overlap",
    "focus_sentences",
    "SUPPORT_OVERLAP",
)
__all__ = [
    "HitRule",
    "Judge",
    "HIT_RULE_FIELDS",
    "EVIDENCE",
    "apply_legacy",
    "question_names",
    "named_sentences",
    *EVIDENCE,
]


class HitRule(BaseModel):
    """When a summary answers a query, and what the judge reads (see the module docstring).

    Frozen: change one field with ``rule.model_copy(update={...})``. ``None`` fields take
    the value that follows from the judge or the index (:attr:`context`, :attr:`routes`,
    ``threshold``: the index's calibrated one).

    Example:
        >>> rule = HitRule(judge="llm", threshold=0.82)
        >>> rule.model_copy(update={"focus_sentences": 2}).focus_sentences
        2
        >>> HitRule.model_validate_json(rule.model_dump_json()) == rule
        True
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    threshold: float | None = Field(
        None,
        description="cosine similarity the best summary must reach before the judge is asked; "
        "None: the index's calibrated threshold (else 0.80, tuned to e5)",
    )
    calibration_quantile: float = Field(
        CALIBRATION_QUANTILE,
        ge=0.0,
        le=1.0,
        description="the quantile of known questions' similarity to their own summary that "
        "an index calibrates its threshold to (about 3 in 4 such queries reach the judge)",
    )
    judge: Judge = Field(
        "score",
        description='"llm": the model must answer the query from the hit context and pass '
        'the required checks; "score": the similarity alone decides (no model call)',
    )
    hit_context: HitContext | None = Field(
        None,
        description='what the judge reads and a hit returns: "summaries" (those that clear '
        'the threshold), "best", "best+chunk" (the best summary and its document\'s best '
        'chunk) or "focused" (their sentences on the query); None: "focused" with the '
        'model judge, "summaries" without (a similarity hit returns the top-k summaries)',
    )
    reject_echo: bool = Field(
        DEFAULT_REJECT_ECHO,
        description="require that the answer is not just words of the query",
    )
    require_support: bool = Field(
        DEFAULT_REQUIRE_SUPPORT,
        description="require one context sentence holding the answer and half the query's "
        "key words (catches a plausible name picked from an unrelated sentence)",
    )
    verify_chunk: bool = Field(
        DEFAULT_VERIFY_CHUNK,
        description="require that the best summary's document's best chunk holds the answer",
    )
    verify_route: bool | None = Field(
        DEFAULT_VERIFY_ROUTE,
        description="ask the judge only when the best summary's document holds the "
        "collection's top source chunk; None: on with the model judge, off without",
    )
    answered_misses: bool = Field(
        DEFAULT_ANSWERED_MISSES,
        description="a query that missed before and whose answer a refine job then found in "
        "a document's source goes to that document, past the threshold and the routing "
        'check (the judge and its checks still decide; judge "llm" only)',
    )
    answered_miss_similarity: float | None = Field(
        DEFAULT_ANSWERED_MISS_SIMILARITY,
        ge=0.0,
        le=1.0,
        description="with answered_misses, a query this close (cosine) to an answered "
        "miss's question takes its route too (a paraphrase); it hits only when the judge's "
        "answer agrees with the refine job's, else the usual route decides. None: exact "
        "repeats only",
    )
    focus_sentences: int = Field(
        FOCUS_SENTENCES,
        ge=1,
        description='the most sentences a "focused" hit context keeps',
    )

    @property
    def context(self) -> HitContext:
        """The hit context in force (``hit_context``, or its default for the judge)."""
        if self.hit_context is not None:
            return self.hit_context
        return DEFAULT_HIT_CONTEXT if self.judge == "llm" else "summaries"

    @property
    def routes(self) -> bool:
        """Whether the routing check applies (``verify_route``, or its default for the
        judge: on for ``"llm"``, off for ``"score"``)."""
        return self.judge == "llm" if self.verify_route is None else self.verify_route

    def required_checks(self) -> list[str]:
        """The checks on the judge's answer that must all pass for a hit."""
        names = ["in_context"]
        if self.reject_echo:
            names.append("not_echo")
        if self.require_support:
            names.append("supported")
        if self.verify_chunk:
            names.append("in_chunk")
        return names

    def check(
        self,
        answer: str | None,
        query: str,
        context: str,
        *,
        sources: str = "",
        chunk: str | None = None,
    ) -> dict[str, bool]:
        """Every check on the judge's ``answer`` (no model call): ``context`` is what it read,
        ``sources`` the full text of its documents, ``chunk`` the best summary's document's
        best chunk (``in_chunk`` is reported only when one is given). :meth:`passes` decides.

        Example:
            >>> HitRule(judge="llm").check("Kawann Short", "Who led the Panthers in sacks?",
            ...     "Kawann Short led the Panthers in sacks.")["supported"]
            True
        """
        in_context = is_grounded(answer, context)
        checks = {
            "in_context": in_context,
            "not_echo": not echoes_question(answer, query),
            "in_source": in_context and is_grounded(answer, sources),
            "supported": in_context and is_supported(answer, query, context),
        }
        if chunk is not None:
            checks["in_chunk"] = in_context and bool(chunk) and is_grounded(answer, chunk)
        return checks

    def failed(self, checks: dict[str, bool]) -> list[str]:
        """The required checks that ``checks`` did not pass (empty: a hit)."""
        return [name for name in self.required_checks() if not checks.get(name)]

    def with_options(self, **options: Any) -> HitRule:
        """This rule with the options that are not ``None`` changed (a CLI's or a legacy
        keyword's way in: an option left out keeps the rule's value).

        Example:
            >>> HitRule().with_options(judge="llm", threshold=None).judge
            'llm'
        """
        given = {k: v for k, v in options.items() if v is not None}
        return self.model_validate({**self.model_dump(), **given}) if given else self


# the fields a HitRule has (the legacy keyword arguments the retrievers still accept)
HIT_RULE_FIELDS: tuple[str, ...] = tuple(HitRule.model_fields)


def apply_legacy(
    rule: HitRule | None, legacy: dict[str, Any], *, where: str, base: HitRule
) -> HitRule | None:
    """``rule`` (else ``base``, e.g. the index's) with the hit-rule keyword arguments of
    before 0.2 (``threshold=``, ``judge=``, ...) applied, and a deprecation warning; an
    unknown keyword is a ``TypeError`` naming ``where``. No keywords: ``rule`` unchanged.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True):
        ...     apply_legacy(None, {"judge": "llm"}, where="f", base=HitRule()).judge
        'llm'
    """
    unknown = sorted(set(legacy) - set(HIT_RULE_FIELDS))
    if unknown:
        raise TypeError(f"{where}() got unexpected keyword arguments: {', '.join(unknown)}")
    if not legacy:
        return rule
    warnings.warn(
        f"{where}({', '.join(f'{k}=' for k in legacy)}) is deprecated: pass rule=HitRule("
        f"{', '.join(f'{k}=...' for k in legacy)}); the keywords go in 0.3",
        DeprecationWarning,
        stacklevel=3,
    )
    return (rule or base).with_options(**legacy)


# words that carry no content of their own in an answer or a question
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


# number words and the numerals they are, for answers_agree: a model answers "4" where the
# source says "four" ("one" left out: mostly a pronoun, "no one", "one of them")
_NUMERALS = {
    word: str(n)
    for n, word in enumerate(
        "zero _ two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
    if word != "_"
} | {
    word: str(10 * n)
    for n, word in enumerate("thirty forty fifty sixty seventy eighty ninety".split(), 3)
}


def is_grounded(answer: str | None, context: str, *, min_share: float = 0.5) -> bool:
    """True when the answer's content words occur in ``context``: every number, and at
    least ``min_share`` of the other words. Small models answer from unrelated text with
    confidence; an answer that is not in what it was drawn from is not a cache hit. Words
    are compared as written: "4" is not grounded by "four" (tried as the same word: the
    judge's "4" then hit where the source and SQuAD's gold say "four", and scored 0); the
    hit path first writes the judge's numerals in the context's words
    (:func:`in_source_words`).

    Example:
        >>> is_grounded("four", "Josh Norman had four interceptions."), is_grounded("4", "four")
        (True, False)
    """
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


_NUMBER_WORDS = {numeral: word for word, numeral in _NUMERALS.items()}


def in_source_words(answer: str | None, context: str) -> str | None:
    """``answer`` with each numeral the context does not hold written as the number word it
    does hold ("4" -> "four" where the context says "four" and never "4"); otherwise
    ``answer`` unchanged. An extractive answer quotes what it was read from: the judge's
    "4" is then grounded literally, and SQuAD's F1 scores "four" against gold "four" as 1,
    where "4" scores 0 (the reason :func:`is_grounded` reads words as written).

    Example:
        >>> in_source_words("4", "Josh Norman had four interceptions.")
        'four'
        >>> in_source_words("4 games", "four wins in 4 games"), in_source_words("4", "Week 17")
        ('4 games', '4')
    """
    if not answer:
        return answer
    have = set(normalize_answer(context).split())
    out, changed = [], False
    for token in answer.split():
        core = token.strip(".,;:!?\"'()")
        word = _NUMBER_WORDS.get(core)
        if word and core not in have and word in have:
            token, changed = token.replace(core, word), True
        out.append(token)
    return " ".join(out) if changed else answer


def answers_agree(answer: str | None, others: Sequence[str], *, min_f1: float = 0.5) -> bool:
    """True when ``answer`` says what one of ``others`` says: token F1 at least ``min_f1``
    (number words read as numerals) and the same numbers ("4" and "four interceptions"
    agree; "value 1b" and "value 6g", one shared word, do not).

    Example:
        >>> answers_agree("4", ["four interceptions"]), answers_agree("17", ["4 interceptions"])
        (True, False)
    """
    if answer is None or is_unanswered(answer):
        return False
    mine = _numeral_words(answer)
    for other in others:
        theirs = _numeral_words(other)
        same_numbers = _digits(mine) == _digits(theirs)
        if same_numbers and squad_f1(" ".join(mine), " ".join(theirs)) >= min_f1:
            return True
    return False


def _numeral_words(text: str) -> list[str]:
    return [_NUMERALS.get(w, w) for w in normalize_answer(text).split()]


def _digits(words: list[str]) -> set[str]:
    return {w for w in words if any(c.isdigit() for c in w)}


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
# how many sentences naming a question's names a second reading reads (named_sentences)
NAMED_SENTENCES = 4


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


def question_names(question: str) -> set[str]:
    """The question's names: its key words (:func:`question_keys`) written with a capital
    past the first word ("Brock Osweiler", "AFC"), as the same stems. What a sentence must
    name to be about what the question asks about, where two people's figures sit side by
    side.

    Example:
        >>> sorted(question_names("How many touchdowns did Brock Osweiler throw?"))
        ['brock', 'osweil']
    """
    words = re.findall(r"[^\W\d_][\w'’-]*", question)[1:]
    capital = {_stem(w) for c in words if c[0].isupper() for w in normalize_answer(c).split()}
    return (capital & question_keys(question)) - {""}


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


def named_sentences(
    answer: str, question: str, context: str, *, limit: int = NAMED_SENTENCES
) -> str | None:
    """What to read again when ``answer`` is about something else than ``question``: when
    the question names something (:func:`question_names`) that sentences of ``context``
    name, but no sentence holding ``answer`` names it or follows one that does (a
    pronoun's sentence), the ``limit`` sentences naming it with the most key words, each
    with the sentence after it, in context order; else ``None``.

    Example:
        >>> ctx = ("Manning threw nine touchdowns. The weather was cold. "
        ...        "Osweiler threw 10 touchdowns.")
        >>> named_sentences("9", "How many touchdowns did Brock Osweiler throw?", ctx)
        'Osweiler threw 10 touchdowns.'
        >>> named_sentences("10", "How many touchdowns did Brock Osweiler throw?", ctx) is None
        True
    """
    names = question_names(question)
    if not names:
        return None
    sentences = split_sentences(context)
    named = [i for i, s in enumerate(sentences) if key_overlap(names, s) > 0]
    near = {j for i in named for j in (i, i + 1) if j < len(sentences)}
    if not named or any(is_grounded(answer, sentences[j]) for j in near):
        return None
    keys = question_keys(question)
    best = sorted(named, key=lambda i: -key_overlap(keys, sentences[i]))[:limit]
    read = sorted({j for i in best for j in (i, i + 1) if j < len(sentences)})
    return " ".join(sentences[j] for j in read)


def focus_sentences(
    question: str,
    texts: Sequence[str],
    *,
    limit: int = FOCUS_SENTENCES,
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
