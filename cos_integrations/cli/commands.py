"""The core ``cos`` commands: ingest, query, refine, serve-local."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from cos_integrations.cli.common import (
    AnswerSimilarityOpt,
    BaseUrlOpt,
    ChromaOpt,
    FocusOpt,
    HitContextOpt,
    IndexOpt,
    JudgeOpt,
    LocalOpt,
    MinAsksOpt,
    ModelOpt,
    RetargetOpt,
    StoreUrlOpt,
    TeachOpt,
    ThresholdOpt,
    console,
    err,
    make_embedder,
    open_index,
    progress_bar,
    rule_levers,
    setup_logging,
)
from cos_integrations.defaults import (
    DEFAULT_DEEPEN_STRATEGY,
    DEFAULT_K,
    DEFAULT_PRESET,
    DEFAULT_REFINE_MIN_ASKS,
    DEFAULT_REFINE_RETARGET,
    DEFAULT_REFINE_TEACH,
    DeepenStrategy,
    EmbedderName,
    PresetChoice,
    Strategy,
)

if TYPE_CHECKING:
    from cos_integrations.serving.retrieval import RetrievalResult

__all__ = ["app"]

app = typer.Typer()


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders (recursive).")],
    index: IndexOpt = Path("index"),
    store_url: StoreUrlOpt = None,
    preset: Annotated[
        PresetChoice | None,
        typer.Option(
            help="tiered: a zero-shot summary now, Chain of "
            "Summaries rounds later where traffic is (cos refine --deepen N); cos: the loop "
            "now (about 8 calls a document); cos-fast: fewer rounds of it; paper: the "
            "paper's setting (default and fast: deprecated names of cos and cos-fast). "
            f"Default: the existing index's own config, else {DEFAULT_PRESET}.",
            show_default=False,
        ),
    ] = None,
    strategy: Annotated[
        Strategy | None, typer.Option(help="How a summary is made (default: the preset's).")
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Documents in flight.")] = 1,
    embedder: Annotated[EmbedderName, typer.Option(help="e5 (local) or hashing (lexical).")] = "e5",
    follow_symlinks: Annotated[bool, typer.Option(help="Follow links out of folders.")] = False,
    sections: Annotated[
        bool | None,
        typer.Option(
            "--sections/--whole-pages",
            help="Split Markdown and HTML pages at their headings (h1-h3): one document per "
            "section, cited as PAGE#anchor; or one document a page. HTML is read from its "
            "main content either way (no navigation, sidebars or footers). Default: what "
            "the index recorded, else sections (an index made before 0.2: whole pages).",
            show_default=False,
        ),
    ] = None,
    retire_missing: Annotated[
        bool,
        typer.Option(
            help="Retire the indexed documents of the given folders (or sectioned pages) "
            "that are gone: their vectors leave the index, their history stays."
        ),
    ] = True,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    local_model: LocalOpt = None,
    chroma_url: ChromaOpt = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Summarise documents with CoS into an index (store + Chroma); unchanged files are skipped.

    Re-running on the same tree re-summarises only what changed (by content hash) and
    retires what is gone (--retire-missing)."""
    from cos_integrations.storage.store import content_hash
    from cos_integrations.summarize.engine import ChainOfSummaries

    setup_logging(verbose)
    config, preset = _ingest_config(index, preset, strategy)
    idx = open_index(
        index,
        chroma_url=chroma_url,
        store_url=store_url,
        create=True,
        config=config,
        embedder=make_embedder(embedder) if not (index / "manifest.json").exists() else None,
    )
    sections = _page_sections(idx, sections)
    docs, problems = _load(paths, follow_symlinks=follow_symlinks, sections=sections)
    idx.record_page_sections(sections)
    cfg_hash = config.config_hash()
    pending = [
        d for d in docs if not idx.store.is_current(d.doc_id, content_hash(d.text), cfg_hash)
    ]
    console.print(
        f"{len(docs)} documents found, {len(docs) - len(pending)} unchanged, "
        f"{len(pending)} to summarise (preset {preset}, strategy {config.strategy})"
    )
    if not pending:
        report = asyncio.run(idx.aingest(docs, ChainOfSummaries(_NoModel(), config)))
    else:
        model_choice = {"model": model, "base_url": base_url, "local_model": local_model}
        report = _summarise(idx, docs, len(pending), config, concurrency, model_choice)
    _print_ingest(report, idx)
    if retire_missing:
        _retire_missing(idx, paths, docs, problems, sections)
    if report.failed or any(p.error for p in problems):
        raise typer.Exit(1)


