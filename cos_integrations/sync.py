"""Run a coroutine from sync code, inside or outside a running event loop: the seam every
sync wrapper uses (the core's and the framework adapters', e.g. LlamaIndex's ``__call__``
around ``acall`` and LangChain's ``transform_documents`` around ``atransform_documents``).

Example:
    >>> from cos_integrations import run_sync
    >>> async def two() -> int:
    ...     return 2
    >>> run_sync(two())
    2
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")

_local = threading.local()


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """One event loop per thread, kept between calls (Python >= 3.11: ``asyncio.Runner``),
    so a sync call does not pay for a new loop and new executor threads each time."""
    if sys.version_info < (3, 11):
        return asyncio.run(coro)
    runner = getattr(_local, "runner", None)
    if runner is None:
        runner = _local.runner = asyncio.Runner()
    return runner.run(coro)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` when no loop runs in this thread; otherwise run it in a helper thread.

    The second case is a sync API called from async code (a notebook, a LlamaIndex callback):
    blocking that loop's thread is the caller's choice, deadlocking it must not be ours.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run(coro)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()
