"""LangChain components for Chain of Summaries.

Example:
    >>> from langchain_ext import CoSDocumentTransformer, CoSFallbackRetriever
"""

from .chat_model import CoSChatModel, LangChainChatModel, as_chat_model
from .embeddings import CoreEmbedder, CoSLocalEmbeddings, as_embedder
from .retriever import CoSFallbackRetriever
from .transformer import CoSDocumentTransformer, document_id

__all__ = [
    "CoSChatModel",
    "CoSDocumentTransformer",
    "CoSFallbackRetriever",
    "CoSLocalEmbeddings",
    "CoreEmbedder",
    "LangChainChatModel",
    "as_chat_model",
    "as_embedder",
    "document_id",
]
