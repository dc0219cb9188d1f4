"""Child process that runs llama.cpp's server in-process until its stdin closes, or, for
a shared server (``--users-dir``), until no registered user process is alive.

Started by :class:`cos_integrations.embedded.server.LocalModelServer`; not a public entry point.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    """Serve until told to stop; the address goes to ``--ready-file`` once listening."""
    args = _parser().parse_args(argv)
    server = _start(args)
    address = str(server.listening_address)
    if args.ready_file:
        tmp = args.ready_file + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(address)
        os.replace(tmp, args.ready_file)
    print(f"cos: serving {args.model} at {address}", flush=True)
    _wait_for_stop(Path(args.users_dir) if args.users_dir else None)
    if args.state_file:
        try:  # our record, unless a newer server replaced it
            if json.loads(Path(args.state_file).read_text()).get("pid") == os.getpid():
                Path(args.state_file).unlink()
        except (OSError, ValueError):
            pass
    del server
    return 0


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="cos-server-child")
    ap.add_argument("--model", required=True)
    ap.add_argument("--n-ctx", type=int, default=8192)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--slots", type=int, default=1, help="parallel slots (continuous batching)")
    ap.add_argument(
        "--draft",
        type=int,
        default=0,
        help="prompt-lookup speculation: draft up to N tokens from the context (0: off)",
    )
    ap.add_argument(
        "--draft-ngram",
        type=int,
        default=6,
        help="how many last tokens must match earlier context before a draft is proposed",
    )
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--ready-file", default=None)
    ap.add_argument("--users-dir", default=None, help="shared: stop when no user is alive")
    ap.add_argument("--state-file", default=None, help="shared: the record to remove at exit")
    return ap


def _start(args: argparse.Namespace):
    """llama.cpp's server in this process, on loopback, with the prompt cache on."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    # --n-ctx is per slot; llama.cpp divides its context among the slots
    params.n_ctx = args.n_ctx * args.slots
    params.n_parallel = args.slots  # default 1: on 2 cores slots measured 1.1x (BENCHMARKS)
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.hostnames = ["127.0.0.1"]  # loopback only, never 0.0.0.0
    params.port = args.port
    params.cache_prompt = True
    if args.draft > 0:
        # self-speculation (no draft model): when the last --draft-ngram tokens occurred
        # earlier in the context, the tokens that followed them there are proposed and
        # checked in one batch; greedy decoding keeps only what the model would have said
        spec = params.speculative
        spec.types = [xllamacpp.common_speculative_type.COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE]
        spec.ngram_simple.size_n = args.draft_ngram
        spec.ngram_simple.size_m = args.draft
        spec.draft.n_max = args.draft
        spec.draft.n_min = 0
    params.warmup = False
    return xllamacpp.Server(params)


def _wait_for_stop(users: Path | None) -> None:
    """Until SIGTERM, or: the parent closes our stdin (a private server), or no registered
    user process is alive (a shared one, ``users``)."""
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())

    def watch_stdin() -> None:
        try:
            while sys.stdin.buffer.read(1024):
                pass
        except (OSError, ValueError):
            pass
        done.set()  # parent gone or asked us to stop

    def watch_users(users: Path) -> None:
        from cos_integrations.embedded.server import live_users

        while not done.wait(1.0):
            if not live_users(users):
                done.set()  # the last user stopped or died

    if users is not None:
        threading.Thread(target=watch_users, args=(users,), daemon=True).start()
    else:
        threading.Thread(target=watch_stdin, daemon=True).start()
    try:
        done.wait()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    raise SystemExit(main())
