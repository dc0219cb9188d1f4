"""LlamaIndex components for Chain of Summaries.

Examples:
    >>> from llamaindex_ext import CoSSummaryTransform, CoSFallbackRetriever, CoreChatModel

Names: ``CoS*`` are CoS for LlamaIndex (a transform, a retriever, a query engine, an
embedding, the core's model as an ``LLM``);
``Core*`` are LlamaIndex objects for the core (``CoreChatModel`` wraps an ``LLM``,
``CoreEmbedder`` an embed model).
"""

from .embeddings import CoreEmbedder, CoSLocalEmbedding, as_embedder
from .llm import CoreChatModel, CoSChatLLM, as_chat_model
from .query_engine import CoSQueryEngine
from .retriever import CoSCacheMissEvent, CoSExpandToSourcePostprocessor, CoSFallbackRetriever
from .transform import CoSSummaryTransform, CoSTransformError, section_documents

__all__ = [
    "CoSCacheMissEvent",
    "CoSChatLLM",
    "CoSExpandToSourcePostprocessor",
    "CoSFallbackRetriever",
    "CoSLocalEmbedding",
    "CoSQueryEngine",
    "CoSSummaryTransform",
    "CoSTransformError",
    "CoreChatModel",
    "CoreEmbedder",
    "as_chat_model",
    "as_embedder",
    "section_documents",
]