def _page_sections(idx, sections: bool | None) -> bool:
    """Whether pages are read as sections: the option, else what the index recorded, else
    (an index made before 0.2 recorded nothing) what its documents say - sections if one
    has a ``#anchor`` id or there are none yet, whole pages otherwise, as it was built."""
    if sections is not None:
        return sections
    if idx.page_sections is not None:
        return idx.page_sections
    ids = [d.doc_id for d in idx.store.documents()]
    return not ids or any("#" in i for i in ids)


def _ingest_config(index: Path, preset: str | None, strategy: str | None):
    """The config to summarise with, and how it was chosen. An index keeps answering the
    way it was built: without ``--preset``, a re-ingest uses the config its manifest
    records (a new default must not re-summarise everything)."""
    from cos_integrations.serving.index import read_manifest
    from cos_integrations.summarize.config import CoSConfig

    overrides = {"strategy": strategy} if strategy else {}
    recorded = (read_manifest(index) or {}).get("config") if preset is None else None
    try:
        if recorded:
            return CoSConfig.model_validate({**recorded, **overrides}), "as recorded in the index"
        preset = preset or DEFAULT_PRESET
        return CoSConfig.preset(preset, **overrides), preset
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc


def _load(paths: list[Path], *, follow_symlinks: bool, sections: bool):
    """The documents under ``paths``, and the problems: each said (red for errors, yellow
    for skipped files and a document's warnings)."""
    from cos_integrations.loaders import load_paths

    docs, problems = load_paths(list(paths), follow_symlinks=follow_symlinks, sections=sections)
    for p in problems:
        colour = "red" if p.error else "yellow"
        what = "error" if p.error else "skipped"
        err.print(f"[{colour}]{what}:[/] {escape(p.path)}: {escape(p.reason)}")
    for d in docs:
        for w in d.warnings:
            err.print(f"[yellow]warning:[/] {escape(d.source)}: {escape(w)}")
    return docs, problems


def _summarise(idx, docs: list, pending: int, config, concurrency: int, model_choice: dict):
    """Ingest ``docs`` on the chosen model, a progress line per summarised document."""
    from cos_integrations.embedded.runtime import open_model
    from cos_integrations.summarize.engine import ChainOfSummaries

    with open_model(**model_choice, n_ctx=config.context_tokens, echo=console.print) as llm:
        engine = ChainOfSummaries(llm, config)
        with progress_bar() as progress:
            task = progress.add_task("summarising", total=pending)

            def tick(doc_id: str, outcome: str) -> None:
                if outcome != "unchanged":
                    progress.advance(task)
                    progress.console.print(f"  {outcome}: {doc_id}")

            t0 = time.monotonic()
            report = asyncio.run(
                idx.aingest(docs, engine, concurrency=concurrency, on_progress=tick)
            )
            console.print(f"done in {time.monotonic() - t0:.0f}s")
    return report


def _retire_missing(idx, paths, docs, problems, sections: bool) -> None:
    """Retire what the ingested folders (or sectioned pages) no longer hold; nothing when a
    file failed to load (a read error must not retire its documents)."""
    from cos_integrations.loaders import doc_id_for

    prefixes = [
        f"{p.absolute().name}/" if p.is_dir() else f"{doc_id_for(p)}#"
        for p in paths
        if p.is_dir() or sections
    ]
    if not prefixes:
        return
    if any(p.error for p in problems):
        err.print("[yellow]not retiring missing documents:[/] some files failed to load")
        return
    gone = idx.retire_missing(prefixes, [d.doc_id for d in docs])
    for doc_id in gone:
        console.print(f"  retired: {escape(doc_id)} (gone from the source; history kept)")


class _NoModel:
    """Stands in when every document is unchanged: calling it is a bug."""

    async def chat(self, *a, **k):  # pragma: no cover - guarded by the caller
        raise RuntimeError("no model call expected: every document is unchanged")


def _print_ingest(report, idx) -> None:
    table = Table("document", "outcome", "summary tokens", "source tokens", "calls", "val F1")
    for doc_id, res in report.results.items():
        val = res.val_score
        table.add_row(
            doc_id,
            "summarized",
            str(res.summary_tokens),
            str(res.source_tokens),
            str(res.usage.calls),
            f"{val:.2f}" if val is not None else "-",
        )
    for doc_id in report.unchanged:
        table.add_row(doc_id, "unchanged", "", "", "0", "")
    for doc_id, why in report.failed.items():
        table.add_row(doc_id, f"[red]failed[/]: {escape(why[:80])}", "", "", "", "")
    for doc_id, why in report.skipped.items():
        table.add_row(doc_id, f"[yellow]skipped[/]: {why}", "", "", "", "")
    console.print(table)
    if report.repaired:
        console.print(f"repaired vectors of {len(report.repaired)} documents")
    console.print(
        f"index: {idx.path} ({idx.summaries.count()} summaries, {idx.chunks.count()} source chunks)"
    )


