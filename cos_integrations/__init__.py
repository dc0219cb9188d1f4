"""cos-integrations: Chain of Summaries, framework-neutral core.

The names below load on first use (PEP 562), so tools that only need a corner of the
package (``cos --help``, the store) do not pay for the model client's imports.

Examples:
    >>> from cos_integrations import ChainOfSummaries, CoSConfig, OpenAIChatModel
    >>> CoSConfig.paper().iterations
    10
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from cos_integrations.version import __version__ as __version__

# public name -> the module that defines it
_EXPORTS = {
    "BackgroundRefiner": "serving.refine",
    "ChainOfSummaries": "summarize.engine",
    "ChatModel": "model",
    "ChatResult": "model",
    "CoSConfig": "summarize.config",
    "CoSError": "errors",
    "CoSIndex": "serving.index",
    "CoSIngestError": "ingest",
    "CoSModelError": "errors",
    "CoSOutputError": "errors",
    "CoSResult": "summarize.result",
    "FallbackRetriever": "serving.retrieval",
    "HitRule": "serving.hit_rule",
    "IngestReport": "serving.index",
    "IterationRecord": "summarize.result",
    "LocalEmbedder": "embedded.embeddings",
    "LocalModelServer": "embedded.server",
    "OpenAIChatModel": "model",
    "PRESETS": "summarize.config",
    "PROMPT_VERSION": "summarize.prompts",
    "QAPair": "summarize.questions",
    "QuestionScore": "summarize.result",
    "RefineOutcome": "serving.refine",
    "Refiner": "serving.refine",
    "RetrievalResult": "serving.retrieval",
    "SearchHit": "serving.index",
    "Stats": "serving.stats",
    "Usage": "usage",
    "answer_from": "serving.retrieval",
    "compute_stats": "serving.stats",
    "load_paths": "loaders",
    "open_model": "embedded.runtime",
    "read_manifest": "serving.index",
    "run_sync": "sync",  # the sync bridge the adapters use; not part of __all__
}

__all__ = [
    "BackgroundRefiner",
    "ChainOfSummaries",
    "ChatModel",
    "ChatResult",
    "CoSConfig",
    "CoSError",
    "CoSIndex",
    "CoSIngestError",
    "CoSModelError",
    "CoSOutputError",
    "CoSResult",
    "FallbackRetriever",
    "HitRule",
    "IngestReport",
    "IterationRecord",
    "LocalEmbedder",
    "LocalModelServer",
    "OpenAIChatModel",
    "PRESETS",
    "PROMPT_VERSION",
    "QAPair",
    "QuestionScore",
    "RefineOutcome",
    "Refiner",
    "RetrievalResult",
    "SearchHit",
    "Stats",
    "Usage",
    "answer_from",
    "compute_stats",
    "load_paths",
    "open_model",
    "read_manifest",
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
    from cos_integrations.embedded.embeddings import LocalEmbedder
    from cos_integrations.embedded.runtime import open_model
    from cos_integrations.embedded.server import LocalModelServer
    from cos_integrations.errors import CoSError, CoSModelError, CoSOutputError
    from cos_integrations.ingest import CoSIngestError
    from cos_integrations.loaders import load_paths
    from cos_integrations.model import ChatModel, ChatResult, OpenAIChatModel
    from cos_integrations.serving.hit_rule import HitRule
    from cos_integrations.serving.index import CoSIndex, IngestReport, SearchHit, read_manifest
    from cos_integrations.serving.refine import BackgroundRefiner, RefineOutcome, Refiner
    from cos_integrations.serving.retrieval import FallbackRetriever, RetrievalResult, answer_from
    from cos_integrations.serving.stats import Stats, compute_stats
    from cos_integrations.summarize.config import PRESETS, CoSConfig
    from cos_integrations.summarize.engine import ChainOfSummaries
    from cos_integrations.summarize.prompts import PROMPT_VERSION
    from cos_integrations.summarize.questions import QAPair
    from cos_integrations.summarize.result import CoSResult, IterationRecord, QuestionScore
    from cos_integrations.sync import run_sync as run_sync
    from cos_integrations.usage import Usage
