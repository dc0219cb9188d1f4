"""The hit rule, in one place: when a summary answers a query, and from what.

A query's best summary is a **hit** when

1. its cosine similarity clears the threshold (:attr:`HitRule.threshold`; by default the
   index's own, calibrated from the questions it knows at :attr:`HitRule.calibration_quantile`,
   see ``CoSIndex.calibrate_threshold``);
2. with the model judge (``judge="llm"``), its document also holds the top source chunk of
   the whole collection (the summary and the chunks agree on where the answer is, so the
   judge's call is not spent on a query the two route apart);
3. the judge reads the hit context (:attr:`HitRule.hit_context`; ``"focused"``: the
   sentence windows of the best summary and its document's best chunk closest to the query
   by the index's own embedding, at most :attr:`HitRule.focus_sentences` sentences) and
   replies, through the endpoint's structured output (:data:`GROUNDED_SCHEMA`), with a
   verbatim **quote** from it and a short **answer**;
4. the reply is grounded (:meth:`HitRule.check`, :func:`grounding_checks`): an answer was
   given, the quote copies words of what the judge read
   (:func:`~cos_integrations.text.quote_span`: Unicode-normalised, case, punctuation and
   spacing aside, a changed or added word in five tolerated), the answer is in those words,
   the answer is not made only of the question's own words, and the quote copies the
   **source** too, the answer in its words there (``in_source``: a summary sentence that
   the source does not bear out is no evidence). A reply that is not the schema's JSON is a
   miss with a logged reason, never an exception.

Nothing in the decision depends on the language: no word lists, stems or capitals; text is
compared as :func:`~cos_integrations.text.normalize_text` writes it.

A rule is a frozen value: the core retriever, both frameworks' retrievers, ``cos query``
and ``cos eval`` take one (``rule=``), and an index records the one it was calibrated with
(``CoSIndex.hit_rule``, in its manifest), which a retriever given no rule uses.

Examples:
    >>> rule = HitRule(judge="llm")
    >>> rule.context, rule.routes, rule.required_checks()
    ('focused', True, ['answered', 'quoted', 'in_quote', 'not_echo', 'in_source'])
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cos_integrations.defaults import (
    CALIBRATION_QUANTILE,
    DEFAULT_ANSWER_SIMILARITY,
    DEFAULT_HIT_CONTEXT,
    DEFAULT_SCORE_HIT_CONTEXT,
    FOCUS_SENTENCES,
    HIT_CONTEXTS,
    HitContext,
    Judge,
)
from cos_integrations.summarize.prompts import UNKNOWN_ANSWER
from cos_integrations.text import (
    normalize_text,
    quote_span,
    split_sentences,
    text_tokens,
    tokens_in,
)

_UNKNOWN = normalize_text(UNKNOWN_ANSWER)

__all__ = [
    "HitRule",
    "Judge",
    "GROUNDED_SCHEMA",
    "GroundedReply",
    "parse_grounded",
    "grounding_checks",
    "is_grounded",
    "said_nothing",
    "answers_agree",
    "echoes_question",
    "supporting_sentence",
    "quoted_sentences",
    "sentence_windows",
    "choose_windows",
]


class HitRule(BaseModel):
    """When a summary answers a query, and what the judge reads (see the module docstring).

    Frozen: change one field with ``rule.model_copy(update={...})``. ``None`` fields take
    the value that follows from the judge or the index (:attr:`context`; ``threshold``:
    the index's calibrated one). The lexical checks of before (``reject_echo``,
    ``require_support``, ``verify_chunk``, ``verify_route``, ``answered_miss_similarity``)
    are still accepted, with a deprecation warning, and do nothing.

    Examples:
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
    judge: Judge | None = Field(
        None,
        description='"llm": the model must answer the query from the hit context with a '
        'quote from it, and the reply must be grounded; "score": the similarity alone '
        'decides (no model call, an explicit choice); None: "llm" when the retriever has a '
        'model, else "score" (:meth:`for_model`)',
    )
    hit_context: HitContext | None = Field(
        None,
        description='what the judge reads and a hit returns: "summaries" (those that clear '
        'the threshold), "best+chunk" (the best summary and its '
        'document\'s best chunk) or "focused" (their sentence windows closest to the '
        'query); None: "focused" with the model judge, "best+chunk" with the similarity '
        "alone (measured: defaults.DEFAULT_SCORE_HIT_CONTEXT)",
    )
    focus_sentences: int = Field(
        FOCUS_SENTENCES,
        ge=1,
        description='the most sentences a "focused" hit context keeps (windows of two)',
    )
    answer_similarity: float | None = Field(
        DEFAULT_ANSWER_SIMILARITY,
        ge=0.0,
        le=1.0,
        description="a question at least this close (cosine) to a verified answer's "
        "question is served that answer with no model call (an exact repeat always is; an "
        "entry's own bar rises above a nearby question whose answer differs); None: exact "
        "repeats only",
    )

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> HitRule:
        """A rule as an index's manifest recorded it, in any version: fields this version
        no longer has (the lexical checks of 0.1, the answered-miss route of 0.2) are left
        out, and a hit context it no longer has (0.2's ``"best"``) becomes the default.

        Examples:
            >>> HitRule.from_record({"judge": "llm", "answered_misses": True}).judge
            'llm'
            >>> HitRule.from_record({"hit_context": "best"}).hit_context is None
            True
        """
        kept = {k: v for k, v in data.items() if k in cls.model_fields}
        if kept.get("hit_context") not in (None, *HIT_CONTEXTS):
            kept["hit_context"] = None
        return cls.model_validate(kept)

    def for_model(self, has_model: bool) -> HitRule:
        """This rule as a retriever runs it: a ``judge`` left out (``None``) is the model
        judge when the retriever has a model, else the similarity alone. The one place
        every retriever (the core, both frameworks', ``cos query``, ``cos eval``) resolves
        the default, so the rule the benchmarks measured is the one a model gets.

        Examples:
            >>> HitRule().for_model(True).judge, HitRule().for_model(False).judge
            ('llm', 'score')
            >>> HitRule(judge="score").for_model(True).judge
            'score'
        """
        if self.judge is not None:
            return self
        return self.model_copy(update={"judge": "llm" if has_model else "score"})

    @property
    def context(self) -> HitContext:
        """The hit context in force (``hit_context``, or its default for the judge)."""
        if self.hit_context is not None:
            return self.hit_context
        return DEFAULT_HIT_CONTEXT if self.judge == "llm" else DEFAULT_SCORE_HIT_CONTEXT

    @property
    def routes(self) -> bool:
        """Whether the routing check applies: with the model judge."""
        return self.judge == "llm"

    def required_checks(self) -> list[str]:
        """The checks on the judge's reply that must all pass for a hit."""
        return [*GROUNDING_CHECKS, "in_source"]

    def check(
        self, reply: GroundedReply, query: str, context: str, *, sources: str = ""
    ) -> dict[str, bool]:
        """Every check on the judge's ``reply`` (no model call): ``context`` is what it
        read, ``sources`` the full text of its documents (``in_source``: the quote copies
        the source as well, the answer in its words there). :meth:`failed` says which
        required ones did not pass.

        Examples:
            >>> reply = GroundedReply("Kawann Short", "Kawann Short led the team in sacks")
            >>> src = "Pro Bowl tackle Kawann Short led the team in sacks."
            >>> checks = HitRule(judge="llm").check(reply, "Who led the Panthers in sacks?",
            ...     src, sources=src)
            >>> checks["quoted"], checks["in_source"]
            (True, True)
        """
        checks = grounding_checks(reply, query, context)
        span = quote_span(reply.quote or "", sources) if checks["quoted"] else None
        checks["in_source"] = span is not None and tokens_in(reply.answer or "", span)
        return checks

    def failed(self, checks: dict[str, bool]) -> list[str]:
        """The required checks that ``checks`` did not pass (empty: a hit)."""
        return [name for name in self.required_checks() if not checks.get(name)]

    def with_options(self, **options: Any) -> HitRule:
        """This rule with the options that are not ``None`` changed (a CLI's or a legacy
        keyword's way in: an option left out keeps the rule's value).

        Examples:
            >>> HitRule().with_options(judge="llm", threshold=None).judge
            'llm'
        """
        given = {k: v for k, v in options.items() if v is not None}
        return self.model_validate({**self.model_dump(), **given}) if given else self


