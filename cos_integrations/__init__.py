"""cos-integrations: Chain of Summaries, framework-neutral core.

Example:
    >>> from cos_integrations import ChainOfSummaries, CoSConfig, OpenAIChatModel
    >>> CoSConfig.paper().iterations
    10
"""

from .config import PRESETS, CoSConfig
from .engine import ChainOfSummaries
from .errors import CoSError, CoSModelError, CoSOutputError
from .metrics import exact_match, normalize_answer, rouge_l, squad_f1
from .model import ChatModel, ChatResult, OpenAIChatModel
from .prompts import PROMPT_VERSION
from .questions import QAPair
from .result import CoSResult, IterationRecord, QuestionScore
from .usage import Usage

__version__ = "0.1.0"

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
