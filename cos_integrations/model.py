"""The chat-model interface the engine talks to, and its OpenAI-compatible implementation.

Any back end plugs in by implementing :class:`ChatModel` (one async ``chat`` call). The
LlamaIndex and LangChain packages adapt their own LLM classes to it.

Examples:
    >>> model = OpenAIChatModel(model="qwen", base_url="http://127.0.0.1:8080/v1")
    >>> model.base_url
    'http://127.0.0.1:8080/v1'
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import re
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import openai

from cos_integrations.errors import CoSModelError
from cos_integrations.usage import Usage

__all__ = ["ChatModel", "ChatResult", "OpenAIChatModel", "resolve_openai_settings"]

log = logging.getLogger(__name__)

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
_RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class _Secret:
    """Holds an API key; prints as ``***`` in reprs, logs, ``vars()`` and tracebacks."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def get(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __reduce__(self):  # never pickled into a cache or a worker process
        raise TypeError("an API key is not picklable")


@dataclass
class ChatResult:
    """One model reply: its text and what it cost.

    Examples:
        >>> reply = ChatResult('{"quote": "Rent is due on the 1st.", "answer": "the 1st"}')
        >>> reply.usage.calls, reply.finish_reason
        (1, None)
    """

    text: str
    usage: Usage = field(default_factory=lambda: Usage(calls=1))
    finish_reason: str | None = None


@runtime_checkable
class ChatModel(Protocol):
    """What the engine needs from a model: one async chat call.

    ``json_schema`` (``{"name": ..., "schema": {...}}``) asks for structured output where the
    back end supports it; a back end that does not simply ignores it (the engine always
    parses plain text too).

    Examples:
        >>> class Echo:  # any object with this coroutine is a ChatModel
        ...     async def chat(self, messages, *, max_tokens=None, temperature=0.0,
        ...                    json_schema=None):
        ...         return ChatResult(messages[-1]["content"])
        >>> isinstance(Echo(), ChatModel)
        True
        >>> import asyncio
        >>> asyncio.run(Echo().chat([{"role": "user", "content": "hi"}])).text
        'hi'
    """

    async def chat(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        json_schema: dict | None = None,
    ) -> ChatResult: ...


def resolve_openai_settings(
    model: str | None = None, base_url: str | None = None, api_key: str | None = None
) -> tuple[str, str | None, str]:
    """Explicit arguments win, then ``COS_MODEL``/``COS_BASE_URL``/``OPENAI_API_KEY``.

    A custom ``base_url`` without a key gets a placeholder key (local servers ignore it).
    Raises ``ValueError`` when neither a key nor a base URL is known.
    """
    base_url = base_url or os.environ.get("COS_BASE_URL") or None
    model = model or os.environ.get("COS_MODEL") or DEFAULT_OPENAI_MODEL
    api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
    if api_key is None:
        if base_url is None:
            raise ValueError(
                "No model endpoint configured: pass base_url= or api_key=, or set COS_BASE_URL "
                "or OPENAI_API_KEY (or cos_integrations.open_model() for the embedded model)."
            )
        api_key = "sk-no-key-required"
    return model, base_url, api_key


