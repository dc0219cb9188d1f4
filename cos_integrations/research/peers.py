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

Examples:
    >>> from cos_integrations.research.peers import PEERS, UsageMeter
    >>> "doc-summary" in PEERS
    True
    >>> meter = UsageMeter()
    >>> meter.record_body(b'{"usage": {"prompt_tokens": 7, "completion_tokens": 2}}')
    >>> meter.total.calls, meter.total.prompt_tokens
    (1, 7)
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from cos_integrations.model import ChatResult
from cos_integrations.research.jsonl import append_jsonl, read_jsonl
from cos_integrations.usage import Usage

if TYPE_CHECKING:
    from cos_integrations.embedded.embeddings import Embedder
    from cos_integrations.model import ChatModel
    from cos_integrations.serving.index import SearchHit

__all__ = [
    "PEERS",
    "PEER_GROUP",
    "Peer",
    "PeerDoc",
    "PeerSetup",
    "PeerUnavailable",
    "CallRecord",
    "load_cache",
    "MeteredChatModel",
    "RecordingTransport",
    "UsageMeter",
    "load_peer",
]

PEER_GROUP = "cos_integrations.peers"
# the caches users put in front of RAG (cos eval --stream's baselines), by name
CACHE_GROUP = "cos_integrations.caches"
# the peers ``cos eval --methods`` knows, and the class each runs (pyproject entry points)
PEERS: dict[str, str] = {
    "doc-summary": "LlamaIndex DocumentSummaryIndex (embedding retriever mode)",
    "raptor": "LlamaIndex RAPTOR pack (RaptorRetriever, collapsed tree)",
    "multi-vector": "LangChain MultiVectorRetriever over per-document summaries",
    "parent-doc": "LangChain ParentDocumentRetriever (400-char chunks, 2,000-char parents)",
}


class PeerUnavailable(RuntimeError):
    """A peer's framework packages are not installed (``pip install
    'cos-integrations[peers]'``), or the model has no endpoint the peer can call."""


