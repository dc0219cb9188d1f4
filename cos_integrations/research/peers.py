"""The summary retrievers users already have, beside ours in ``cos eval`` (issue 28).

A *peer* is a framework's own class, run as it ships: LlamaIndex's ``DocumentSummaryIndex``
and the RAPTOR pack, LangChain's ``MultiVectorRetriever`` and ``ParentDocumentRetriever``.
The adapters live with their frameworks (``llamaindex_ext.peers``, ``langchain_ext.peers``)
and are found through the ``cos_integrations.peers`` entry points, so this module imports
no framework and the core stays framework-free. Each is given the same model (its own
OpenAI-compatible client class where the framework has one), the same e5 embedder in the
framework's embedding interface, the same ``k`` and chunk size, and uses its own default
prompts for its own summaries; ``cos eval`` answers from what it retrieves with the same
answer prompt as every other method, and charges its build (calls, tokens, seconds) to
the ingest columns.

Example:
    >>> from cos_integrations.research.peers import PEERS, UsageMeter
    >>> "doc-summary" in PEERS
    True
    >>> meter = UsageMeter()
    >>> meter.record_body(b'{"usage": {"prompt_tokens": 7, "completion_tokens": 2}}')
    >>> meter.total.calls, meter.total.prompt_tokens
    (1, 7)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Protocol

from cos_integrations.usage import Usage

if TYPE_CHECKING:
    import httpx

    from cos_integrations.embedded.embeddings import Embedder
    from cos_integrations.model import ChatModel, ChatResult
    from cos_integrations.serving.index import SearchHit

__all__ = [
    "PEERS",
    "PEER_GROUP",
    "Peer",
    "PeerDoc",
    "PeerSetup",
    "PeerUnavailable",
    "MeteredChatModel",
    "UsageMeter",
    "load_peer",
]

PEER_GROUP = "cos_integrations.peers"
# the peers ``cos eval --methods`` knows, and the class each runs (pyproject entry points)
PEERS: dict[str, str] = {
    "doc-summary": "LlamaIndex DocumentSummaryIndex (embedding retriever mode)",
    "raptor": "LlamaIndex RAPTOR pack (RaptorRetriever, collapsed tree)",
    "multi-vector": "LangChain MultiVectorRetriever over per-document summaries",
    "parent-doc": "LangChain ParentDocumentRetriever (small chunks searched, parents returned)",
}


class PeerUnavailable(RuntimeError):
    """A peer's framework packages are not installed (``pip install
    'cos-integrations[peers]'``), or the model has no endpoint the peer can call."""


class UsageMeter:
    """Calls and tokens of every chat completion that passes through an ``httpx`` client,
    read from the ``usage`` of the response bodies (the server's own count). A peer's
    framework client is built on such a client, so its ingest is charged exactly.

    Example:
        >>> import httpx
        >>> meter = UsageMeter()
        >>> client = httpx.AsyncClient(event_hooks={"response": [meter.ahook]})
    """

    def __init__(self) -> None:
        self.total = Usage()

    def record(self, usage: Usage) -> None:
        """Add one call's usage."""
        self.total.add(usage)

    def record_body(self, body: bytes) -> None:
        """Add the usage of one chat-completion response body (one call; its tokens when
        the body reports them)."""
        usage = Usage(calls=1)
        try:
            u = json.loads(body).get("usage") or {}
        except (ValueError, AttributeError):
            u = {}
        usage.prompt_tokens = int(u.get("prompt_tokens") or 0)
        usage.completion_tokens = int(u.get("completion_tokens") or 0)
        usage.cached_tokens = int((u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
        self.record(usage)

    def snapshot(self) -> Usage:
        """A copy of the total so far."""
        return self.total.model_copy()

    @staticmethod
    def _is_completion(response: httpx.Response) -> bool:
        return response.request.url.path.endswith("/chat/completions") or (
            response.request.url.path.endswith("/completions")
        )

    def hook(self, response: httpx.Response) -> None:
        """The response hook of a sync ``httpx.Client``."""
        if self._is_completion(response) and response.is_success:
            response.read()
            self.record_body(response.content)

    async def ahook(self, response: httpx.Response) -> None:
        """The response hook of an ``httpx.AsyncClient``."""
        if self._is_completion(response) and response.is_success:
            await response.aread()
            self.record_body(response.content)


class MeteredChatModel:
    """A :class:`~cos_integrations.ChatModel` that adds every call's usage to a meter (the
    LangChain peers call the model through it).

    Example:
        >>> meter = UsageMeter()
        >>> model = MeteredChatModel(llm, meter)                    # doctest: +SKIP
    """

    def __init__(self, llm: ChatModel, meter: UsageMeter) -> None:
        self.llm = llm
        self.meter = meter

    async def chat(self, messages: Sequence[dict[str, str]], **kwargs: Any) -> ChatResult:
        res = await self.llm.chat(messages, **kwargs)
        self.meter.record(res.usage)
        return res


@dataclass(frozen=True)
class PeerDoc:
    """One document as every peer gets it."""

    doc_id: str
    title: str
    text: str


@dataclass
class PeerSetup:
    """What every peer is built from: the model under test (``llm``, and its
    OpenAI-compatible endpoint for a framework's own client class), the embedder, ``k``
    and the chunk size of our index (``chunk_words``), and the meter that charges the
    peer's model calls."""

    llm: ChatModel
    embedder: Embedder
    k: int = 2
    chunk_words: int = 160
    context_window: int = 8192
    meter: UsageMeter = field(default_factory=UsageMeter)

    def endpoint(self) -> dict[str, str]:
        """``base_url``, ``model`` and ``api_key`` of the model's OpenAI-compatible
        endpoint; :class:`PeerUnavailable` when the model has none."""
        settings = getattr(self.llm, "openai_settings", None)
        if settings is None:
            raise PeerUnavailable(
                f"{type(self.llm).__name__} has no OpenAI-compatible endpoint for a "
                "framework's own client class; use an endpoint or the embedded model"
            )
        return settings()


class Peer(Protocol):
    """A peer retriever: built once over the documents, then asked per question."""

    async def abuild(self, docs: Sequence[PeerDoc]) -> None:
        """Index ``docs`` (the peer's own summaries made here)."""
        ...

    async def aretrieve(self, query: str) -> list[SearchHit]:
        """What the peer would put in front of the model for ``query``."""
        ...


def load_peer(name: str, setup: PeerSetup) -> Peer:
    """The peer ``name`` (a key of :data:`PEERS`) built from ``setup``; a clear
    :class:`PeerUnavailable` when its framework packages are missing."""
    if name not in PEERS:
        raise ValueError(f"unknown peer {name!r}; choose from {sorted(PEERS)}")
    found = [ep for ep in entry_points(group=PEER_GROUP) if ep.name == name]
    if not found:
        raise PeerUnavailable(
            f"peer {name!r} is not registered: reinstall cos-integrations "
            "(pip install -e '.[peers]')"
        )
    try:
        factory = found[0].load()
    except ImportError as exc:
        raise PeerUnavailable(
            f"peer {name!r} needs its framework packages: pip install "
            f"'cos-integrations[peers]' ({exc})"
        ) from exc
    return factory(setup)
