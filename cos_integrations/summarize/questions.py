"""The question bank: question/answer pairs, and robust parsing of model output.

Models answer in JSON when asked for structured output, and often do not: JSON inside prose
or code fences, numbered ``Q:``/``A:`` lines, bold markers, missing answers. Every parser here
accepts all of those and raises :class:`ParseError` only when nothing usable is left.

Examples:
    >>> pairs = parse_qa_pairs("1. Q: When is rent due?\\nA: the 5th")
    >>> pairs[0].question, pairs[0].answers
    ('When is rent due?', ['the 5th'])
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from cos_integrations.metrics import normalize_answer
from cos_integrations.text import question_key

__all__ = [
    "QAPair",
    "ParseError",
    "parse_qa_pairs",
    "parse_answers",
    "parse_summary",
    "describes_document",
    "parse_density",
    "parse_mini",
    "dedupe",
    "split_bank",
]

Split = Literal["train", "val"]
Origin = Literal["synthetic", "human", "miss"]


class ParseError(ValueError):
    """Model output had nothing usable in the expected shape."""


class QAPair(BaseModel):
    """One question with its gold answers (aliases), its split and where it came from.

    Examples:
        >>> QAPair(question="When is rent due?", answers=["the 5th", "5th"]).origin
        'synthetic'
    """

    question: str
    answers: list[str] = Field(min_length=1)
    split: Split | None = None
    origin: Origin = "synthetic"

    @field_validator("question")
    @classmethod
    def _strip_question(cls, v: str) -> str:
        v = v.strip()
        if not v:
            raise ValueError("question is empty")
        return v

    @field_validator("answers")
    @classmethod
    def _strip_answers(cls, v: list[str]) -> list[str]:
        cleaned = [a.strip() for a in v if a and a.strip()]
        if not cleaned:
            raise ValueError("answers are empty")
        return cleaned

    @property
    def key(self) -> str:
        """The normalised question, used to de-duplicate."""
        return question_key(self.question)


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)


def _json_candidates(text: str) -> Iterable[Any]:
    """Every JSON value embedded in ``text`` (code fences first, then bare objects/arrays)."""
    decoder = json.JSONDecoder()
    chunks = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for chunk in chunks:
        for i, ch in enumerate(chunk):
            if ch in "{[":
                try:
                    value, _ = decoder.raw_decode(chunk, i)
                except json.JSONDecodeError:
                    continue
                yield value


def _pairs_from_json(value: Any) -> list[QAPair]:
    items = value
    if isinstance(value, dict):
        items = next(
            (value[k] for k in ("pairs", "qa_pairs", "questions", "qas", "items") if k in value),
            [value],
        )
    if not isinstance(items, list):
        return []
    pairs = []
    for item in items:
        if not isinstance(item, dict):
            continue
        q = item.get("question") or item.get("q") or item.get("Q")
        a = item.get("answer") or item.get("answers") or item.get("a") or item.get("A")
        if isinstance(a, (int, float)):
            a = str(a)
        answers = [a] if isinstance(a, str) else [str(x) for x in a or [] if x is not None]
        if isinstance(q, str) and q.strip() and any(x.strip() for x in answers):
            pairs.append(QAPair(question=q, answers=answers))
    return pairs


_MARK = r"[\s>*_#\-\d.)]*"  # bullets, numbering, bold markers before a label
_Q_LINE = re.compile(rf"^{_MARK}(?:Q(?:uestion)?\s*\d*)\s*[:.)]\**\s*(.*)$", re.I)
_A_LINE = re.compile(rf"^{_MARK}(?:A(?:nswer)?\s*\d*)\s*[:.)]\**\s*(.*)$", re.I)


def _pairs_from_lines(text: str) -> list[QAPair]:
    pairs: list[QAPair] = []
    question: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if m := _Q_LINE.match(line):
            question = m.group(1).strip(" *")
            continue
        if question and (m := _A_LINE.match(line)):
            answer = m.group(1).strip(" *")
            if question and answer:
                pairs.append(QAPair(question=question, answers=[answer]))
            question = None
    return pairs


def parse_qa_pairs(text: str) -> list[QAPair]:
    """Question/answer pairs from JSON (anywhere in the text) or ``Q:``/``A:`` lines."""
    for value in _json_candidates(text):
        pairs = _pairs_from_json(value)
        if pairs:
            return pairs
    pairs = _pairs_from_lines(text)
    if not pairs:
        raise ParseError("no question/answer pairs found")
    return pairs


def dedupe(pairs: Iterable[QAPair], seen: Iterable[str] = ()) -> list[QAPair]:
    """Drop pairs whose normalised question was already seen (first one wins)."""
    keys = set(seen)
    out = []
    for p in pairs:
        if p.key and p.key not in keys:
            keys.add(p.key)
            out.append(p)
    return out


def split_bank(
    pairs: Sequence[QAPair], *, train: int, val: int, seed: int = 0, keep_all: bool = False
) -> list[QAPair]:
    """Assign ``split`` to pairs that have none: ``val`` validation, ``train`` refinement.

    Pairs that already carry a split keep it. The order is shuffled with ``seed`` so that the
    validation set is not simply the model's first (often easiest) questions. When fewer pairs
    than asked came back (or ``keep_all``, for human questions), the sets are sized in
    proportion, keeping at least one validation question whenever there are two or more.
    """
    fixed = [p for p in pairs if p.split is not None]
    free = [p for p in pairs if p.split is None]
    random.Random(seed).shuffle(free)
    want = train + val
    if want == 0:
        return fixed
    proportional = keep_all or len(free) < want
    n_val = round(len(free) * val / want) if proportional else val
    if val and len(free) >= 2:
        n_val = max(n_val, 1)
    n_train = len(free) - n_val if keep_all else min(train, len(free) - n_val)
    out = list(fixed)
    out += [p.model_copy(update={"split": "val"}) for p in free[:n_val]]
    out += [p.model_copy(update={"split": "train"}) for p in free[n_val : n_val + n_train]]
    return out


_ANSWER_LINE = re.compile(r"^\s*(?:A(?:nswer)?\s*)?(\d+)\s*[.):\-]\s*(.*)$", re.I)


def parse_answers(text: str, count: int) -> list[str | None]:
    """Answers to ``count`` numbered questions, ``None`` where one is missing."""
    for value in _json_candidates(text):
        answers = _answers_from_json(value, count)
        if answers is not None:
            return answers
    found: dict[int, str] = {}
    for line in text.splitlines():
        if m := _ANSWER_LINE.match(line):
            idx = int(m.group(1))
            if 1 <= idx <= count and idx not in found:
                found[idx] = m.group(2).strip().strip("*").strip()
    if not found:
        if count == 1 and text.strip():
            return [text.strip()]
        raise ParseError("no numbered answers found")
    return [found.get(i) for i in range(1, count + 1)]


def _answers_from_json(value: Any, count: int) -> list[str | None] | None:
    if isinstance(value, dict) and "answers" in value:
        value = value["answers"]
    elif isinstance(value, dict) and value and all(str(k).isdigit() for k in value):
        return [_as_text(value.get(str(i))) for i in range(1, count + 1)]
    if not isinstance(value, list) or not value:
        return None
    if all(isinstance(v, dict) for v in value):
        out: list[str | None] = [None] * count
        for pos, item in enumerate(value):
            idx = item.get("id", pos + 1)
            try:
                idx = int(idx)
            except (TypeError, ValueError):
                idx = pos + 1
            if 1 <= idx <= count and out[idx - 1] is None:
                out[idx - 1] = _as_text(item.get("answer"))
        return out
    if all(isinstance(v, (str, int, float)) for v in value):
        vals = [_as_text(v) for v in value[:count]]
        return vals + [None] * (count - len(vals))
    return None


def _as_text(v: Any) -> str | None:
    if v is None:
        return None
    return str(v).strip()


_SUMMARY_PREFIX = re.compile(
    r"^\s*(?:\*\*)?\s*(?:updated|final|refined|new)?\s*(?:summary|sentences)\s*(?:\*\*)?\s*:"
    r"\s*(?:\*\*)?",
    re.I,
)
_TAGS = re.compile(r"</?summary_?>", re.I)


def parse_summary(text: str, *, draft: bool = False) -> str:
    """The summary in a rewrite reply: drafts, labels, tags and fences removed."""
    if draft and "####" in text:
        text = text.rsplit("####", 1)[1]
    stripped = text.strip()
    fenced = _FENCE.findall(stripped)
    if len(fenced) == 1 and stripped.startswith("```") and stripped.endswith("```"):
        text = fenced[0]
    text = _TAGS.sub("", text).strip()
    text = _SUMMARY_PREFIX.sub("", text, count=1).strip()
    return text


_DESCRIBES = re.compile(
    r"^\W*(?:the|this)\s+(?:\w+\s+)?(?:document|text|article|passage|paper|report|content|"
    r"file|excerpt|study|review)s?\b[^.]{0,40}?\b(?:provides?|discuss(?:es)?|describes?|"
    r"covers?|gives?|offers?|outlines?|presents?|explores?|highlights?|focus(?:es)?|is about|"
    r"contains?|summari[sz]es?|details?|explains?|deals? with|talks? about|reports?|"
    r"investigates?|examines?|analy[sz]es?|reviews?)\b",
    re.I,
)


def describes_document(summary: str) -> bool:
    """True when a summary opens by describing the document ("The document provides an
    overview of ...") instead of stating its facts: small models do that often, and such
    a summary answers almost nothing.

    >>> describes_document("The document provides a comprehensive overview of Warsaw.")
    True
    >>> describes_document("This review summarizes the techniques used to study B cells.")
    True
    >>> describes_document("The paper was founded in 1851 by Henry Raymond.")
    False
    """
    return bool(_DESCRIBES.match(summary))


_ENTITIES = re.compile(r"missing\s+entities\s*:\s*(.*)", re.I)
_SUMMARY_LABEL = re.compile(r"^\s*(?:\*\*)?\s*summary\s*(?:\*\*)?\s*:", re.I | re.M)


def parse_density(text: str) -> tuple[list[str], str]:
    """``(missing entities, summary)`` from a Chain of Density round."""
    entities: list[str] = []
    if m := _ENTITIES.search(text):
        line = m.group(1).splitlines()[0] if m.group(1) else ""
        line = line.strip().strip("[]")
        if normalize_answer(line) not in ("none", ""):
            entities = [e.strip(" \"'") for e in re.split(r"[;,]", line) if e.strip(" \"'")]
    labels = list(_SUMMARY_LABEL.finditer(text))
    summary = text[labels[-1].end() :] if labels else text
    if not labels and (m := _ENTITIES.search(summary)):
        summary = summary[m.end() :]
    return entities, parse_summary(summary)


_FINAL = re.compile(r"final\s+summary\s*(?:\*\*)?\s*:", re.I)


def parse_mini(text: str) -> str:
    """The final summary of a mini-CoS reply (the whole reply if it has no label)."""
    parts = _FINAL.split(text)
    return parse_summary(parts[-1])
