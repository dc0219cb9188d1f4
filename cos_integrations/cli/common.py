"""What every ``cos`` command shares: the consoles, the common options and the helpers that
open an index, pick an embedder, set up logging and draw progress bars."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from cos_integrations.defaults import (
    HitContext,
    Judge,
    RefineTeach,
)

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
    "JudgeOpt",
    "HitContextOpt",
    "TeachOpt",
    "RetargetOpt",
    "MinAsksOpt",
    "AnswerSimilarityOpt",
    "rule_levers",
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
HIT_RULE = "Hit rule (one HitRule)"
ThresholdOpt = Annotated[
    float | None,
    typer.Option(
        help="Summary similarity needed to ask the judge (default: the index's calibrated "
        "threshold, else 0.80).",
        rich_help_panel=HIT_RULE,
    ),
]
JudgeOpt = Annotated[
    Judge | None,
    typer.Option(
        help="llm (the model must answer from the hit context with a quote that passes the "
        "grounding checks) or score (the similarity alone decides, no model). Default: the "
        "index's recorded rule; its judge left out, llm (the CLI always has a model).",
        rich_help_panel=HIT_RULE,
    ),
]
HitContextOpt = Annotated[
    HitContext | None,
    typer.Option(
        help="What the judge reads and a hit returns (default: focused with --judge llm, "
        "best+chunk with --judge score).",
        rich_help_panel=HIT_RULE,
    ),
]
FocusOpt = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="The most sentences the focused hit context keeps (windows of two; default 4).",
        rich_help_panel=HIT_RULE,
    ),
]
TeachOpt = Annotated[
    RefineTeach,
    typer.Option(
        help="How a refinement round teaches a summary a missed query: extract (append the "
        "source's sentence that answers it), rewrite (the model rewrites) or both (extract, "
        "then rewrite).",
    ),
]
RetargetOpt = Annotated[
    int,
    typer.Option(
        min=1,
        help="In how many documents a refine job looks for a missed query's answer: its "
        "own, then, while the sources are silent, the next of the collection's chunk "
        "ranking for the query (1: its own only).",
    ),
]
MinAsksOpt = Annotated[
    int,
    typer.Option(
        min=1,
        help="Take a job once its question missed this often: 2 where a question came back "
        "without a verified answer (BENCHMARKS.md: a job on every first miss cost more "
        "than the answers), 1 on its first miss.",
    ),
]
AnswerSimilarityOpt = Annotated[
    float | None,
    typer.Option(
        "--answer-similarity",
        min=0.0,
        max=1.0,
        help="A question this close (cosine) to a verified answer's question is served it "
        "with no model call (default: the rule's, 0.98); from 0.90 on, the answer the "
        "question gets from the source raises the entry's bar when it differs.",
        show_default=False,
        rich_help_panel=HIT_RULE,
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
    from cos_integrations.embedded.embeddings import HashingEmbedder, LocalEmbedder

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
    from cos_integrations.serving.index import CoSIndex
    from cos_integrations.storage.db import StoreError

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


def rule_levers(
    judge: str | None,
    threshold: float | None,
    hit_context: str | None,
    answer_similarity: float | None = None,
    focus_sentences: int | None = None,
) -> dict[str, Any]:
    """The hit-rule options of ``cos query`` and ``cos eval`` as ``HitRule`` fields, for
    ``rule.with_options(**...)`` (an option left out, ``None``, keeps the rule's value)."""
    return {
        "judge": judge,
        "threshold": threshold,
        "hit_context": hit_context,
        "answer_similarity": answer_similarity,
        "focus_sentences": focus_sentences,
    }