@app.command()
def query(
    text: Annotated[str, typer.Argument(help="The question.")],
    index: IndexOpt = Path("index"),
    store_url: StoreUrlOpt = None,
    k: Annotated[int, typer.Option("--k", min=1, help="Results to return.")] = DEFAULT_K,
    answer: Annotated[
        bool, typer.Option("--answer", help="Answer from what was retrieved.")
    ] = False,
    judge: JudgeOpt = None,
    threshold: ThresholdOpt = None,
    hit_context: HitContextOpt = None,
    focus_sentences: FocusOpt = None,
    answer_similarity: AnswerSimilarityOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    local_model: LocalOpt = None,
    chroma_url: ChromaOpt = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Search the summaries; on a miss, fall back to full text and queue a refinement.

    The hit rule is the index's (the one it was calibrated with), with the options given
    here changed; its judge is the model's with --answer (a model is opened), else the
    similarity's, unless --judge says."""
    from cos_integrations.embedded.runtime import open_model
    from cos_integrations.serving.retrieval import FallbackRetriever, answer_from

    setup_logging(verbose)
    idx = open_index(index, store_url=store_url, chroma_url=chroma_url)
    levers = rule_levers(
        judge,
        threshold,
        hit_context,
        answer_similarity,
        focus_sentences,
    )
    rule = idx.hit_rule.with_options(**levers)
    # the CLI always has a model to open (the embedded one at least), so the judge left out
    # is the model's, as in every retriever given a model (HitRule.for_model); --judge score
    # decides by the similarity alone, with no model unless --answer
    needs_model = answer or rule.for_model(True).judge == "llm"

    def show(llm) -> None:
        res = FallbackRetriever(idx, llm=llm, k=k, rule=rule).retrieve(text)
        _print_retrieval(text, res)
        if answer and llm is not None:
            reply = res.answer
            if reply is None and res.items:
                reply, _ = asyncio.run(answer_from(llm, text, res.items))
            _print_answer(reply, res)

    if needs_model:
        with open_model(
            model, base_url=base_url, local_model=local_model, echo=console.print
        ) as llm:
            show(llm)
    else:
        show(None)


def _print_retrieval(text: str, res: RetrievalResult) -> None:
    """A query's decision, what it returned, its citations and any queued refine job."""
    label = "[green]HIT[/]" if res.hit else "[red]MISS[/]"
    console.print(f"{label} {escape(repr(text))}: {escape(res.reason)}")
    for h in res.items:
        snippet = " ".join(h.text.split())[:160]
        console.print(
            f"  \\[{h.kind}] {escape(str(h.metadata.get('source') or h.doc_id))} "
            f"(score {h.score:.3f}): {escape(snippet)}"
        )
    for citation in res.citations:
        console.print(f"  cites: {escape(str(citation))}")
    if res.not_in_source:
        console.print("  not in source: a refinement found the source silent on this")
    if res.job_id is not None:
        doc = res.items[0].doc_id if res.items else "?"
        console.print(f"  queued refine job {res.job_id} for {doc}")


def _print_answer(reply: str | None, res: RetrievalResult) -> None:
    """The answer (or that the index has none), its source and what it was read from."""
    console.print(f"answer: {escape(reply or 'not found in the index')}")
    for citation in res.citations[:1] if reply else []:
        console.print(f"source: {escape(str(citation))}")
    kind = "passages of the hit context" if res.hit else "source chunks"
    console.print(f"context: {len(res.items)} {kind}, ~{res.context_tokens} tokens")


@app.command()
def refine(
    index: IndexOpt = Path("index"),
    store_url: StoreUrlOpt = None,
    once: Annotated[
        bool, typer.Option("--once", hidden=True, help="Process the queue, then exit (default).")
    ] = False,
    watch: Annotated[bool, typer.Option("--watch", help="Keep polling for new jobs.")] = False,
    workers: Annotated[int, typer.Option(min=1, help="Worker processes.")] = 1,
    poll: Annotated[float, typer.Option(help="Seconds between polls with --watch.")] = 5.0,
    teach: TeachOpt = DEFAULT_REFINE_TEACH,
    retarget: RetargetOpt = DEFAULT_REFINE_RETARGET,
    min_asks: MinAsksOpt = DEFAULT_REFINE_MIN_ASKS,
    deepen: Annotated[
        int,
        typer.Option(
            min=0,
            help="Then run Chain of Summaries rounds on up to N documents that got traffic "
            "and have only a zero-shot summary (the tiered mode), most misses first.",
        ),
    ] = 0,
    deepen_strategy: Annotated[
        DeepenStrategy,
        typer.Option(help="--deepen rounds: the model's rewrites, or appended source sentences."),
    ] = DEFAULT_DEEPEN_STRATEGY,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    local_model: LocalOpt = None,
    chroma_url: ChromaOpt = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Run queued refinement jobs (one round each) and publish the summaries that improved.

    Without ``--watch`` the queue is processed once and the command exits."""
    setup_logging(verbose)
    if once and watch:
        raise typer.BadParameter("--once and --watch exclude each other")
    choice = {"model": model, "base_url": base_url, "local_model": local_model}
    if workers > 1:
        if deepen:
            raise typer.BadParameter("--deepen runs in one process: drop --workers")
        args = ["--index", str(index), "--poll", str(poll), "--teach", teach]
        args += ["--retarget", str(retarget), "--min-asks", str(min_asks)]
        args += ["--watch"] if watch else []
        for opt, val in [*choice.items(), ("chroma_url", chroma_url)]:
            if val:
                args += [f"--{opt.replace('_', '-')}", val]
        raise typer.Exit(_refine_workers(workers, args, store_url))
    idx = open_index(index, store_url=store_url, chroma_url=chroma_url)
    waiting = idx.store.jobs("pending")
    if not any(j.asks >= min_asks for j in waiting) and not watch and not deepen:
        why = f" whose question missed {min_asks} times ({len(waiting)} waiting)"
        console.print("no pending refine jobs" + (why if waiting else ""))
        return
    from cos_integrations.embedded.runtime import open_model
    from cos_integrations.serving.refine import Refiner
    from cos_integrations.summarize.engine import ChainOfSummaries

    with open_model(**choice, n_ctx=idx.config.context_tokens, echo=console.print) as llm:
        engine = ChainOfSummaries(llm, idx.config)
        refiner = Refiner(
            idx,
            engine,
            teach=teach,  # type: ignore[arg-type]
            retarget=retarget,
            min_asks=min_asks,
        )
        failed = 0
        while True:
            failed += _refine_round(refiner, deepen, deepen_strategy)
            if not watch:
                break
            time.sleep(poll)
    if failed:
        raise typer.Exit(1)


def _refine_workers(workers: int, args: list[str], store_url: str | None) -> int:
    """``workers`` processes of ``cos refine ARGS``; the largest exit code. The store
    reaches them through the environment, never their command lines (which any user can
    read in the process list): a PostgreSQL URL carries its password."""
    import os
    import subprocess
    import sys

    env = dict(os.environ)
    if store_url:
        env["COS_STORE_URL"] = store_url
    command = [sys.executable, "-m", "cos_integrations.cli", "refine", *args]
    procs = [subprocess.Popen(command, env=env) for _ in range(workers)]
    return max(p.wait() for p in procs)


def _refine_round(refiner, deepen: int, strategy: str) -> int:
    """The queued jobs once, then ``deepen`` documents' CoS rounds; each outcome a line.
    Returns how many failed."""
    failed = 0
    for o in refiner.run_once():
        colour = {"published": "green", "not_in_source": "yellow"}.get(o.status, "red")
        console.print(
            f"[{colour}]{o.status}[/] job {o.job_id} {o.doc_id}: {o.query!r}"
            f" -> {o.answer or '-'} ({o.reason}; {o.usage.calls} calls)"
        )
        failed += o.status in ("failed", "dead")
    if deepen:
        for o in refiner.deepen(deepen, strategy=strategy):
            colour = {"published": "green"}.get(o.status, "yellow")
            console.print(
                f"[{colour}]{o.status}[/] deepen {o.doc_id} ({o.reason}; {o.usage.calls} calls)"
            )
            failed += o.status == "failed"
    return failed


@app.command("serve-local")
def serve_local(
    local_model: LocalOpt = None,
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0: a free one).")] = 0,
    n_ctx: Annotated[int, typer.Option(help="Context size in tokens.")] = 8192,
) -> None:
    """Serve the embedded model on 127.0.0.1 (OpenAI-compatible) until Ctrl-C."""
    from cos_integrations.embedded.server import LocalModelError, LocalModelServer

    server = LocalModelServer(local_model, n_ctx=n_ctx, port=port, shared=True)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        with server:
            console.print(f"serving {server.label} at {server.base_url}  (log: {server.log_path})")
            console.print(
                f"other cos commands on this machine reuse it; other tools: "
                f"COS_BASE_URL={server.base_url}"
            )
            try:
                while server.running:
                    time.sleep(1)
            except KeyboardInterrupt:
                console.print("stopping")
        if server.running_shared():
            console.print("other processes still use the server: it stops when they finish")
    except LocalModelError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(1) from exc