# ---------------------------------------------------------------- the grounded reply

# The judge's and a refine job's reply: the quote first (the model copies its evidence,
# then answers from it), then the answer. llama.cpp's server and OpenAI both take it.
GROUNDED_SCHEMA: dict = {
    "name": "grounded_answer",
    "schema": {
        "type": "object",
        "properties": {"quote": {"type": "string"}, "answer": {"type": "string"}},
        "required": ["quote", "answer"],
        "additionalProperties": False,
    },
}

# the checks a grounded reply must pass, in the order they are read
GROUNDING_CHECKS: tuple[str, ...] = ("answered", "quoted", "in_quote", "not_echo")


class GroundedReply:
    """A model's answer and the verbatim quote it gives for it (``error``: why the reply
    could not be read; then both are ``None``).

    Examples:
        >>> GroundedReply("1990", "It was founded in 1990.").answered
        True
        >>> GroundedReply("I don't know", "").answered
        False
    """

    __slots__ = ("answer", "quote", "error")

    def __init__(self, answer: str | None, quote: str | None, error: str | None = None) -> None:
        self.answer = answer.strip() if answer else None
        self.quote = quote.strip() if quote else None
        self.error = error

    @property
    def answered(self) -> bool:
        """Whether the model gave an answer: the structured reply says so with a quote and
        an answer (the prompt asks for an empty pair when the text does not answer), in any
        language; no phrase list."""
        return bool(self.answer) and bool(self.quote) and not said_nothing(self.answer)

    def __repr__(self) -> str:
        if self.error:
            return f"GroundedReply(error={self.error!r})"
        return f"GroundedReply({self.answer!r}, {self.quote!r})"


