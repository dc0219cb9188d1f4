"""What every ``cos`` command shares: the consoles, the common options and the helpers that
open an index, pick an embedder, set up logging and draw progress bars."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

__all__ = [
    "console",
    "err",
    "IndexOpt",
    "ModelOpt",
    "BaseUrlOpt",
    "LocalOpt",
    "ChromaOpt",
    "StoreUrlOpt",
    "ThresholdOpt",
    "HitContextOpt",
    "TeachOpt",
    "RejectEchoOpt",
    "RequireSupportOpt",
    "VerifyChunkOpt",
    "VerifyRouteOpt",
    "setup_logging",
    "make_embedder",
    "open_index",
    "progress_bar",
]

# soft_wrap: lines are not broken at the terminal width (paths and ids stay greppable)
console = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

IndexOpt = Annotated[Path, typer.Option("--index", "-i", help="Index directory.")]
ModelOpt = Annotated[
    str | None, typer.Option("--model", help="Model name at the endpoint (or COS_MODEL).")
]
BaseUrlOpt = Annotated[
    str | None,
    typer.Option("--base-url", help="OpenAI-compatible endpoint (or COS_BASE_URL)."),
]
LocalOpt = Annotated[
    str | None,
    typer.Option(
        "--local-model",
        help="Embedded model: default, small, smoke or a .gguf path (or COS_LOCAL_MODEL).",
    ),
]
ChromaOpt = Annotated[
    str | None,
    typer.Option("--chroma-url", help="Use a Chroma server (http://HOST:PORT) for vectors."),
]

StoreUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--store-url",
        envvar="COS_STORE_URL",
        help="The store: sqlite:///PATH (default: a file in the index) or "
        "postgresql://USER@HOST/DB (password from the URL, PGPASSWORD or ~/.pgpass; "
        "never written to the index). Or COS_STORE_URL.",
        show_default=False,
    ),
]

# The hit rule's options, shared by `cos query` and `cos eval` (defaults: cos_integrations.defaults)
ThresholdOpt = Annotated[
    float | None,
    typer.Option(
        help="Summary similarity needed to ask the judge (default: the index's calibrated "
        "threshold, else 0.80)."
    ),
]
HitContextOpt = Annotated[
    str | None,
    typer.Option(
        help="What the judge reads: summaries, best, best+chunk or focused (default: the "
        "product's)."
    ),
]
TeachOpt = Annotated[
    str,
    typer.Option(
        help="How a refinement round teaches a summary a missed query: extract (append the "
        "source's sentence that answers it), rewrite (the model rewrites) or both (extract, "
        "then rewrite)."
    ),
]
RejectEchoOpt = Annotated[
    bool, typer.Option(help="An answer made of the question's own words is a miss.")
]
RequireSupportOpt = Annotated[
    bool, typer.Option(help="One context sentence must hold the answer and the question.")
]
VerifyChunkOpt = Annotated[
    bool, typer.Option(help="A hit's answer must be in its document's best source chunk.")
]
VerifyRouteOpt = Annotated[
    bool | None,
    typer.Option(
        "--verify-route/--no-verify-route",
        help="Ask the judge only when the best summary's document also holds the top "
        "source chunk (default: on with --judge llm).",
        show_default=False,
    ),
]


def setup_logging(verbose: bool) -> None:
    """INFO with ``-v``, WARNING otherwise; HTTP and Chroma loggers stay at WARNING."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    for noisy in ("httpx", "httpx2", "openai", "chromadb"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def make_embedder(kind: str):
    """The embedder named on the command line: ``e5`` (local) or ``hashing``."""
    from ..embeddings import HashingEmbedder, LocalEmbedder

    if kind == "e5":
        return LocalEmbedder()
    if kind == "hashing":
        return HashingEmbedder()
    raise typer.BadParameter(f"unknown embedder {kind!r}: use e5 or hashing")


def open_index(
    index: Path,
    *,
    chroma_url: str | None = None,
    create: bool = False,
    store_url: str | None = None,
    **kw,
):
    """Open (or with ``create`` make) the index at ``index``; a missing index, a store that
    cannot be opened (unreachable, wrong password, no schema, newer schema) exits with 2,
    with one line naming the store URL without its password."""
    from ..db import StoreError
    from ..index import CoSIndex

    try:
        return CoSIndex(index, chroma_url=chroma_url, create=create, store_url=store_url, **kw)
    except (FileNotFoundError, StoreError) as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from exc


def progress_bar() -> Progress:
    """The progress bar of long commands (ingest, eval), on stdout."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )
