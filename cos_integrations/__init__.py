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

__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS = {
    "ChainOfSummaries": "engine",
    "ChatModel": "model",
    "ChatResult": "model",
    "CoSConfig": "config",
    "CoSError": "errors",
    "CoSModelError": "errors",
    "CoSOutputError": "errors",
    "CoSResult": "result",
    "IterationRecord": "result",
    "OpenAIChatModel": "model",
    "PRESETS": "config",
    "PROMPT_VERSION": "prompts",
    "QAPair": "questions",
    "QuestionScore": "result",
    "Usage": "usage",
    "exact_match": "metrics",
    "normalize_answer": "metrics",
    "rouge_l": "metrics",
    "squad_f1": "metrics",
}

__all__ = [
    "ChainOfSummaries",
    "ChatModel",
    "ChatResult",
    "CoSConfig",
    "CoSError",
    "CoSModelError",
    "CoSOutputError",
    "CoSResult",
    "IterationRecord",
    "OpenAIChatModel",
    "PRESETS",
    "PROMPT_VERSION",
    "QAPair",
    "QuestionScore",
    "Usage",
    "exact_match",
    "normalize_answer",
    "rouge_l",
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
    from .metrics import exact_match, normalize_answer, rouge_l, squad_f1
    from .model import ChatModel, ChatResult, OpenAIChatModel
    from .prompts import PROMPT_VERSION
    from .questions import QAPair
    from .result import CoSResult, IterationRecord, QuestionScore
    from .usage import Usage
