"""LangChain components for Chain of Summaries.

Examples:
    >>> from langchain_ext import CoSDocumentTransformer, CoSFallbackRetriever

Names: ``CoS*`` are CoS for LangChain (a transformer, a retriever, a chat model over the
core's model, local embeddings), and ``create_cos_qa_chain`` a question-answering runnable
over the retriever; ``Core*`` are LangChain objects for the core
(``CoreChatModel`` wraps a ``BaseChatModel``, ``CoreEmbedder`` an ``Embeddings``).
"""

from .chat_model import CoreChatModel, CoSChatModel, as_chat_model
from .embeddings import CoreEmbedder, CoSLocalEmbeddings, as_embedder
from .qa_chain import create_cos_qa_chain, format_docs
from .retriever import CoSFallbackRetriever
from .transformer import CoSDocumentTransformer, document_id, section_documents

__all__ = [
    "CoSChatModel",
    "CoSDocumentTransformer",
    "CoSFallbackRetriever",
    "CoSLocalEmbeddings",
    "CoreChatModel",
    "CoreEmbedder",
    "as_chat_model",
    "as_embedder",
    "create_cos_qa_chain",
    "document_id",
    "format_docs",
    "section_documents",
]
