"""The sync seam: ``run_sync`` and ``offload`` (worker thread, or in place for an inline call)."""

import asyncio
import threading

from cos_integrations.sync import offload, run_sync


async def _where() -> int:
    return await offload(threading.get_ident)


def test_offload_runs_in_a_worker_thread_unless_the_call_is_inline():
    here = threading.get_ident()
    assert run_sync(_where()) != here
    assert run_sync(_where(), inline=True) == here
    # the thread's runner keeps one context across calls: the inline flag must not stay set
    assert run_sync(_where()) != here


def test_inline_flag_ends_with_its_call_even_when_the_call_raises():
    async def boom() -> None:
        await offload(threading.get_ident)
        raise ValueError("boom")

    try:
        run_sync(boom(), inline=True)
    except ValueError:
        pass
    else:  # pragma: no cover - the assertion below names the failure
        raise AssertionError("the coroutine's error was swallowed")
    assert run_sync(_where()) != threading.get_ident()


def test_inline_call_from_inside_a_running_loop_still_works():
    async def outer() -> tuple[int, int]:
        # a sync API called from async code: run_sync moves to a helper thread
        return run_sync(_where(), inline=True), threading.get_ident()

    inner, loop_thread = asyncio.run(outer())
    assert inner != loop_thread  # the helper thread's own, not the blocked loop's


def test_offload_passes_arguments_and_errors_through():
    async def call() -> str:
        return await offload("-".join, ["a", "b"])

    assert run_sync(call()) == run_sync(call(), inline=True) == "a-b"

    async def bad() -> None:
        await offload(int, "x")

    for inline in (False, True):
        try:
            run_sync(bad(), inline=inline)
        except ValueError as e:
            assert "invalid literal" in str(e)
        else:  # pragma: no cover
            raise AssertionError("offload swallowed the error")


def test_ctrl_c_cancels_the_call_lets_it_clean_up_and_the_next_call_runs():
    """A KeyboardInterrupt while a sync call waits (a Ctrl-C) ends the call: its task is
    cancelled and its cleanup runs, the interrupt reaches the caller, and the thread's loop
    still serves the next call."""
    cleaned: list[bool] = []

    async def slow() -> None:
        def interrupt() -> None:
            raise KeyboardInterrupt

        asyncio.get_running_loop().call_soon(interrupt)
        try:
            await asyncio.sleep(10)
        finally:
            cleaned.append(True)

    try:
        run_sync(slow())
    except KeyboardInterrupt:
        pass
    else:  # pragma: no cover
        raise AssertionError("the interrupt did not reach the caller")
    assert cleaned == [True]
    assert run_sync(_where(), inline=True) == threading.get_ident()
