"""``cos ui``: the review web page over an index (the ``ui`` extra: FastAPI, uvicorn).
:mod:`cos_integrations.cli` adds it to the ``cos`` app."""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from cos_integrations.cli.common import ChromaOpt, IndexOpt, StoreUrlOpt, console, err, open_index

__all__ = ["app", "is_loopback"]

app = typer.Typer()


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``: the only hosts served without a token."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@app.command()
def ui(
    index: IndexOpt = Path("index"),
    store_url: StoreUrlOpt = None,
    host: Annotated[
        str, typer.Option(help="Address to bind (other than loopback: needs a token).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8765,
    read_only: Annotated[bool, typer.Option("--read-only", help="Serve no action.")] = False,
    token: Annotated[
        str | None,
        typer.Option(
            help="Access token every request must carry (or COS_UI_TOKEN).", show_default=False
        ),
    ] = None,
    user: Annotated[
        str | None,
        typer.Option(help="Who acts, for the audit log, when no X-Cos-User header says."),
    ] = None,
    chroma_url: ChromaOpt = None,
) -> None:
    """Serve the review page: documents, summaries beside their sources, misses, versions
    and the owners' actions (pin, unpin, accept, reject, revert, queue, retry, drop)."""
    token = token or os.environ.get("COS_UI_TOKEN") or None
    if not is_loopback(host) and not token:
        err.print(
            f"[red]error:[/] refusing to serve on {escape(host)} without a token: anyone who "
            "can reach it could edit the summaries; pass --token or set COS_UI_TOKEN"
        )
        raise typer.Exit(2)
    if not 0 < port < 65536:
        raise typer.BadParameter(f"port must be 1-65535, not {port}", param_hint="--port")
    try:
        import uvicorn

        from cos_integrations.web import create_app
    except ImportError as exc:
        err.print(
            f"[red]error:[/] `cos ui` needs the ui extra ({escape(str(exc))}): "
            "pip install 'cos-integrations[ui]'"
        )
        raise typer.Exit(2) from exc
    idx = open_index(index, store_url=store_url, chroma_url=chroma_url)
    try:  # a port in use is a clear error, not a traceback
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        err.print(f"[red]error:[/] cannot listen on {escape(host)}:{port}: {escape(str(exc))}")
        raise typer.Exit(2) from exc
    # on loopback, only loopback Host headers (DNS rebinding); elsewhere the token guards
    hosts = ["127.0.0.1", "localhost", "[::1]", "::1", host] if is_loopback(host) else None
    app_ = create_app(idx, read_only=read_only, token=token, user=user, allowed_hosts=hosts)
    mode = "read-only" if read_only else "read-write"
    console.print(f"cos review ({mode}) on http://{host}:{port}/ for {idx.path}")
    uvicorn.run(app_, host=host, port=port, log_level="warning")
