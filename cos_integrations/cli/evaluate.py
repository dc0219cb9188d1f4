"""``cos eval``: CoS against its baselines on a QA dataset (registered by the main CLI)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import NoReturn

import typer
from rich.markup import escape

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
from cos_integrations.cli.eval_options import (
    AnswerCacheOpt,
    CallRecordOpt,
    ConcurrencyOpt,
    ContextOpt,
    DataOpt,
    DeepenOpt,
    DistractorsOpt,
    HeldoutOpt,
    HitAblationOpt,
    IterationsOpt,
    KOpt,
    LimitOpt,
    MaxErrorOpt,
    MethodsOpt,
    MixOpt,
    OracleOpt,
    OutOpt,
    ParaphrasesOpt,
    PerIterationOpt,
    PlotOpt,
    PresetOpt,
    RefineEveryOpt,
    RefineFromTrafficOpt,
    RefineMinAsksOpt,
    RepeatTrafficOpt,
    RewordingsOpt,
    RouterOpt,
    RoutingCheckOpt,
    StreamOpt,
    StreamSeedOpt,
    SummariesFromOpt,
    SummaryMethodOpt,
    TestHalfOpt,
    TrainOpt,
    ValOpt,
    VerboseOpt,
    WordsOpt,
)
from cos_integrations.cli.eval_output import print_result
from cos_integrations.defaults import (
    DEFAULT_K,
    DEFAULT_PRESET,
    DEFAULT_REFINE_MIN_ASKS,
    DEFAULT_REFINE_RETARGET,
    DEFAULT_REFINE_TEACH,
)
from cos_integrations.research.jsonl import existing, read_jsonl

__all__ = ["app"]

app = typer.Typer()


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
    print_result(result)
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