class OpenAIChatModel:
    """A :class:`ChatModel` over any OpenAI-compatible ``/v1/chat/completions`` endpoint.

    Retries 429, 5xx, connection errors and truncated or garbled bodies with exponential
    backoff and jitter (honouring ``Retry-After``), then raises :class:`CoSModelError`.
    Structured output is requested with ``response_format=json_schema``; a server that
    rejects it is asked again without, and not asked again with it. The API key is never
    printed or serialised. (The openai SDK's own retries are off: it would retry a timeout
    from scratch with the same timeout, and give no typed error with the document id.)

    Timeouts fit slow endpoints: by default (``timeout=None``, or ``COS_TIMEOUT`` seconds)
    each call may take ``60 s`` plus the time the slowest CPU server needs for its prompt
    (20 tokens/s) and its ``max_tokens`` (2 tokens/s). A call that still times out is
    retried at most ``timeout_retries`` times, each with twice the time, and the final
    error says how long it waited and what to change.

    Examples:
        >>> import asyncio
        >>> llm = OpenAIChatModel(model="gpt-4o-mini", api_key="sk-test")
        >>> "sk-test" in repr(llm)
        False
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        timeout_retries: int = 1,
        max_retries: int = 4,
        backoff_base: float = 0.5,
        backoff_max: float = 20.0,
        structured_output: bool = True,
        extra_body: dict[str, Any] | None = None,
        seed: int | None = None,
        token_counter: Callable[[str], int] | None = None,
    ) -> None:
        self.model, self.base_url, key = resolve_openai_settings(model, base_url, api_key)
        self._api_key = _Secret(key)
        if timeout is None and os.environ.get("COS_TIMEOUT"):
            try:
                timeout = float(os.environ["COS_TIMEOUT"])
            except ValueError:
                raise ValueError(
                    f"COS_TIMEOUT must be a number of seconds, not {os.environ['COS_TIMEOUT']!r}"
                ) from None
        self.timeout = timeout
        self.timeout_retries = timeout_retries
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.structured_output = structured_output
        self.extra_body = dict(extra_body or {})
        self.seed = seed
        # the model's own tokenizer when one is at hand (the embedded server's /tokenize);
        # ChainOfSummaries counts with it, else with the character estimate
        self.token_counter = token_counter
        # One client per event loop: an httpx pool must not cross loops.
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, openai.AsyncOpenAI]
        self._clients = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"OpenAIChatModel(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def name(self) -> str:
        """A label for logs and results: the model name and where it is served."""
        return f"{self.model}@{self.base_url or 'api.openai.com'}"

    def openai_settings(self) -> dict[str, str]:
        """``model``, ``base_url`` and ``api_key`` of this endpoint, to build another
        OpenAI-compatible client of the same model (a framework's own class: the peers of
        ``cos eval``). It holds the key: keep it out of logs."""
        return {
            "model": self.model,
            "base_url": self.base_url or "https://api.openai.com/v1",
            "api_key": self._api_key.get(),
        }

    def _client(self) -> openai.AsyncOpenAI:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = openai.AsyncOpenAI(
                api_key=self._api_key.get(),
                base_url=self.base_url,
                max_retries=0,  # we retry ourselves (see the class docstring)
            )
            self._clients[loop] = client
        return client

    def timeout_for(self, messages: Sequence[dict[str, str]], max_tokens: int | None) -> float:
        """Seconds one call may take: ``timeout`` when set, else scaled with the prompt
        (20 tokens/s) and the requested tokens (2 tokens/s) on top of 60 s."""
        if self.timeout is not None:
            return self.timeout
        prompt = sum(len(m.get("content") or "") for m in messages) / 3.6
        return 60.0 + prompt / 20.0 + (max_tokens or 1024) / 2.0

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:
                return min(float(retry_after), self.backoff_max)
            except ValueError:
                pass
        delay = min(self.backoff_max, self.backoff_base * 2**attempt)
        return delay * (0.5 + random.random() / 2)

    def _request(
        self,
        messages: Sequence[dict[str, str]],
        max_tokens: int | None,
        temperature: float,
        json_schema: dict | None,
    ) -> dict[str, Any]:
        """The completion request's arguments (structured output while the endpoint takes it)."""
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "temperature": temperature,
        }
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if self.seed is not None:
            kwargs["seed"] = self.seed
        if json_schema is not None and self.structured_output:
            kwargs["response_format"] = {"type": "json_schema", "json_schema": json_schema}
        if self.extra_body:
            kwargs["extra_body"] = self.extra_body
        return kwargs

    async def chat(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        json_schema: dict | None = None,
    ) -> ChatResult:
        """Send one chat completion, retrying transient failures."""
        last_status: int | None = None
        last_error = "no attempt made"
        attempts = 0
        timeouts = 0
        schema = json_schema  # None once a 400 to it has it asked again without
        limit = self.timeout_for(messages, max_tokens)
        while attempts <= self.max_retries:
            attempts += 1
            kwargs = self._request(messages, max_tokens, temperature, schema)
            retry_after: str | None = None
            try:
                resp = await self._client().chat.completions.create(
                    **kwargs, timeout=limit * 2**timeouts
                )
                if schema is None and json_schema is not None and self.structured_output:
                    # only a success without the schema says the schema was the cause
                    log.warning("%s rejected structured output; continuing without", self.name)
                    self.structured_output = False
                return _to_result(resp)
            except openai.APIStatusError as exc:
                last_status = exc.status_code
                last_error = _short(exc, self._api_key.get())
                if exc.status_code == 400 and "response_format" in kwargs:
                    # maybe the schema, maybe not (a prompt over the context is a 400 too):
                    # asked again without it, structured output left on for other calls
                    schema = None
                    attempts -= 1  # not the server's fault: this retry is free
                    continue
                if exc.status_code not in _RETRYABLE_STATUS:
                    break
                retry_after = exc.response.headers.get("retry-after") if exc.response else None
            except openai.APITimeoutError:
                last_status = None
                last_error = _timed_out(limit * 2**timeouts, messages, max_tokens)
                timeouts += 1
                if timeouts > self.timeout_retries:
                    break  # not retried blindly: each retry already had twice the time
            except openai.APIConnectionError as exc:
                last_status, last_error = None, f"connection error: {type(exc.__cause__).__name__}"
            except (json.JSONDecodeError, openai.APIResponseValidationError) as exc:
                # a truncated or garbled body from a flaky server or proxy: ask again
                last_status, last_error = None, f"malformed response: {type(exc).__name__}"
            if attempts <= self.max_retries:
                delay = self._delay(attempts - 1, retry_after)
                log.info("%s: %s; retry %d in %.1fs", self.name, last_error, attempts, delay)
                await asyncio.sleep(delay)
        raise CoSModelError(
            f"model {self.name} failed: {last_error}", status=last_status, attempts=attempts
        )


