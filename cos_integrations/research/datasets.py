"""The evaluation data sets: documents with their human-written questions, one JSON
object a line (``{"doc_id", "title", "text", "qas": [{"question", "answers"}],
"language"}``), validated line by line.

Examples:
    >>> qa = EvalQA(question="When is rent due?", answers=["the 1st"])
    >>> EvalDoc(doc_id="lease", text="Rent is due on the 1st.", qas=[qa]).qas[0].language
    'en'
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from cos_integrations.research.jsonl import lines

__all__ = ["DatasetError", "EvalQA", "EvalDoc", "load_dataset"]


class DatasetError(ValueError):
    """A malformed line in an evaluation dataset (the message names the line)."""


class EvalQA(BaseModel):
    question: str
    answers: list[str] = Field(min_length=1)
    # the language its answers are scored in (its document's; metrics.normalize_answer)
    language: str = "en"


class EvalDoc(BaseModel):
    """One dataset line: ``{"doc_id", "title", "text", "qas": [{"question", "answers"}]}``."""

    doc_id: str
    title: str = ""
    text: str = Field(min_length=1)
    qas: list[EvalQA] = Field(default_factory=list)
    language: str = Field("en", description="the text's language (its answers' F1 follows it)")


def load_dataset(
    path: str | Path, *, limit: int | None = None, questions: bool = True
) -> list[EvalDoc]:
    """Read and validate a JSONL dataset; raises :class:`DatasetError` naming the bad line.
    ``questions=False`` reads distractors: documents that are indexed and never asked
    about (their ``qas``, if any, are dropped)."""
    docs: list[EvalDoc] = []
    seen: dict[str, int] = {}  # doc_id -> its line: a second one would replace it in the index
    if not Path(path).is_file():
        what = "is a directory" if Path(path).is_dir() else "no such file"
        raise DatasetError(f"{path}: {what}; --data takes a JSONL file, a document a line")
    try:
        for number, line in lines(path):
            doc = _dataset_line(path, number, line, questions)
            if doc.doc_id in seen:
                raise DatasetError(
                    f"{path}, line {number}: doc_id {doc.doc_id!r} is line "
                    f"{seen[doc.doc_id]}'s too (each document needs its own)"
                )
            seen[doc.doc_id] = number
            docs.append(doc)
            if limit and len(docs) >= limit:
                break
    except DatasetError:
        raise
    except ValueError as exc:  # not UTF-8 (lines names the line)
        raise DatasetError(str(exc)) from None
    if not docs:
        raise DatasetError(f"{path}: no documents")
    return docs


def _dataset_line(path: str | Path, number: int, line: str, questions: bool) -> EvalDoc:
    """One dataset line validated (:func:`load_dataset`), its questions in its language."""
    try:
        doc = EvalDoc.model_validate_json(line)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ()))
        raise DatasetError(f"{path}, line {number}: {where or 'line'}: {first['msg']}") from None
    if questions and not doc.qas:
        raise DatasetError(f"{path}, line {number}: qas: no question")
    if not questions:
        doc.qas = []
    for qa in doc.qas:
        qa.language = doc.language
    return doc
