"""LlamaIndex components for Chain of Summaries.

Example:
    >>> from llamaindex_ext import CoSSummaryTransform, CoSFallbackRetriever, CoSLLM
"""

from .embeddings import CoreEmbedder, CoSLocalEmbedding, as_embedder
from .llm import CoSLLM, as_chat_model
from .retriever import CoSCacheMissEvent, CoSExpandToSourcePostprocessor, CoSFallbackRetriever
from .transform import CoSSummaryTransform, CoSTransformError

__all__ = [
    "CoSCacheMissEvent",
    "CoSExpandToSourcePostprocessor",
    "CoSFallbackRetriever",
    "CoSLLM",
    "CoSLocalEmbedding",
    "CoSSummaryTransform",
    "CoSTransformError",
    "CoreEmbedder",
    "as_chat_model",
    "as_embedder",
]