def parse_grounded(text: str) -> GroundedReply:
    """The reply of a :data:`GROUNDED_SCHEMA` call: its ``answer`` and ``quote``; a reply
    that is not that JSON object (a code fence around it is fine) has ``error`` set.

    Examples:
        >>> parse_grounded('{"quote": "Rent is due on the 1st.", "answer": "the 1st"}')
        GroundedReply('the 1st', 'Rent is due on the 1st.')
        >>> parse_grounded("The 1st.").error
        'not the JSON object of the schema'
    """
    body = text.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", body, re.S)
    if fenced:
        body = fenced.group(1).strip()
    try:
        value = json.loads(body)
    except json.JSONDecodeError:
        return GroundedReply(None, None, "not the JSON object of the schema")
    if not isinstance(value, dict) or not isinstance(value.get("answer", ""), str):
        return GroundedReply(None, None, "not the JSON object of the schema")
    quote = value.get("quote", "")
    return GroundedReply(value.get("answer"), quote if isinstance(quote, str) else None)


def grounding_checks(reply: GroundedReply, question: str, context: str) -> dict[str, bool]:
    """The grounding of a reply to ``question`` from ``context``: ``answered`` (an answer,
    not "I don't know"), ``quoted`` (the quote copies words of the context,
    :func:`~cos_integrations.text.quote_span`: in order, a word changed or added at most in
    five), ``in_quote`` (every token of the answer is in the context's words the quote
    copies; digits as digits) and ``not_echo`` (the answer is not made only of the
    question's words, :func:`echoes_question`).

    Examples:
        >>> ctx = "Der Rhein fließt durch Köln. Auf Niederländisch heißt er Rijn."
        >>> q = "Wie heißt der Rhein auf Niederländisch?"
        >>> grounding_checks(GroundedReply("Rijn", "Auf Niederländisch heißt er Rijn"), q, ctx)
        {'answered': True, 'quoted': True, 'in_quote': True, 'not_echo': True}
        >>> grounding_checks(GroundedReply("Rhein", "Der Rhein fließt durch Köln"), q, ctx)
        {'answered': True, 'quoted': True, 'in_quote': True, 'not_echo': False}
    """
    answered = reply.answered
    span = quote_span(reply.quote or "", context) if answered else None
    return {
        "answered": answered,
        "quoted": span is not None,
        "in_quote": span is not None and tokens_in(reply.answer or "", span),
        "not_echo": answered and not echoes_question(reply.answer, question),
    }


