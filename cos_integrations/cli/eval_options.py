"""The options of ``cos eval`` (:mod:`cos_integrations.cli.evaluate`), by what they set:
one ``--help`` panel each.

Examples:
    >>> from cos_integrations.cli.eval_options import StreamOpt
    >>> StreamOpt.__metadata__[0].rich_help_panel
    'A stream of asks where questions come back (--stream N)'
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cos_integrations.defaults import PresetChoice

__all__ = [
    "DataOpt",
    "OutOpt",
    "LimitOpt",
    "DistractorsOpt",
    "MethodsOpt",
    "HeldoutOpt",
    "TrainOpt",
    "ValOpt",
    "IterationsOpt",
    "PerIterationOpt",
    "WordsOpt",
    "ContextOpt",
    "PresetOpt",
    "OracleOpt",
    "RefineFromTrafficOpt",
    "KOpt",
    "SummaryMethodOpt",
    "SummariesFromOpt",
    "DeepenOpt",
    "RepeatTrafficOpt",
    "ParaphrasesOpt",
    "RoutingCheckOpt",
    "HitAblationOpt",
    "TestHalfOpt",
    "AnswerCacheOpt",
    "MaxErrorOpt",
    "RouterOpt",
    "StreamOpt",
    "MixOpt",
    "StreamSeedOpt",
    "RefineEveryOpt",
    "RefineMinAsksOpt",
    "RewordingsOpt",
    "CallRecordOpt",
    "ConcurrencyOpt",
    "PlotOpt",
    "VerboseOpt",
]

# The options of `cos eval`, by what they set (one --help panel each).
DATA, SUMMARISERS = "What is evaluated", "Summarisers (one CoSConfig)"
RETRIEVAL, RUN = "Retrieval methods (one RetrievalEvalOptions)", "The run"
# What is evaluated:
DataOpt = Annotated[
    Path, typer.Option("--data", help="JSONL: doc_id, title, text, qas.", rich_help_panel=DATA)
]
OutOpt = Annotated[Path, typer.Option("--out", help="Results JSON.", rich_help_panel=DATA)]
LimitOpt = Annotated[int | None, typer.Option(help="First N documents.", rich_help_panel=DATA)]
DistractorsOpt = Annotated[
    Path | None,
    typer.Option(
        help="rag/fallback/peers: JSONL of documents indexed beside --data and never "
        "asked about (a collection of real size); their summaries come from the same "
        "strategies or --summaries-from.",
        rich_help_panel=DATA,
    ),
]
MethodsOpt = Annotated[
    str,
    typer.Option(
        help="Comma-separated methods (default: the product beside plain chunk RAG, in "
        "rank and in document order). Retrieval: fallback, rag, rag-focused, rag-ordered, "
        "rag-contextual, right-doc; on a --stream, fallback+llamaindex and "
        "fallback+langchain (the product through CoSQueryEngine / create_cos_qa_chain, "
        "tokens counted by the frameworks' callbacks); peers (the 'peers' extra): "
        "doc-summary, raptor, multi-vector, parent-doc; summary methods: cos, zero-shot, "
        "density, content, reference, ...",
        rich_help_panel=DATA,
    ),
]
HeldoutOpt = Annotated[
    int, typer.Option(help="Human test questions per doc.", rich_help_panel=DATA)
]
# The summarisers (one CoSConfig: the preset, with the options given set over it):
TrainOpt = Annotated[
    int | None,
    typer.Option(help="Synthetic refinement questions.", rich_help_panel=SUMMARISERS),
]
ValOpt = Annotated[
    int | None,
    typer.Option(help="Synthetic validation questions.", rich_help_panel=SUMMARISERS),
]
IterationsOpt = Annotated[
    int | None, typer.Option(help="CoS iterations (i).", rich_help_panel=SUMMARISERS)
]
PerIterationOpt = Annotated[int | None, typer.Option(help="iq.", rich_help_panel=SUMMARISERS)]
WordsOpt = Annotated[
    int | None, typer.Option(help="Summary length budget.", rich_help_panel=SUMMARISERS)
]
ContextOpt = Annotated[
    int | None,
    typer.Option(
        help="Model context; longer documents are split into sections.", rich_help_panel=SUMMARISERS
    ),
]
PresetOpt = Annotated[
    PresetChoice | None,
    typer.Option(
        help="A named CoSConfig preset (default: tiered, what cos ingest ships; paper: the "
        "paper's loop); the summariser options above, where given, are set over it.",
        rich_help_panel=SUMMARISERS,
    ),
]
OracleOpt = Annotated[
    bool,
    typer.Option(
        help="cos: also answer the test questions from every iteration.",
        rich_help_panel=SUMMARISERS,
    ),
]
# The retrieval methods (one RetrievalEvalOptions, its HitRule from the rule levers):
RefineFromTrafficOpt = Annotated[
    bool,
    typer.Option(
        help="fallback: ask half the questions as traffic, refine, re-test the other half.",
        rich_help_panel=RETRIEVAL,
    ),
]
KOpt = Annotated[
    int, typer.Option("--k", min=1, help="rag/fallback: top-k.", rich_help_panel=RETRIEVAL)
]
SummaryMethodOpt = Annotated[
    str | None,
    typer.Option(
        help="rag/fallback: whose summaries the index holds (default: the preset's ingest "
        "strategy, as cos ingest would index); several, comma-separated, "
        "build one index each and one fallback[STRATEGY] row each.",
        rich_help_panel=RETRIEVAL,
    ),
]
SummariesFromOpt = Annotated[
    Path | None,
    typer.Option(
        help="rag/fallback: reuse the summaries recorded in this .docs.jsonl "
        "(or its packed .docs.jsonl.gz).",
        rich_help_panel=RETRIEVAL,
    ),
]
DeepenOpt = Annotated[
    str | None,
    typer.Option(
        help="refine-from-traffic: then run cos or cos-extract rounds on the documents "
        "that got traffic (the tiered mode).",
        rich_help_panel=RETRIEVAL,
    ),
]
RepeatTrafficOpt = Annotated[
    bool,
    typer.Option(
        help="refine-from-traffic: then ask the traffic questions again, and a "
        "model-written paraphrase of each.",
        rich_help_panel=RETRIEVAL,
    ),
]
ParaphrasesOpt = Annotated[
    bool,
    typer.Option(
        help="repeat-traffic: ask a model-written paraphrase of each traffic question too.",
        rich_help_panel=RETRIEVAL,
    ),
]
RoutingCheckOpt = Annotated[
    bool,
    typer.Option(
        help="fallback: the model judge's routing check (the best summary's document must "
        "hold the top source chunk); --no-routing-check only to measure what it does.",
        rich_help_panel=RETRIEVAL,
    ),
]
HitAblationOpt = Annotated[
    bool,
    typer.Option(
        help="fallback: answer each hit again from its summary sentences, its chunk "
        "sentences and its whole best chunk alone.",
        rich_help_panel=RETRIEVAL,
    ),
]
TestHalfOpt = Annotated[
    bool,
    typer.Option(
        "--test-half/--all-questions",
        help="rag/fallback/peers: ask only the second half of each document's questions; "
        "the first half calibrates fallback's threshold, as an index calibrates on the "
        "questions people asked (--all-questions: every question, the threshold given or "
        "the uncalibrated default).",
        rich_help_panel=RETRIEVAL,
    ),
]
AnswerCacheOpt = Annotated[
    Path | None,
    typer.Option(
        help="rag/fallback: JSONL cache of answers by exact prompt, across runs.",
        rich_help_panel=RETRIEVAL,
    ),
]
MaxErrorOpt = Annotated[
    float | None,
    typer.Option(
        "--max-error",
        min=0.0,
        max=1.0,
        help="fallback: the router's bound on summary answers that disagree with the "
        "source (default 0.02); 1 or more never checked: use --no-router.",
        rich_help_panel=RETRIEVAL,
    ),
]
RouterOpt = Annotated[
    bool,
    typer.Option(
        "--router/--no-router",
        help="fallback: learn from checks against the source where summaries may answer "
        "(--no-router: the hit rule alone decides, as before 0.3).",
        rich_help_panel=RETRIEVAL,
    ),
]
# The stream (cos eval --stream N):
STREAM = "A stream of asks where questions come back (--stream N)"
StreamOpt = Annotated[
    int | None,
    typer.Option(
        "--stream",
        min=1,
        help="Instead of each test question once: a stream of N asks (new questions, exact "
        "repeats, rewordings; earlier questions drawn by Zipf popularity) through every row: "
        "fallback, rag, rag-ordered, rag behind an exact-prompt cache and a semantic cache "
        "(its default bar and its best); --distractors make the collection.",
        rich_help_panel=STREAM,
    ),
]
MixOpt = Annotated[
    str,
    typer.Option(help="new/exact/reworded shares of the stream.", rich_help_panel=STREAM),
]
StreamSeedOpt = Annotated[int, typer.Option(help="The stream's draws.", rich_help_panel=STREAM)]
RefineEveryOpt = Annotated[
    int,
    typer.Option(
        min=0, help="fallback: a refine pass every N asks (0: none).", rich_help_panel=STREAM
    ),
]
RefineMinAsksOpt = Annotated[
    int,
    typer.Option(
        min=1,
        help="fallback: refine a question once it missed this often (2: when it came back).",
        rich_help_panel=STREAM,
    ),
]
RewordingsOpt = Annotated[
    Path | None,
    typer.Option(
        help="JSONL of rewordings by question (kept; default OUT.rewordings.jsonl): "
        "model-written where missing.",
        rich_help_panel=STREAM,
    ),
]
CallRecordOpt = Annotated[
    Path | None,
    typer.Option(
        help="JSONL of the stream's model calls by exact request (default OUT.calls.jsonl): "
        "a rerun replays and charges them.",
        rich_help_panel=STREAM,
    ),
]
# The run:
ConcurrencyOpt = Annotated[int, typer.Option(min=1, rich_help_panel=RUN)]
PlotOpt = Annotated[Path | None, typer.Option("--plot", help="PNG figure.", rich_help_panel=RUN)]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", rich_help_panel=RUN)]
