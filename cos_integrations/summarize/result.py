"""What a summarisation run returns: the chosen summary and the full record of how."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from cos_integrations.summarize.questions import QAPair
from cos_integrations.usage import Usage

__all__ = ["CoSResult", "IterationRecord", "QuestionScore"]

IterationKind = Literal["thesis", "rewrite", "merge", "density", "mini", "zero-shot"]


class QuestionScore(BaseModel):
    """How one question fared against one summary.

    Examples:
        >>> QuestionScore(question="When is rent due?", split="val", answer="the 1st",
        ...               f1=1.0, answered=True).f1
        1.0
    """

    question: str
    split: Literal["train", "val"] | None
    answer: str | None
    f1: float
    answered: bool


class IterationRecord(BaseModel):
    """One summary the run produced, with its scores (``None`` when it was not evaluated).

    Examples:
        >>> it = IterationRecord(index=0, kind="zero-shot", summary="Rent is due on the 1st.")
        >>> it.kind, it.val_score, it.accepted
        ('zero-shot', None, True)
    """

    index: int
    kind: IterationKind
    summary: str
    train_score: float | None = None
    val_score: float | None = None
    questions_used: list[str] = Field(default_factory=list)
    scores: list[QuestionScore] = Field(default_factory=list)
    accepted: bool = True
    failed: bool = False
    raw_output: str | None = None
    missing_entities: list[str] = Field(default_factory=list)


class CoSResult(BaseModel):
    """The outcome of summarising one document.

    ``summary`` is the chosen iteration's text (the best validation score; ties go to the
    shorter summary). Every other iteration stays in ``iterations`` for inspection.
    Round-trips through JSON:

    Examples:
        >>> r = CoSResult(summary="s", best_iteration=0, strategy="zero-shot")
        >>> CoSResult.model_validate_json(r.model_dump_json()) == r
        True
    """

    doc_id: str | None = None
    strategy: str
    summary: str
    best_iteration: int
    iterations: list[IterationRecord] = Field(default_factory=list)
    questions: list[QAPair] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    # the same, by call type: thesis, restate, questions, answers, rewrite, merge, ...
    usage_by_task: dict[str, Usage] = Field(default_factory=dict)
    source_tokens: int = 0
    summary_tokens: int = 0
    config_hash: str = ""
    stop_reason: str = ""
    sections: list[CoSResult] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)

    @property
    def best(self) -> IterationRecord | None:
        """The chosen iteration's record."""
        return next((it for it in self.iterations if it.index == self.best_iteration), None)

    @property
    def val_score(self) -> float | None:
        """Validation score of the chosen summary."""
        best = self.best
        return best.val_score if best else None