def _timed_out(waited: float, messages: Sequence[dict[str, str]], max_tokens: int | None) -> str:
    """What a timed-out call says: how long, how big, and how to give it more time."""
    prompt_tokens = int(sum(len(m.get("content") or "") for m in messages) / 3.6)
    wanted = max_tokens or "the default"
    return (
        f"timed out after {waited:.0f}s (a prompt of ~{prompt_tokens} tokens, up to "
        f"{wanted} new tokens); a slow endpoint needs more time: pass timeout= to "
        "OpenAIChatModel or set COS_TIMEOUT (seconds), or ask for fewer tokens"
    )


_KEYLIKE = re.compile(r"\b(?:sk|pk|rk|key|api[_-]?key)[-_][A-Za-z0-9_\-*.]{6,}", re.I)


def redact(text: str, secret: str | None = None) -> str:
    """Remove an API key (and anything key-shaped) from text bound for logs or errors."""
    if secret:
        text = text.replace(secret, "***")
    return _KEYLIKE.sub("***", text)


def _short(exc: openai.APIStatusError, secret: str) -> str:
    # Keep the status and the server's own words, minus anything that looks like a key
    # (OpenAI's 401 echoes part of the key it was sent).
    body = exc.body if isinstance(exc.body, dict) else {}
    detail = body.get("message") or (body.get("error") or {}).get("message") if body else None
    return f"HTTP {exc.status_code}" + (f": {redact(str(detail), secret)[:200]}" if detail else "")


def _to_result(resp: Any) -> ChatResult:
    choice = resp.choices[0] if resp.choices else None
    text = (choice.message.content or "") if choice and choice.message else ""
    usage = Usage(calls=1)
    u = getattr(resp, "usage", None)
    if u is not None:
        usage.prompt_tokens = u.prompt_tokens or 0
        usage.completion_tokens = u.completion_tokens or 0
        details = getattr(u, "prompt_tokens_details", None)
        cached = getattr(details, "cached_tokens", None) if details else None
        if cached is None:
            # llama.cpp reports its prompt-cache reuse in "timings.cache_n".
            timings = (getattr(resp, "model_extra", None) or {}).get("timings") or {}
            cached = timings.get("cache_n")
        usage.cached_tokens = int(cached or 0)
    finish = choice.finish_reason if choice else None
    return ChatResult(text=text, usage=usage, finish_reason=finish)