class UsageMeter:
    """Calls and tokens of every chat completion that passes through an ``httpx`` client,
    read from the ``usage`` of the response bodies (the server's own count). A peer's
    framework client is built on such a client, so its ingest is charged exactly.

    Examples:
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


class CallRecord:
    """A peer's model calls kept by their exact request (a JSONL file): a build that was
    stopped (a session's end, a crash) resumes with each call it made replayed, not made
    again. A replay charges what the call cost when it was made: its response (so its
    tokens) and its seconds, added to :attr:`replayed_seconds`, so a build's figures do not
    depend on how many runs it took. ``path`` ``None``: nothing kept, every call made.

    Examples:
        >>> record = CallRecord(None)
        >>> record.put("k", {"text": "a summary"}, 12.5)
        >>> record.get("k"), record.replayed_seconds
        ({'text': 'a summary'}, 12.5)
        >>> CallRecord.key({"b": 1, "a": 2}) == CallRecord.key({"a": 2, "b": 1})
        True
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.replayed_seconds = 0.0
        self.replayed = 0
        self.calls: dict[str, tuple[dict[str, Any], float]] = {}
        for entry in read_jsonl(path) if path else []:
            self.calls[entry["key"]] = (entry["response"], float(entry["seconds"]))

    @staticmethod
    def key(request: Any) -> str:
        """The digest of a request (bytes as sent, or JSON-able data, keys sorted)."""
        if not isinstance(request, bytes):
            request = json.dumps(request, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(request).hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        """The recorded response of ``key`` (its seconds charged), or ``None``."""
        found = self.calls.get(key)
        if found is None:
            return None
        self.replayed += 1
        self.replayed_seconds += found[1]
        return found[0]

    def put(self, key: str, response: dict[str, Any], seconds: float) -> None:
        """Keep one call's response and the seconds it took."""
        self.calls[key] = (response, seconds)
        if self.path:
            append_jsonl(self.path, {"key": key, "seconds": seconds, "response": response})


def _is_completion(request: httpx.Request) -> bool:
    return request.method == "POST" and request.url.path.endswith("/completions")


class RecordingTransport(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """An ``httpx`` transport that answers a chat completion from a :class:`CallRecord`
    when it holds the request, and otherwise sends it and keeps the response (a framework's
    own OpenAI-compatible client is built on a client with this transport). Anything that
    is not a successful completion passes through untouched.

    Examples:
        >>> record = CallRecord(None)
        >>> client = httpx.Client(transport=RecordingTransport(record))
    """

    def __init__(
        self,
        record: CallRecord,
        sync: httpx.BaseTransport | None = None,
        async_: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.record = record
        self.sync = sync or httpx.HTTPTransport()
        self.async_ = async_ or httpx.AsyncHTTPTransport()

    def _replay(self, request: httpx.Request) -> httpx.Response | None:
        found = self.record.get(CallRecord.key(request.content))
        if found is None:
            return None
        return httpx.Response(200, json=found, request=request)

    def _keep(self, request: httpx.Request, response: httpx.Response, seconds: float) -> None:
        if response.is_success:
            self.record.put(CallRecord.key(request.content), response.json(), seconds)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if not _is_completion(request):
            return self.sync.handle_request(request)
        request.read()
        replayed = self._replay(request)
        if replayed is not None:
            return replayed
        start = time.perf_counter()
        response = self.sync.handle_request(request)
        response.read()
        self._keep(request, response, time.perf_counter() - start)
        return response

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if not _is_completion(request):
            return await self.async_.handle_async_request(request)
        await request.aread()
        replayed = self._replay(request)
        if replayed is not None:
            return replayed
        start = time.perf_counter()
        response = await self.async_.handle_async_request(request)
        await response.aread()
        self._keep(request, response, time.perf_counter() - start)
        return response

    def close(self) -> None:
        self.sync.close()

    async def aclose(self) -> None:
        await self.async_.aclose()


class MeteredChatModel:
    """A :class:`~cos_integrations.ChatModel` that adds every call's usage to a meter (the
    LangChain peers call the model through it), answering from ``record`` a call it holds
    (:class:`CallRecord`) and keeping the others.

    Examples:
        >>> meter = UsageMeter()
        >>> model = MeteredChatModel(llm, meter)                    # doctest: +SKIP
    """

    def __init__(self, llm: ChatModel, meter: UsageMeter, record: CallRecord | None = None) -> None:
        self.llm = llm
        self.meter = meter
        self.record = record

    async def chat(self, messages: Sequence[dict[str, str]], **kwargs: Any) -> ChatResult:
        if self.record is None:
            res = await self.llm.chat(messages, **kwargs)
        else:
            res = await self._recorded(self.record, messages, **kwargs)
        self.meter.record(res.usage)
        return res

    async def _recorded(
        self, record: CallRecord, messages: Sequence[dict[str, str]], **kwargs: Any
    ) -> ChatResult:
        model = getattr(self.llm, "model", type(self.llm).__name__)
        key = CallRecord.key({"model": model, "messages": list(messages), **kwargs})
        found = record.get(key)
        if found is not None:
            return ChatResult(text=found["text"], usage=Usage.model_validate(found["usage"]))
        start = time.perf_counter()
        res = await self.llm.chat(messages, **kwargs)
        usage = res.usage.model_dump()
        record.put(key, {"text": res.text, "usage": usage}, time.perf_counter() - start)
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
    and the chunk size of our index (``chunk_words``), the meter that charges the
    peer's model calls, and the record its calls are kept in (:class:`CallRecord`)."""

    llm: ChatModel
    embedder: Embedder
    k: int = 2
    chunk_words: int = 160
    context_window: int = 8192
    meter: UsageMeter = field(default_factory=UsageMeter)
    record: CallRecord | None = None  # None: every call made, nothing kept

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


def load_cache(name: str) -> Any:
    """The cache class ``name`` (``"exact"``, ``"semantic"``) of :data:`CACHE_GROUP`; a
    clear :class:`PeerUnavailable` when its framework packages are missing."""
    found = [ep for ep in entry_points(group=CACHE_GROUP) if ep.name == name]
    if not found:
        raise PeerUnavailable(
            f"cache {name!r} is not registered: reinstall cos-integrations "
            "(pip install -e '.[langchain]')"
        )
    try:
        return found[0].load()
    except ImportError as exc:
        raise PeerUnavailable(
            f"cache {name!r} needs LangChain: pip install 'cos-integrations[langchain]' ({exc})"
        ) from exc
