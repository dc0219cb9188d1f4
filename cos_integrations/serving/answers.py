"""The verified-answer layer: answers checked against the source, served again without a
model call.

The cheapest layer of the cache, in front of the summaries: an exact repeat of a question
(:func:`~cos_integrations.storage.answers.question_key`, any language) or a question close
enough to one already answered gets that answer back, with the source sentence it was
verified on as what was retrieved, and its citation. An entry is made whenever the
product holds an answer grounded in the source (:meth:`VerifiedAnswers.remember`): the
answer must be in a sentence of the document's current text (:func:`source_quote`). The
store keeps the entries (never served for a text they were not verified on); the index
keeps their questions' vectors.

A reworded question is served the closest entry only, and with no model call only from
that entry's bar on: the index's default (``HitRule.answer_similarity``), raised above the
similarity of any other verified question whose answer differs (:meth:`remember` learns it
from the traffic), and above any reworded question a check found asking something else.
From ``defaults.ANSWER_CHECK_SIMILARITY`` on but under the bar, the question goes the
usual way, and the answer it gets from the source teaches the entry: another answer raises
its bar above that similarity. Two questions on the same passage that share most of their
words but ask different things ("What team did Rivera play for?", "What position did
Rivera play?": 0.99 apart in e5) so do not get each other's answer.

Examples:
    >>> answers = VerifiedAnswers(index)                                   # doctest: +SKIP
    >>> answers.remember("When is rent due?", "the 5th", "miss", doc_id="lease",
    ...                  text="Rent is due on the 5th. Pets are allowed.")  # doctest: +SKIP
    >>> answers.exact("when is rent due").answer                           # doctest: +SKIP
    'the 5th'
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from cos_integrations.serving.hit_rule import (
    answers_agree,
    quoted_sentences,
    supporting_sentence,
)
from cos_integrations.serving.index import CoSIndex, SearchHit
from cos_integrations.storage.answers import REPEAT, AnswerEntry, question_key
from cos_integrations.text import normalize_text, text_tokens

__all__ = [
    "VerifiedAnswers",
    "source_quote",
    "best_source",
    "entry_item",
    "question_numbers",
    "NEIGHBOUR_MARGIN",
]

log = logging.getLogger(__name__)

# How far above a disagreeing neighbour's similarity an entry's bar rises: a reworded
# question must be closer to the entry than the other verified question is.
NEIGHBOUR_MARGIN = 0.005
# how many verified questions near a new one are compared with it
NEIGHBOURS = 8


def question_numbers(text: str) -> set[str]:
    """The tokens of ``text`` that hold a digit (a year, an item, a count).

    Examples:
        >>> sorted(question_numbers("Who won in 2010 and in 2,014?"))
        ['014', '2', '2010']
    """
    return {t for t in text_tokens(text) if any(c.isdigit() for c in t)}


def source_quote(
    answer: str | None, question: str, text: str, *, quote: str | None = None
) -> str | None:
    """The sentence of ``text`` (a document's source, or source chunks) that verifies
    ``answer``: of the sentences a model's ``quote`` covers, the one that holds the answer;
    else the sentence holding it that shares the most words with ``question``
    (:func:`~cos_integrations.serving.hit_rule.supporting_sentence`); ``None`` when no
    sentence holds it.

    Examples:
        >>> src = "The flat is small. Rent is due on the 5th. Pets are allowed."
        >>> source_quote("the 5th", "When is rent due?", src)
        'Rent is due on the 5th.'
        >>> source_quote("the 9th", "When is rent due?", src) is None
        True
    """
    if quote:
        for sentence in quoted_sentences(quote, text):
            held = supporting_sentence(answer, question, sentence)
            if held is not None:
                return held
    return supporting_sentence(answer, question, text)


def best_source(
    answer: str | None, question: str, texts: Sequence[tuple[str, str]]
) -> tuple[str, str] | None:
    """Of several ``(doc_id, text)`` (a miss's chunks, best first), the document and the
    sentence that hold ``answer`` and share the most words with ``question`` (the first on
    a tie): the answer read off the passage about the question, not off any passage that
    happens to hold the same words; ``None`` when none holds it.

    Examples:
        >>> chunks = [("b", "The garden gate is red."), ("a", "The lease gate is red.")]
        >>> best_source("red", "What colour is the lease gate?", chunks)
        ('a', 'The lease gate is red.')
    """
    asked = set(text_tokens(question))
    best: tuple[int, str, str] | None = None
    for doc_id, text in texts:
        sentence = supporting_sentence(answer, question, text)
        if sentence is None:
            continue
        shared = len(asked & set(text_tokens(sentence)))
        if best is None or shared > best[0]:
            best = (shared, doc_id, sentence)
    return (best[1], best[2]) if best else None


def entry_item(entry: AnswerEntry, score: float, how: str, *, source: str, title: str) -> SearchHit:
    """A served entry as a retrieved item: the source sentence it was verified on, with
    the answer and where it came from in its metadata (``cos_kind="answer"``)."""
    meta: dict[str, Any] = {
        "doc_id": entry.doc_id,
        "source": source,
        "title": title,
        "cos_kind": "answer",
        "cos_answer": entry.answer,
        "cos_quote": entry.quote,
        "cos_entry": entry.id,
        "cos_served": how,
        "cos_origin": entry.origin,
        "cos_verified_on": entry.content_hash,
    }
    if entry.version is not None:
        meta["cos_version"] = entry.version
    return SearchHit(f"answer::{entry.id}", entry.doc_id, entry.quote, score, meta, "answer")


class VerifiedAnswers:
    """The verified answers of one index: look one up, keep a new one (see the module
    docstring).

    Examples:
        >>> answers = VerifiedAnswers(index)                    # doctest: +SKIP
        >>> found = answers.nearest(index.embedder.embed_query("When's the rent due?"),
        ...                         floor=0.9)                    # doctest: +SKIP
    """

    def __init__(self, index: CoSIndex) -> None:
        self.index = index

    def exact(self, query: str) -> AnswerEntry | None:
        """The entry of an exact repeat of ``query`` (its key), verified on the current
        text of its document."""
        key = question_key(query)
        return self.index.store.answer_for(key) if key else None

    def nearest(self, embedding: list[float], floor: float) -> tuple[AnswerEntry, float] | None:
        """The entry whose question is closest to ``embedding``, with its similarity, when
        that is at least ``floor``; else ``None``. Only the closest is considered: a
        closer entry that may not serve a question is one that may ask something else."""
        found = self.index.search_answers(embedding, 1)
        if not found or found[0][1] < floor:
            return None
        return found[0]

    @staticmethod
    def serves(entry: AnswerEntry, question: str, score: float, bar: float) -> bool:
        """Whether ``entry`` serves ``question``, ``score`` close, with no check: from its
        own bar on (at least ``bar``, the default), and only when the two name the same
        numbers (a year, an item: "in 2010" is not "in 2020", however close the rest).

        Examples:
            >>> e = AnswerEntry(1, "d", "Population in 2010?", "population in 2010", "5",
            ...                 "It had 5 people in 2010.", "miss", "h", None, "", None, 0, 0.0)
            >>> VerifiedAnswers.serves(e, "What was the population in 2010?", 0.99, 0.98)
            True
            >>> VerifiedAnswers.serves(e, "Population in 2020?", 0.99, 0.98)
            False
        """
        if score < max(bar, entry.bar or 0.0):
            return False
        return VerifiedAnswers.same_numbers(entry, question)

    @staticmethod
    def same_numbers(entry: AnswerEntry, question: str) -> bool:
        """Whether ``question`` names the numbers ``entry``'s question names (no more, no
        fewer): a question about another year or item asks something else, however close
        the rest of its words."""
        return question_numbers(question) == question_numbers(entry.question)

    def remember(
        self,
        question: str,
        answer: str | None,
        origin: str,
        *,
        doc_id: str,
        text: str,
        quote: str | None = None,
        version: int | None = None,
        bar: float,
        embedding: list[float] | None = None,
    ) -> AnswerEntry | None:
        """Keep ``answer`` to ``question`` when a sentence of ``text`` (what the answer was
        read from: ``doc_id``'s source chunks or its whole source) holds it, and that
        sentence is in ``doc_id``'s current source (:func:`source_quote`; ``quote``: the
        model's own quote, when it gave one). ``origin``: ``"miss"``, ``"refine"`` or
        ``"hit"`` (:data:`~cos_integrations.storage.answers.ANSWER_ORIGINS`). Verified
        questions near this one whose answers differ raise their bars and this one's above
        their similarity (from ``bar``, the index's default, on). Returns the entry kept, or
        ``None`` (not verified, or a stronger reading is already kept)."""
        store = self.index.store
        doc = store.get_document(doc_id)
        if doc is None or not answer:
            return None
        sentence = source_quote(answer, question, text, quote=quote)
        # verbatim in the current source (chunks are its sentences; a summary's are not)
        if sentence is None or normalize_text(sentence) not in normalize_text(doc.text):
            return None
        meta_source = doc.source or doc_id
        entry = store.put_answer(
            doc_id,
            question,
            answer,
            sentence,
            origin,
            version=version,
            citation=meta_source,
            content_hash=doc.content_hash,
        )
        if entry is None:
            return None
        emb = embedding if embedding is not None else self.index.embedder.embed_query(question)
        self._separate(entry, emb, bar)
        self.index.add_answer(entry, emb)
        log.info("verified answer %r to %r kept (%s, %s)", answer, question, origin, doc_id)
        return entry

    def read_of(self, items: Sequence[SearchHit]) -> str:
        """What ``items`` are, as a repeat records it: each item's id and the start of its
        document's content hash, in order (another chunk, or a changed text, reads
        otherwise)."""
        store = self.index.store
        parts = []
        for item in items:
            doc = store.get_document(item.doc_id)
            parts.append(f"{item.id}@{doc.content_hash[:16] if doc else '-'}")
        return " ".join(parts)

    def remember_repeat(
        self, question: str, answer: str, items: Sequence[SearchHit]
    ) -> AnswerEntry | None:
        """Keep the answer ``items`` (a miss's source chunks) gave ``question`` when no
        sentence of the source holds it (``origin="repeat"``, no quote): served again to an
        exact repeat of the question only, and only while the same question reads the same
        chunks of the same texts (:meth:`read_of`), as an exact-prompt cache would; never
        to a rewording (it is not indexed). A verified entry of the question stays."""
        if not items or not answer:
            return None
        entry = self.index.store.put_answer(
            items[0].doc_id, question, answer, "", REPEAT, citation=self.read_of(items)
        )
        if entry is not None:
            log.info("unverified answer %r to %r kept for its exact repeats", answer, question)
        return entry

    def _separate(self, entry: AnswerEntry, embedding: list[float], bar: float) -> None:
        """Raise the bars of ``entry`` and of each verified question near it whose answer
        differs above their similarity: neither is served to a question that is not
        closer to it than the other is."""
        store = self.index.store
        for other, score in self.index.search_answers(embedding, NEIGHBOURS):
            if other.id == entry.id or score < bar - NEIGHBOUR_MARGIN:
                continue
            if answers_agree(entry.answer, [other.answer]):
                continue
            raised = min(score + NEIGHBOUR_MARGIN, 1.0)
            store.raise_bar(other.id, raised)
            store.raise_bar(entry.id, raised)
