"""cos-integrations: Chain of Summaries, framework-neutral core.

The names below load on first use (PEP 562), so tools that only need a corner of the
package (``cos --help``, the store) do not pay for the model client's imports.

Example:
    >>> from cos_integrations import ChainOfSummaries, CoSConfig, OpenAIChatModel
    >>> CoSConfig.paper().iterations
    10
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .version import __version__ as __version__

# public name -> the module that defines it
_EXPORTS = {
    "BackgroundRefiner": "refine",
    "ChainOfSummaries": "engine",
    "ChatModel": "model",
    "ChatResult": "model",
    "CoSConfig": "config",
    "CoSError": "errors",
    "CoSIndex": "index",
    "CoSModelError": "errors",
    "CoSOutputError": "errors",
    "CoSResult": "result",
    "FallbackRetriever": "retrieval",
    "HitRule": "hit_rule",
    "IngestReport": "index",
    "IterationRecord": "result",
    "OpenAIChatModel": "model",
    "PRESETS": "config",
    "PROMPT_VERSION": "prompts",
    "QAPair": "questions",
    "QuestionScore": "result",
    "RefineOutcome": "refine",
    "Refiner": "refine",
    "RetrievalResult": "retrieval",
    "SearchHit": "index",
    "Usage": "usage",
    "exact_match": "metrics",
    "normalize_answer": "metrics",
    "read_manifest": "index",
    "rouge_l": "metrics",
    "run_sync": "sync",
    "squad_f1": "metrics",
}

__all__ = [
    "BackgroundRefiner",
    "ChainOfSummaries",
    "ChatModel",
    "ChatResult",
    "CoSConfig",
    "CoSError",
    "CoSIndex",
    "CoSModelError",
    "CoSOutputError",
    "CoSResult",
    "FallbackRetriever",
    "HitRule",
    "IngestReport",
    "IterationRecord",
    "OpenAIChatModel",
    "PRESETS",
    "PROMPT_VERSION",
    "QAPair",
    "QuestionScore",
    "RefineOutcome",
    "Refiner",
    "RetrievalResult",
    "SearchHit",
    "Usage",
    "exact_match",
    "normalize_answer",
    "read_manifest",
    "rouge_l",
    "run_sync",
    "squad_f1",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # the next access is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


if TYPE_CHECKING:  # static checkers and IDEs see the real names
    from .config import PRESETS, CoSConfig
    from .engine import ChainOfSummaries
    from .errors import CoSError, CoSModelError, CoSOutputError
    from .hit_rule import HitRule
    from .index import CoSIndex, IngestReport, SearchHit, read_manifest
    from .metrics import exact_match, normalize_answer, rouge_l, squad_f1
    from .model import ChatModel, ChatResult, OpenAIChatModel
    from .prompts import PROMPT_VERSION
    from .questions import QAPair
    from .refine import BackgroundRefiner, RefineOutcome, Refiner
    from .result import CoSResult, IterationRecord, QuestionScore
    from .retrieval import FallbackRetriever, RetrievalResult
    from .sync import run_sync
    from .usage import Usage
