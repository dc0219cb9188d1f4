"""Streams of asks where questions come back: the traffic a cache exists for.

A stream mixes new questions (the data set's, in order), exact repeats of questions asked
before and rewordings of them (by default 40 / 20 / 40); the question that comes back is
drawn by Zipf popularity (a few questions come back often, most seldom, as in published
query logs). Rewordings come from a :class:`RewordingBook`: the data's own where it has
them, else model-written once (several a question, in the question's language) and kept
in a JSONL file, so every row of an evaluation, and every later run, sees the same stream.

Examples:
    >>> qa = EvalQA(question="When is rent due?", answers=["the 1st"])
    >>> doc = EvalDoc(doc_id="lease", text="Rent is due on the 1st.", qas=[qa])
    >>> book = RewordingBook(None)
    >>> book.add("When is rent due?", ["On which day is rent due?"])
    >>> asks = build_stream([doc], asks=3, book=book, mix=(0.0, 0.0, 1.0), seed=1)
    >>> [a.kind for a in asks], asks[2].question
    (['new', 'reworded', 'exact'], 'When is rent due?')
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from cos_integrations.model import ChatModel
from cos_integrations.research.datasets import EvalDoc, EvalQA
from cos_integrations.research.jsonl import append_jsonl, read_jsonl
from cos_integrations.storage.answers import question_key

__all__ = [
    "ASK_KINDS",
    "DEFAULT_MIX",
    "REWORDINGS",
    "REWORD_PROMPT",
    "Ask",
    "RewordingBook",
    "build_stream",
    "parse_mix",
]

ASK_KINDS = ("new", "exact", "reworded")
# new questions, exact repeats, rewordings of earlier ones (issue 56: 40/20/40; a fifth of
# production LLM queries are exact repeats and a further third to half near-duplicates)
DEFAULT_MIX = (0.4, 0.2, 0.4)
# rewordings a question gets from the model, in one call
REWORDINGS = 3
# Zipf exponent of how often an asked question comes back (query logs: about 1)
ZIPF = 1.0

# The rewording writer (the model under test, temperature 0): several ways a second user
# would ask the same question, in its language.
REWORD_PROMPT = (
    "Write {n} different ways another person could ask this same question. Keep its "
    "language ({language}), its meaning and exactly what it asks for; change the wording "
    'and the word order; add nothing. Reply with JSON: {{"questions": [...]}}.\n\n'
    "Question: {question}"
)
_REWORD_SCHEMA = {
    "name": "rewordings",
    "schema": {
        "type": "object",
        "properties": {"questions": {"type": "array", "items": {"type": "string"}, "maxItems": 8}},
        "required": ["questions"],
        "additionalProperties": False,
    },
}
_LANGUAGES = {"en": "English", "de": "German", "es": "Spanish", "zh": "Chinese", "th": "Thai"}


@dataclass
class Ask:
    """One ask of a stream: its ``kind`` (new, exact, reworded), the text asked, the gold
    answers and language of the data set question it stands for (``source``: that
    question's text; ``doc_id``: its document)."""

    position: int
    kind: str
    question: str
    answers: list[str]
    language: str
    doc_id: str
    source: str

    @property
    def qa(self) -> EvalQA:
        return EvalQA(question=self.question, answers=self.answers, language=self.language)


class RewordingBook:
    """Rewordings of questions, by question text; kept in a JSONL file (``path``; ``None``:
    in memory) one line a question, read back by later runs.

    Examples:
        >>> book = RewordingBook(None)
        >>> book.add("When is rent due?", ["On which day is rent due?", "When is rent due?"])
        >>> book.get("When is rent due?")
        ['On which day is rent due?']
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.book: dict[str, list[str]] = {}
        for row in read_jsonl(path) if path else []:
            self.book[row["question"]] = list(row["rewordings"])

    def get(self, question: str) -> list[str] | None:
        return self.book.get(question)

    def add(self, question: str, rewordings: Sequence[str]) -> None:
        """Keep ``rewordings`` of ``question`` (blank ones, repeats, and the question
        itself by its key, dropped)."""
        seen = {question_key(question)}
        kept = []
        for r in rewordings:
            r = " ".join(str(r).split())
            if r and question_key(r) not in seen:
                seen.add(question_key(r))
                kept.append(r)
        self.book[question] = kept
        if self.path:
            append_jsonl(self.path, {"question": question, "rewordings": kept})

    async def write(self, llm: ChatModel, qa: EvalQA, n: int = REWORDINGS) -> list[str]:
        """The rewordings of ``qa``: the book's, else ``n`` the model writes (one call,
        kept). A reply that is not the JSON asked for keeps none."""
        known = self.get(qa.question)
        if known is not None:
            return known
        language = _LANGUAGES.get(qa.language.split("-")[0], qa.language)
        prompt = REWORD_PROMPT.format(n=n, language=language, question=qa.question)
        res = await llm.chat(
            [{"role": "user", "content": prompt}], max_tokens=60 * n, json_schema=_REWORD_SCHEMA
        )
        try:
            said = json.loads(res.text)["questions"]
        except (ValueError, KeyError, TypeError):
            said = []
        self.add(qa.question, [s for s in said if isinstance(s, str)][:n])
        return self.book[qa.question]


def parse_mix(text: str) -> tuple[float, float, float]:
    """``"40/20/40"`` (new / exact / reworded, any scale) as shares summing to 1.

    Examples:
        >>> parse_mix("40/20/40")
        (0.4, 0.2, 0.4)
    """
    try:
        parts = [float(p) for p in text.replace(",", "/").split("/")]
    except ValueError:
        parts = []
    if len(parts) != 3 or any(p < 0 for p in parts) or sum(parts) <= 0:
        raise ValueError(f"--mix takes new/exact/reworded shares such as 40/20/40, not {text!r}")
    total = sum(parts)
    return (parts[0] / total, parts[1] / total, parts[2] / total)


def build_stream(
    docs: Sequence[EvalDoc],
    *,
    asks: int,
    book: RewordingBook,
    mix: tuple[float, float, float] = DEFAULT_MIX,
    seed: int = 0,
    zipf: float = ZIPF,
) -> list[Ask]:
    """A stream of ``asks`` over the questions of ``docs`` (see the module docstring).

    New questions are taken in turn from the documents (round robin, each document's in
    its order), so the stream's early part already spans many documents. A question that
    comes back is drawn among those asked so far with weight ``1 / rank ** zipf`` (ranks a
    fixed shuffle of every question); a rewording is the next unused one in ``book`` of a
    question drawn among those with one left (none left anywhere: an exact repeat). The
    first ask is new; when the new questions run out, one comes back instead. The same
    arguments give the same stream."""
    rng = random.Random(seed)
    queue = _round_robin(docs)
    ranks = list(range(1, len(queue) + 1))
    rng.shuffle(ranks)
    weight = {id(qa): 1.0 / rank**zipf for (_, qa), rank in zip(queue, ranks, strict=True)}
    asked: list[tuple[EvalDoc, EvalQA]] = []
    used: dict[str, int] = {}
    out: list[Ask] = []
    fresh = iter(queue)
    left = len(queue)
    for position in range(asks):
        kind = rng.choices(ASK_KINDS, weights=mix)[0]
        if not asked:
            kind = "new"
        elif kind == "new" and not left:  # the new questions ran out: one comes back
            kind = rng.choices(ASK_KINDS[1:], weights=mix[1:] if sum(mix[1:]) else None)[0]
        if kind == "new":
            if not left:
                break
            doc, qa = next(fresh)
            left -= 1
            asked.append((doc, qa))
            out.append(_ask(position, "new", qa.question, doc, qa))
            continue
        pool = asked
        if kind == "reworded":  # among the questions with a rewording left
            pool = [
                p for p in asked if used.get(p[1].question, 0) < len(book.get(p[1].question) or [])
            ]
            if not pool:
                kind, pool = "exact", asked
        doc, qa = rng.choices(pool, weights=[weight[id(q)] for _, q in pool])[0]
        text = qa.question
        if kind == "reworded":
            n = used.get(qa.question, 0)
            used[qa.question] = n + 1
            text = (book.get(qa.question) or [])[n]
        out.append(_ask(position, kind, text, doc, qa))
    return out


def _ask(position: int, kind: str, text: str, doc: EvalDoc, qa: EvalQA) -> Ask:
    return Ask(position, kind, text, list(qa.answers), qa.language, doc.doc_id, qa.question)


def _round_robin(docs: Sequence[EvalDoc]) -> list[tuple[EvalDoc, EvalQA]]:
    out = []
    width = max((len(d.qas) for d in docs), default=0)
    for i in range(width):
        out += [(d, d.qas[i]) for d in docs if i < len(d.qas)]
    return out


def stream_record(ask: Ask) -> dict:
    """An ask as a JSON-able record (what the stream file keeps)."""
    return asdict(ask)
