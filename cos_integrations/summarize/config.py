"""Configuration of the Chain of Summaries engine.

Every field changes what the engine produces, so every field is part of
:meth:`CoSConfig.config_hash` (the cache key of a summary). Clients, secrets, timeouts and
worker counts are deliberately *not* here.

Examples:
    >>> cfg = CoSConfig.paper()
    >>> (cfg.iterations, cfg.questions_per_iteration, cfg.train_questions, cfg.val_questions)
    (10, 1, 10, 5)
    >>> CoSConfig(focus=["deadlines", "money"]).config_hash() != cfg.config_hash()
    True
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cos_integrations.defaults import (
    DEFAULT_PRESET,
    PRESET_NAMES,
    TIERED_SUMMARY_WORDS,
    Strategy,
)
from cos_integrations.summarize.prompts import PROMPT_VERSION

__all__ = ["CoSConfig", "Strategy", "PRESETS", "LOOP_SUMMARY_WORDS"]

# the summary budget of the presets that run the Chain of Summaries loop at ingest
LOOP_SUMMARY_WORDS = 200


class CoSConfig(BaseModel):
    """Hyperparameters of one summarisation run (paper §3, Appendix C).

    ``CoSConfig()`` is what ships (the ``"tiered"`` preset): a zero-shot summary of at
    most 120 words at ingest, one call a document; the question bank and rounds fields
    are those of the Chain of Summaries rounds that run later, where traffic is
    (``cos refine --deepen``). To run the loop at ingest, take the ``"cos"`` preset
    (:meth:`cos`) or set ``strategy="cos"``.

    Examples:
        >>> from cos_integrations import CoSConfig
        >>> CoSConfig().strategy, CoSConfig().max_summary_words
        ('zero-shot', 120)
        >>> CoSConfig.cos(iterations=5).strategy
        'cos'
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    strategy: Strategy = Field(
        "zero-shot",
        description='how a summary is made at ingest ("zero-shot": one call; "cos": the '
        "Chain of Summaries loop)",
    )
    iterations: int = Field(3, ge=0, le=50, description="i: refinement rounds")
    questions_per_iteration: int = Field(
        2, ge=1, le=50, description="iq: unanswered questions used per rewrite"
    )
    train_questions: int = Field(6, ge=0, le=100, description="synthetic refinement questions")
    val_questions: int = Field(4, ge=0, le=100, description="synthetic validation questions")
    f1_threshold: float = Field(0.5, ge=0.0, le=1.0, description="token F1 that counts as answered")
    patience: int = Field(2, ge=1, description="rounds without validation gain before stopping")
    max_summary_words: int = Field(
        TIERED_SUMMARY_WORDS, ge=10, description="length budget of a summary"
    )
    density_rounds: int = Field(5, ge=1, le=20, description="rounds of the density strategy")
    mini_questions: int = Field(5, ge=1, le=20, description="tricky questions in the mini strategy")
    focus: tuple[str, ...] = Field((), description="topics that steer question generation")
    human_questions: Literal["replace", "add"] = Field(
        "replace", description="human questions replace synthetic ones, or are added to them"
    )
    context_tokens: int = Field(
        8192, ge=512, description="model context; longer documents are split into sections"
    )
    max_output_tokens: int = Field(768, ge=32)
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    seed: int = Field(0, description="seeds the train/validation split of the question bank")
    parse_retries: int = Field(1, ge=0, le=5, description="re-asks after unparseable output")
    prompt_version: str = PROMPT_VERSION

    @model_validator(mode="before")
    @classmethod
    def _focus_as_tuple(cls, data: object) -> object:
        if isinstance(data, dict) and isinstance(data.get("focus"), (list, str)):
            focus = data["focus"]
            data = {**data, "focus": (focus,) if isinstance(focus, str) else tuple(focus)}
        return data

    @model_validator(mode="after")
    def _room_for_a_document(self) -> CoSConfig:
        if self.context_tokens < self.max_output_tokens + 1024:
            raise ValueError(
                "context_tokens must leave at least 1024 tokens beside max_output_tokens "
                f"(got context_tokens={self.context_tokens}, "
                f"max_output_tokens={self.max_output_tokens})"
            )
        return self

    @classmethod
    def cos(cls, **overrides: object) -> CoSConfig:
        """The Chain of Summaries loop at ingest (preset ``"cos"``): 3 rounds of 2
        questions, 6+4 questions, 200 words (about 8 calls a document on the 1.5B model)."""
        base = {"strategy": "cos", "max_summary_words": LOOP_SUMMARY_WORDS}
        return cls(**{**base, **overrides})

    @classmethod
    def paper(cls, **overrides: object) -> CoSConfig:
        """The paper's best setting of the loop: i=10 iterations, iq=1 question each, 10+5
        questions (preset ``"paper"``)."""
        base = dict(iterations=10, questions_per_iteration=1, train_questions=10, val_questions=5)
        return cls.cos(**{**base, **overrides})

    @classmethod
    def fast(cls, **overrides: object) -> CoSConfig:
        """Fewer rounds of the loop, for small local models (preset ``"cos-fast"``): 2
        rounds of 2 questions, 4+3 questions."""
        base = dict(iterations=2, questions_per_iteration=2, train_questions=4, val_questions=3)
        return cls.cos(**{**base, **overrides})

    @classmethod
    def tiered(cls, **overrides: object) -> CoSConfig:
        """The tiered mode, what ships (preset ``"tiered"``, the same as ``CoSConfig()``): a
        zero-shot summary at ingest (one call a document); the Chain of Summaries rounds
        run later, where traffic is (``cos refine --deepen``,
        :meth:`Refiner.adeepen <cos_integrations.serving.refine.Refiner.adeepen>`), with this
        config's question bank and rounds."""
        return cls(**overrides)

    @classmethod
    def shipped(cls, **overrides: object) -> CoSConfig:
        """What ``cos ingest``, both frameworks' transforms and a new :class:`CoSIndex`
        summarise with: the preset ``DEFAULT_PRESET`` names (chosen by measurement; see
        :mod:`cos_integrations.defaults`)."""
        return cls.preset(DEFAULT_PRESET, **overrides)

    @classmethod
    def preset(cls, name: str, **overrides: object) -> CoSConfig:
        """A named preset: ``tiered`` (what ships), ``cos``, ``cos-fast`` or ``paper`` (0.2's
        ``default`` is ``cos``, its ``fast`` is ``cos-fast``).

        Examples:
            >>> CoSConfig.preset("cos-fast").iterations
            2
        """
        try:
            return PRESETS[name](**overrides)
        except KeyError:
            raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}") from None

    def config_hash(self) -> str:
        """A short stable hash of everything that changes the output (prompt version too)."""
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


PRESETS = dict(
    zip(
        PRESET_NAMES,
        (CoSConfig.tiered, CoSConfig.cos, CoSConfig.fast, CoSConfig.paper),
        strict=True,
    )
)