# ---------------------------------------------------------------- evidence


def said_nothing(answer: str | None) -> bool:
    """True for no answer: none, blank, or the answer prompts' own word for "the text does
    not say" (:data:`~cos_integrations.summarize.prompts.UNKNOWN_ANSWER`), compared as
    :func:`~cos_integrations.text.normalize_text` writes it. A model's other ways of saying
    so, in any language, are not in any text it read, so nothing takes them for an answer.

    Examples:
        >>> said_nothing(None), said_nothing(" "), said_nothing("I don't know.")
        (True, True, True)
        >>> said_nothing("Ich weiß es nicht"), said_nothing("the 1st")
        (False, False)
    """
    return not answer or not answer.strip() or normalize_text(answer) == _UNKNOWN


def is_grounded(answer: str | None, context: str) -> bool:
    """True when ``answer`` is given and its tokens are in ``context``: every token with a
    digit, and at least half of the others (:func:`~cos_integrations.text.tokens_in`), in
    any language. For text that is not a quote: a gold answer in a source, a model-written
    fact. Digits compare with digits: "4" is not grounded by "four".

    Examples:
        >>> is_grounded("four", "Josh Norman had four interceptions."), is_grounded("4", "four")
        (True, False)
    """
    if said_nothing(answer):
        return False
    return tokens_in(answer, context, share=0.5)


def answers_agree(answer: str | None, others: Sequence[str], *, min_f1: float = 0.5) -> bool:
    """True when ``answer`` says what one of ``others`` says: the same tokens with digits,
    and token F1 (:func:`~cos_integrations.text.text_tokens`) at least ``min_f1``.

    Examples:
        >>> answers_agree("4", ["4 interceptions"]), answers_agree("17", ["4 interceptions"])
        (True, False)
    """
    if said_nothing(answer):
        return False
    mine = text_tokens(answer)
    for other in others:
        theirs = text_tokens(other)
        if _digits(mine) == _digits(theirs) and _token_f1(mine, theirs) >= min_f1:
            return True
    return False


def _digits(tokens: list[str]) -> set[str]:
    return {t for t in tokens if any(c.isdigit() for c in t)}


def _token_f1(a: list[str], b: list[str]) -> float:
    from collections import Counter

    same = sum((Counter(a) & Counter(b)).values())
    if not same:
        return 0.0
    precision, recall = same / len(a), same / len(b)
    return 2 * precision * recall / (precision + recall)


def echoes_question(answer: str | None, question: str) -> bool:
    """True when every token of the answer is already in the question: a small model that
    finds nothing answers with the question's own subject ("Who presented the mace to the
    Scottish Parliament?" -> "Scottish Parliament"; asked for a river's Dutch name, the
    river's own), which is always "in" the context too. Any language, no word list.

    Examples:
        >>> echoes_question("the Parliament", "Who gave the mace to the Parliament?")
        True
        >>> echoes_question("the Queen", "Who gave the mace to the Parliament?")
        False
    """
    tokens = text_tokens(answer or "")
    if not tokens:
        return False
    asked = set(text_tokens(question))
    return all(t in asked for t in tokens)


