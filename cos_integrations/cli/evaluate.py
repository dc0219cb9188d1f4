"""``cos eval``: CoS against its baselines on a QA dataset (registered by the main CLI)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.markup import escape
from rich.table import Table

from cos_integrations.cli.common import (
    AnswerSimilarityOpt,
    BaseUrlOpt,
    FocusOpt,
    HitContextOpt,
    JudgeOpt,
    LocalOpt,
    ModelOpt,
    RetargetOpt,
    TeachOpt,
    ThresholdOpt,
    console,
    err,
    progress_bar,
    rule_levers,
    setup_logging,
)
from cos_integrations.defaults import (
    DEFAULT_K,
    DEFAULT_PRESET,
    DEFAULT_REFINE_MIN_ASKS,
    DEFAULT_REFINE_RETARGET,
    DEFAULT_REFINE_TEACH,
    PresetChoice,
)
from cos_integrations.research.jsonl import existing, read_jsonl

__all__ = ["app"]

app = typer.Typer()


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


@app.command("eval")
def eval_command(
    # what is evaluated
    data: DataOpt,
    out: OutOpt = Path("results.json"),
    limit: LimitOpt = None,
    distractors: DistractorsOpt = None,
    methods: MethodsOpt = "fallback,rag,rag-ordered",
    heldout_questions: HeldoutOpt = 16,
    # the summarisers
    train_questions: TrainOpt = None,
    val_questions: ValOpt = None,
    iterations: IterationsOpt = None,
    questions_per_iteration: PerIterationOpt = None,
    max_summary_words: WordsOpt = None,
    context_tokens: ContextOpt = None,
    preset: PresetOpt = None,
    oracle: OracleOpt = True,
    # the retrieval methods and their hit rule
    refine_from_traffic: RefineFromTrafficOpt = False,
    refine_teach: TeachOpt = DEFAULT_REFINE_TEACH,
    refine_retarget: RetargetOpt = DEFAULT_REFINE_RETARGET,
    k: KOpt = DEFAULT_K,
    threshold: ThresholdOpt = None,
    judge: JudgeOpt = None,
    hit_context: HitContextOpt = None,
    focus_sentences: FocusOpt = None,
    answer_similarity: AnswerSimilarityOpt = None,
    summary_method: SummaryMethodOpt = None,
    summaries_from: SummariesFromOpt = None,
    deepen: DeepenOpt = None,
    repeat_traffic: RepeatTrafficOpt = False,
    paraphrases: ParaphrasesOpt = True,
    routing_check: RoutingCheckOpt = True,
    hit_ablation: HitAblationOpt = False,
    test_half: TestHalfOpt = True,
    answer_cache: AnswerCacheOpt = None,
    max_error: MaxErrorOpt = None,
    router: RouterOpt = True,
    # the stream
    stream: StreamOpt = None,
    mix: MixOpt = "40/20/40",
    stream_seed: StreamSeedOpt = 0,
    refine_every: RefineEveryOpt = 10,
    refine_min_asks: RefineMinAsksOpt = DEFAULT_REFINE_MIN_ASKS,
    rewordings: RewordingsOpt = None,
    call_record: CallRecordOpt = None,
    # the run
    concurrency: ConcurrencyOpt = 1,
    plot: PlotOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    local_model: LocalOpt = None,
    verbose: VerboseOpt = False,
) -> None:
    """The product beside plain chunk RAG on a QA dataset, with the shipped defaults (the
    tiered ingest's summaries, the measured hit rule, k = 2); or any summary method, retriever
    or peer named in --methods."""
    setup_logging(verbose)
    docs, extra = _load_documents(data, limit, distractors, heldout_questions)
    _check_records(summaries_from, answer_cache)
    try:
        config = _config(
            preset,
            context_tokens=context_tokens,
            max_summary_words=max_summary_words,
            iterations=iterations,
            questions_per_iteration=questions_per_iteration,
            train_questions=train_questions,
            val_questions=val_questions,
        )
        retrieval = _retrieval_options(
            k=k,
            levers=rule_levers(
                judge,
                threshold,
                hit_context,
                answer_similarity,
                focus_sentences,
            ),
            summary_method=summary_method or config.strategy,
            summaries_from=str(summaries_from) if summaries_from else None,
            test_half=test_half,
            hit_ablation=hit_ablation,
            deepen=deepen,
            repeat_traffic=repeat_traffic,
            paraphrase_traffic=paraphrases,
            routing_check=routing_check,
            refine_teach=refine_teach,
            refine_retarget=refine_retarget,
            max_error=_max_error(router, max_error),
            stream=_stream_options(
                stream, mix, stream_seed, refine_every, refine_min_asks, rewordings, call_record
            ),
        )
    except ValueError as exc:
        _refuse(str(exc), exc)
    run = {
        "methods": [m.strip() for m in methods.split(",") if m.strip()],
        "config": config,
        "out": out,
        "dataset": str(data),
        "concurrency": concurrency,
        "refine_from_traffic": refine_from_traffic,
        "retrieval": retrieval,
        "answer_cache": answer_cache,
        "oracle": oracle,
        "distractors": extra,
    }
    result = _run(docs, run, model=model, base_url=base_url, local_model=local_model)
    _print_result(result)
    console.print(f"wrote {out}")
    _finish(result, plot, out)


def _max_error(router: bool, max_error: float | None) -> float | None:
    """The router's bound (``None``: no router); ``ValueError`` when both are given."""
    from cos_integrations.serving.router import DEFAULT_MAX_ERROR

    if not router:
        if max_error is not None:
            raise ValueError("--max-error sets the router's bound: it cannot go with --no-router")
        return None
    if max_error is not None and not 0.0 < max_error < 1.0:
        raise ValueError(f"--max-error must be between 0 and 1 (exclusive), not {max_error}")
    return DEFAULT_MAX_ERROR if max_error is None else max_error


def _stream_options(
    asks: int | None,
    mix: str,
    seed: int,
    refine_every: int,
    refine_min_asks: int,
    rewordings: Path | None,
    calls: Path | None,
):
    """The stream's options, ``None`` without ``--stream``; ``ValueError`` on a bad mix."""
    from cos_integrations.research.stream_eval import StreamOptions
    from cos_integrations.research.streams import parse_mix

    if asks is None:
        return None
    return StreamOptions(
        asks=asks,
        mix=parse_mix(mix),
        seed=seed,
        refine_every=refine_every,
        refine_min_asks=refine_min_asks,
        rewordings=str(rewordings) if rewordings else None,
        calls=str(calls) if calls else None,
    )


def _refuse(message: str, cause: BaseException | None = None) -> NoReturn:
    """A usage error: said in red, exit 2 (nothing was run)."""
    err.print(f"[red]error:[/] {escape(message)}")
    raise typer.Exit(2) from cause


def _check_records(summaries_from: Path | None, answer_cache: Path | None) -> None:
    """Read the recorded summaries and the answer cache before the model starts: a missing
    file or a bad line is said now, not after the summaries were made."""
    if summaries_from is not None and existing(summaries_from) is None:
        _refuse(f"--summaries-from {summaries_from}: no such file (nor {summaries_from}.gz)")
    for flag, path in (("--summaries-from", summaries_from), ("--answer-cache", answer_cache)):
        try:
            if path is not None:
                read_jsonl(path)
        except (ValueError, OSError) as exc:
            _refuse(f"{flag}: {exc}", exc)


def _load_documents(data: Path, limit: int | None, distractors: Path | None, heldout: int):
    """The questioned documents (their first ``heldout`` questions) and the distractors."""
    from cos_integrations.research.datasets import DatasetError, load_dataset

    try:
        docs = load_dataset(data, limit=limit)
        extra = load_dataset(distractors, questions=False) if distractors else []
    except (DatasetError, OSError) as exc:
        _refuse(str(exc), exc)
    clash = {d.doc_id for d in docs} & {d.doc_id for d in extra}
    if clash:
        _refuse(f"--distractors repeats --data's documents: {sorted(clash)[:5]}")
    for d in docs:
        d.qas = d.qas[:heldout]
    return docs, extra


def _retrieval_options(*, levers: dict, **options):
    """How fallback, rag and right-doc run: fallback's rule is the product's, with the model
    judge, changed by the given levers; ``ValueError`` on a bad choice."""
    from cos_integrations.research.evaluation import RetrievalEvalOptions
    from cos_integrations.serving.hit_rule import HitRule

    return RetrievalEvalOptions(rule=HitRule(judge="llm").with_options(**levers), **options)


def _run(docs: list, run: dict, *, model, base_url, local_model) -> dict:
    """``run_eval`` on the chosen model, with a progress line per finished record."""
    from cos_integrations.embedded.runtime import describe_choice, open_model
    from cos_integrations.research.evaluation import run_eval
    from cos_integrations.research.peers import PeerUnavailable

    n_ctx = run["config"].context_tokens
    with open_model(
        model, base_url=base_url, local_model=local_model, n_ctx=n_ctx, echo=console.print
    ) as llm:
        name = getattr(llm, "name", type(llm).__name__)
        if describe_choice(model, base_url, local_model) != "endpoint":
            # the embedded server's port changes per run; the name must not, or resume breaks
            name = f"{getattr(llm, 'model', name)} (embedded)"
        # the bar counts the rows asked for, each questioned document's (a fallback row a
        # summary strategy); the index's own summaries and the distractors' print, uncounted
        methods, questioned = run["methods"], {d.doc_id for d in docs}
        rows = len(methods) - 1 + (len(run["retrieval"].sources) if "fallback" in methods else 1)
        with progress_bar() as progress:
            task = progress.add_task("evaluating", total=len(docs) * rows)

            def tick(rec: dict) -> None:
                if rec["doc_id"] in questioned and rec["method"].split("[")[0] in methods:
                    progress.advance(task)
                f1 = rec.get("heldout_f1")
                # a distractor's summary is indexed, never scored
                said = "indexed" if f1 is None else f"F1 {f1:.3f}"
                progress.console.print(f"  {rec['doc_id']} {escape(rec['method'])}: {said}")

            def asked(row: str, done: int, total: int) -> None:
                if done % 50 == 0 or done == total:
                    progress.console.print(f"  {escape(row)}: {done}/{total} asks")

            try:
                return asyncio.run(
                    run_eval(llm, docs, model_name=name, on_record=tick, on_progress=asked, **run)
                )
            except (ValueError, PeerUnavailable) as exc:
                _refuse(str(exc), exc)


def _finish(result: dict, plot: Path | None, out: Path) -> None:
    """The plot, then what failed (exit 1: a re-run retries only that)."""
    if plot and result.get("stream"):
        from cos_integrations.research.stream_eval import plot_stream

        plot_stream(result["stream"], out.with_suffix(out.suffix + ".stream-rows.jsonl"), plot)
        console.print(f"wrote {plot}")
    elif plot:
        from cos_integrations.research.evaluation import plot as draw

        draw(result, plot)
        console.print(f"wrote {plot}")
    for e in result.get("errors", []):
        err.print(f"[red]failed:[/] {e['doc_id']} {e['method']}: {escape(str(e['error']))}")
    if result.get("errors"):
        err.print("re-run the same command to retry only what failed")
        raise typer.Exit(1)


def _config(preset: str | None, **options: int | None):
    """The summarisers' config: the named preset (default: the shipped one, what ``cos
    ingest`` summarises with) with the options that were given set over it; ``ValueError``
    when they do not fit.

    Examples:
        >>> _config(None, max_summary_words=None).max_summary_words
        120
        >>> _config("paper", iterations=2).iterations
        2
    """
    from cos_integrations.summarize.config import CoSConfig

    given = {name: value for name, value in options.items() if value is not None}
    return CoSConfig.preset(preset or DEFAULT_PRESET, **given)


def _print_result(result: dict) -> None:
    """The stream's table; or the summary methods' table, the retrieval table and the
    hit-context ablation."""
    if result.get("stream"):
        from cos_integrations.research.stream_eval import (
            STREAM_COLUMNS,
            framework_lines,
            stream_table,
        )

        got = result["stream"]
        title = (
            f"{got['asks']} asks ({' / '.join(str(v) for v in got['kinds'].values())} new / "
            f"exact / reworded) over {got['documents']} documents"
        )
        table = Table(*STREAM_COLUMNS, title=title)
        for row in stream_table(got):
            table.add_row(*(escape(c) for c in row))
        console.print(table)
        refine = got.get("refine") or {}
        if refine.get("jobs"):
            console.print(
                f"fallback's refine jobs: {refine['jobs']} ({refine['outcomes']}), "
                f"{refine['prompt_tokens']:,} prompt tokens (in its row)"
            )
        for line in framework_lines(got.get("frameworks") or {}):
            console.print(line)
        return
    from cos_integrations.research.evaluation import (
        ABLATION_COLUMNS,
        RETRIEVAL_COLUMNS,
        ablation_table,
        is_retrieval,
        retrieval_table,
    )

    table = Table(
        "method",
        "docs",
        "held-out F1",
        "EM",
        "summary tok",
        "source tok",
        "calls/doc",
        "prompt tok/doc",
        "cached tok/doc",
        "s/doc",
        "extra",
    )
    for method, m in result["methods"].items():
        if is_retrieval(method):
            continue
        extra = ""
        if "oracle_heldout_f1" in m:
            extra = f"oracle F1 {m['oracle_heldout_f1']:.3f}"
        table.add_row(
            method,
            str(m.get("docs", 0)),
            f"{m.get('heldout_f1', 0):.3f}",
            f"{m.get('heldout_em', 0):.3f}",
            f"{m.get('summary_tokens', 0):.0f}",
            f"{m.get('source_tokens', 0):.0f}",
            f"{m.get('calls_per_doc', 0):.1f}",
            f"{m.get('prompt_tokens_per_doc', 0):.0f}",
            f"{m.get('cached_tokens_per_doc', 0):.0f}",
            f"{m.get('seconds_per_doc', 0):.1f}",
            extra,
        )
    if table.row_count:
        console.print(table)
    rows = retrieval_table(result["methods"])
    if rows:
        # one column a method, one row a measure (those some method has): it reads at any
        # width, where the 17 measures side by side did not fit a terminal
        side = Table("", *(escape(row[0]) for row in rows), title="retrieval, per question")
        for i, measure in enumerate(RETRIEVAL_COLUMNS[1:], 1):
            cells = [row[i] for row in rows]
            if any(cells):
                side.add_row(measure, *(escape(c) for c in cells))
        console.print(side)
    ablation = ablation_table(result["methods"])
    if ablation:
        cut = Table(*ABLATION_COLUMNS, title="the same hits, answered from each part (F1)")
        for row in ablation:
            cut.add_row(*(escape(c) for c in row))
        console.print(cut)
