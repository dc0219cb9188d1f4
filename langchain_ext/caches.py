"""The caches users put in front of a RAG chain, as ``cos eval --stream`` baselines.

``ExactPromptCache`` is LangChain's ``InMemoryCache`` (``set_llm_cache(InMemoryCache())``):
a model call is served again only for the very same prompt (the retrieved chunks and the
question, rendered). ``SemanticQuestionCache`` is the semantic-cache pattern of LangChain's
and RedisVL's ``SemanticCache``: the user's question embedded (e5, through
:class:`~langchain_ext.CoSLocalEmbeddings`) in ``langchain_core``'s ``InMemoryVectorStore``,
and an earlier answer served when the closest cached question is at least ``threshold``
similar (cosine). RedisVL's default ``distance_threshold`` of 0.1 is a similarity of 0.90
(:data:`DEFAULT_SEMANTIC_THRESHOLD`). Neither checks anything against the source.

Examples:
    >>> cache = ExactPromptCache()
    >>> cache.lookup("When is rent due?", "[chunks] When is rent due?") is None
    True
    >>> cache.update("When is rent due?", "[chunks] When is rent due?", "the 1st")
    >>> cache.lookup("when is rent due?", "[chunks] When is rent due?")
    'the 1st'
"""

from __future__ import annotations

from langchain_core.caches import InMemoryCache
from langchain_core.embeddings import Embeddings
from langchain_core.outputs import Generation
from langchain_core.vectorstores import InMemoryVectorStore

from cos_integrations.defaults import DEFAULT_SEMANTIC_THRESHOLD

__all__ = ["ExactPromptCache", "SemanticQuestionCache", "DEFAULT_SEMANTIC_THRESHOLD"]

# the llm_string a cache keys on beside the prompt: one model, one setting, in a run
_LLM = "cos-eval-answer"


class ExactPromptCache:
    """LangChain's ``InMemoryCache`` keyed by the rendered prompt (see the module
    docstring)."""

    def __init__(self) -> None:
        self.cache = InMemoryCache()

    def lookup(self, question: str, prompt: str) -> str | None:
        found = self.cache.lookup(prompt, _LLM)
        return found[0].text if found else None

    def update(self, question: str, prompt: str, answer: str | None) -> None:
        self.cache.update(prompt, _LLM, [Generation(text=answer or "")])


class SemanticQuestionCache:
    """The semantic-cache pattern over the user's question (see the module docstring).

    Examples:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> cache = SemanticQuestionCache(DeterministicFakeEmbedding(size=16), threshold=0.99)
        >>> cache.update("When is rent due?", "", "the 1st")
        >>> cache.lookup("When is rent due?", ""), cache.lookup("Who pays water?", "")
        ('the 1st', None)
    """

    def __init__(self, embeddings: Embeddings, threshold: float = DEFAULT_SEMANTIC_THRESHOLD):
        # a question is compared with questions: both embedded as queries (e5 prefixes a
        # stored text as a passage otherwise)
        self.store = InMemoryVectorStore(_AsQueries(embeddings))
        self.threshold = threshold

    def lookup(self, question: str, prompt: str) -> str | None:
        found = self.store.similarity_search_with_score(question, k=1)
        if not found or found[0][1] < self.threshold:
            return None
        return str(found[0][0].metadata["answer"])

    def update(self, question: str, prompt: str, answer: str | None) -> None:
        self.store.add_texts([question], metadatas=[{"answer": answer or ""}])


class _AsQueries(Embeddings):
    """``embeddings`` with every text embedded as a query."""

    def __init__(self, embeddings: Embeddings) -> None:
        self.embeddings = embeddings

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embeddings.embed_query(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embeddings.embed_query(text)