def supporting_sentence(answer: str | None, question: str, context: str) -> str | None:
    """The sentence of ``context`` that holds ``answer`` (:func:`is_grounded`) and shares
    the most tokens with ``question`` (the first on a tie), or ``None``: where a
    ``cos-extract`` round finds the sentence it appends when it has no quote.

    Examples:
        >>> ctx = "The Panthers lost. Kawann Short led the Panthers in sacks."
        >>> supporting_sentence("Kawann Short", "Who led the Panthers in sacks?", ctx)
        'Kawann Short led the Panthers in sacks.'
    """
    if not is_grounded(answer, context):
        return None
    asked = set(text_tokens(question))
    best: tuple[int, str] | None = None
    for sentence in split_sentences(context):
        if not is_grounded(answer, sentence):
            continue
        shared = len(asked & set(text_tokens(sentence)))
        if best is None or shared > best[0]:
            best = (shared, sentence)
    return best[1] if best else None


def quoted_sentences(quote: str, text: str) -> list[str]:
    """The whole sentences of ``text`` that a quote from it covers (a quote may start or
    end inside a sentence, or span two), in text order; empty when the quote is not in the
    text. What a refinement appends to a summary: the source's own sentences.

    Examples:
        >>> src = "The flat is small. Rent is due on the 1st. Pets are allowed."
        >>> quoted_sentences("due on the 1st. Pets", src)
        ['Rent is due on the 1st.', 'Pets are allowed.']
        >>> quoted_sentences("due on the 2nd", src)
        []
    """
    want = text_tokens(quote)
    sentences = split_sentences(text)
    if not want or not sentences:
        return []
    tokens: list[str] = []
    owner: list[int] = []
    for i, s in enumerate(sentences):
        mine = text_tokens(s)
        tokens += mine
        owner += [i] * len(mine)
    n = len(want)
    for start in range(len(tokens) - n + 1):
        if tokens[start : start + n] == want:
            return [sentences[i] for i in sorted(set(owner[start : start + n]))]
    return []


def sentence_windows(
    sentences: Sequence[Sequence[str]], *, size: int = 2
) -> list[tuple[int, int, int]]:
    """Every window of up to ``size`` consecutive sentences of each text (given as its
    sentences), as ``(text, first sentence, end)``; a text shorter than ``size`` is one
    window: what a ``"focused"`` hit context ranks by the embedding, so that an answer told
    over two sentences, or a pronoun's sentence with its name's, is read whole.

    Examples:
        >>> sentence_windows([["A b.", "C d.", "E f."], ["G h."]])
        [(0, 0, 2), (0, 1, 3), (1, 0, 1)]
    """
    out: list[tuple[int, int, int]] = []
    for t, sents in enumerate(sentences):
        count = len(sents)
        if count:
            out += [(t, i, min(i + size, count)) for i in range(max(1, count - size + 1))]
    return out


def choose_windows(
    windows: Sequence[tuple[int, int, int]], scores: Sequence[float], *, limit: int
) -> set[tuple[int, int]]:
    """The ``(text, sentence)`` pairs of the best-scoring windows, best first, while they
    fit ``limit`` sentences (a window adding none is skipped; one that does not fit whole
    ends the choice, unless nothing is chosen yet).

    Examples:
        >>> sorted(choose_windows([(0, 0, 2), (0, 1, 3), (1, 0, 1)], [0.5, 0.9, 0.7], limit=3))
        [(0, 1), (0, 2), (1, 0)]
    """
    chosen: set[tuple[int, int]] = set()
    for w in sorted(range(len(windows)), key=lambda w: -scores[w]):
        t, start, end = windows[w]
        new = {(t, i) for i in range(start, end)} - chosen
        if not new:
            continue
        if chosen and len(chosen) + len(new) > limit:
            break
        chosen |= new
        if len(chosen) >= limit:
            break
    return chosen
