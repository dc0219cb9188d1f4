"""Run a coroutine from sync code, inside or outside a running event loop: the seam every
sync wrapper uses (the core's and the framework adapters', e.g. LlamaIndex's ``__call__``
around ``acall`` and LangChain's ``transform_documents`` around ``atransform_documents``).

:func:`offload` is the other half: blocking work (a Chroma search, a store write) awaited
off the event loop, in a worker thread, except inside a ``run_sync(..., inline=True)``
call, whose loop serves that one call only: there it runs in place, since a thread hop
(~0.2 ms on two cores) would only add to the caller's wait.

Examples:
    >>> from cos_integrations.sync import run_sync
    >>> async def two() -> int:
    ...     return 2
    >>> run_sync(two())
    2
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["offload", "run_sync"]

T = TypeVar("T")

_local = threading.local()
# True while a run_sync(inline=True) coroutine runs: its loop has nothing else to serve
_inline: contextvars.ContextVar[bool] = contextvars.ContextVar("cos_inline", default=False)


async def offload(func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``await asyncio.to_thread(func, ...)``, or ``func(...)`` in place inside a
    ``run_sync(..., inline=True)`` call (nothing else waits on that loop).

    Examples:
        >>> async def length() -> int:
        ...     return await offload(len, "abc")
        >>> run_sync(length()), run_sync(length(), inline=True)
        (3, 3)
    """
    if _inline.get():
        return func(*args, **kwargs)
    return await asyncio.to_thread(func, *args, **kwargs)


async def _inlined(coro: Coroutine[Any, Any, T]) -> T:
    token = _inline.set(True)
    try:
        return await coro
    finally:
        # the thread's runner keeps one context across calls: leave it as found
        _inline.reset(token)


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """One event loop per thread, kept between calls (Python >= 3.11: ``asyncio.Runner``),
    so a sync call does not pay for a new loop and new executor threads each time."""
    if sys.version_info < (3, 11):
        return asyncio.run(coro)
    runner = getattr(_local, "runner", None)
    if runner is None:
        runner = _local.runner = asyncio.Runner()
    # The runner's loop, without ``Runner.run``: on the main thread that swaps the SIGINT
    # handler twice a call, and reading it back formats the finished task, result and all
    # (an empty call 0.047 -> 0.009 ms; more with a large result). Ctrl-C still ends the
    # call: the task is cancelled, allowed to clean up, and the KeyboardInterrupt goes on.
    loop = runner.get_loop()
    task = loop.create_task(coro)
    try:
        return loop.run_until_complete(task)
    except KeyboardInterrupt:
        task.cancel()
        with contextlib.suppress(BaseException):
            loop.run_until_complete(task)
        raise


def run_sync(coro: Coroutine[Any, Any, T], *, inline: bool = False) -> T:
    """``asyncio.run`` when no loop runs in this thread; otherwise run it in a helper thread.

    The second case is a sync API called from async code (a notebook, a LlamaIndex callback):
    blocking that loop's thread is the caller's choice, deadlocking it must not be ours.
    ``inline=True``: the coroutine's :func:`offload` calls run in place (for a coroutine
    that awaits one thing at a time; one that gathers work would lose its overlap).
    """
    if inline:
        coro = _inlined(coro)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run(coro)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()
