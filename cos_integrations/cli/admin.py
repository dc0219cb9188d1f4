"""Admin commands of the ``cos`` CLI: review, pin, history, revert, accept, reject, stats,
export. :mod:`cos_integrations.cli` adds them to the ``cos`` app."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from cos_integrations.cli.common import IndexOpt, StoreUrlOpt, console, err, open_index

__all__ = ["app"]

app = typer.Typer()
export_app = typer.Typer(help="Publish summaries.", no_args_is_help=True)
app.add_typer(export_app, name="export")


def _doc_or_exit(idx, doc_id: str):
    doc = idx.store.get_document(doc_id)
    if doc is None:
        err.print(f"[red]error:[/] no document {escape(repr(doc_id))} in {idx.path}")
        raise typer.Exit(2)
    return doc


@app.command()
def review(index: IndexOpt = Path("index"), store_url: StoreUrlOpt = None) -> None:
    """Documents with their current summary, scores, flags, suggestions and pending jobs."""
    idx = open_index(index, store_url=store_url)
    pending: dict[str, int] = {}
    for job in idx.store.jobs("pending"):
        pending[job.doc_id] = pending.get(job.doc_id, 0) + 1
    for doc in idx.store.documents():
        cur = idx.store.current_summary(doc.doc_id)
        versions = idx.store.versions(doc.doc_id)
        suggested = [v.version for v in versions if v.status == "suggested"]
        head = f"[bold]{doc.doc_id}[/] ({doc.status}{', pinned' if doc.pinned else ''})"
        if cur is None:
            console.print(f"{head}: no summary{': ' + doc.error if doc.error else ''}")
            continue
        val = f"{cur.val_score:.2f}" if cur.val_score is not None else "-"
        console.print(
            f"{head} v{cur.version} by {cur.created_by}, val F1 {val}, "
            f"{cur.summary_tokens} tokens, {pending.get(doc.doc_id, 0)} pending jobs"
        )
        console.print(f"  {cur.text}")
        for flag in cur.flags:
            console.print(f"  [yellow]flag:[/] {flag}")
        if suggested:
            console.print(
                f"  suggestions: {', '.join(f'v{v}' for v in suggested)} "
                f"(cos accept/reject {doc.doc_id} VERSION)"
            )


UserOpt = Annotated[
    str | None,
    typer.Option("--user", help="Who acts, for the audit log (default: COS_USER or login)."),
]


def _act(fn, *args, **kw) -> None:
    """Run an oversight action; a refused one is a clear error and exit code 1, an
    unknown version exit code 2."""
    from cos_integrations.serving.oversight import ActionRefused

    try:
        fn(*args, **kw)
    except ActionRefused as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(1) from exc
    except KeyError as exc:  # an unknown version: bad input
        err.print(f"[red]error:[/] {escape(str(exc.args[0]))}")
        raise typer.Exit(2) from exc


def _user(user: str | None) -> str:
    from cos_integrations.serving.oversight import default_user

    return user or default_user()


def _on_document(
    index: Path, store_url: str | None, doc_id: str, fn, *args, user: str | None
) -> None:
    """Open the index, check the document, run the oversight action ``fn`` on it."""
    idx = open_index(index, store_url=store_url)
    _doc_or_exit(idx, doc_id)
    _act(fn, idx, doc_id, *args, user=_user(user))


@app.command()
def pin(
    doc_id: Annotated[str, typer.Argument(help="Document id (see `cos review`).")],
    file: Annotated[Path, typer.Option("--file", "-f", help="The human summary (UTF-8 text).")],
    index: IndexOpt = Path("index"),
    store_url: StoreUrlOpt = None,
    user: UserOpt = None,
) -> None:
    """Publish a human summary that refinement never overwrites (it only suggests)."""
    from cos_integrations.serving import oversight

    idx = open_index(index, store_url=store_url)
    doc = _doc_or_exit(idx, doc_id)
    text = file.read_text(encoding="utf-8").strip()
    if not text:
        raise typer.BadParameter(f"{file} is empty")
    out: list[int] = []
    _act(
        lambda: out.append(
            oversight.pin_summary(
                idx,
                doc_id,
                text,
                expected_version=doc.current_version,
                user=_user(user),
                reason=f"pinned from {file.name}",
            )
        )
    )
    console.print(f"{doc_id}: pinned as v{out[0]}")


@app.command()
def unpin(
    doc_id: str,
    index: IndexOpt = Path("index"),
    store_url: StoreUrlOpt = None,
    user: UserOpt = None,
) -> None:
    """Let refinement publish new versions of this document again."""
    from cos_integrations.serving import oversight

    _on_document(index, store_url, doc_id, oversight.unpin, user=user)
    console.print(f"{doc_id}: unpinned")


@app.command()
def history(doc_id: str, index: IndexOpt = Path("index"), store_url: StoreUrlOpt = None) -> None:
    """Every summary version of a document, newest last, and the owners' actions on it."""
    idx = open_index(index, store_url=store_url)
    doc = _doc_or_exit(idx, doc_id)
    table = Table("version", "status", "by", "when", "val F1", "tokens", "reason", "flags")
    for v in idx.store.versions(doc_id):
        mark = " *" if v.version == doc.current_version else ""
        table.add_row(
            f"v{v.version}{mark}",
            v.status,
            v.created_by,
            time.strftime("%Y-%m-%d %H:%M", time.localtime(v.created_at)),
            f"{v.val_score:.2f}" if v.val_score is not None else "-",
            str(v.summary_tokens),
            escape(v.reason[:60]),
            str(len(v.flags)),
        )
    console.print(table)
    console.print("* current")
    for a in idx.store.actions(doc_id):
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(a.at))
        ver = f" v{a.version}" if a.version is not None else ""
        console.print(f"  {when} {escape(a.user)}: {a.action}{ver} {escape(a.detail)}")


@app.command()
def revert(
    doc_id: str,
    version: int,
    index: IndexOpt = Path("index"),
    store_url: StoreUrlOpt = None,
    user: UserOpt = None,
) -> None:
    """Make an earlier version current again (and re-index it)."""
    from cos_integrations.serving import oversight

    _on_document(index, store_url, doc_id, oversight.revert, version, user=user)
    console.print(f"{doc_id}: reverted to v{version}")


@app.command()
def accept(
    doc_id: str,
    version: int,
    index: IndexOpt = Path("index"),
    store_url: StoreUrlOpt = None,
    user: UserOpt = None,
) -> None:
    """Accept a suggested version of a pinned document."""
    from cos_integrations.serving import oversight

    _on_document(index, store_url, doc_id, oversight.accept, version, user=user)
    console.print(f"{doc_id}: accepted v{version}")


@app.command()
def reject(
    doc_id: str,
    version: int,
    index: IndexOpt = Path("index"),
    store_url: StoreUrlOpt = None,
    user: UserOpt = None,
) -> None:
    """Reject a suggested version of a pinned document."""
    from cos_integrations.serving import oversight

    _on_document(index, store_url, doc_id, oversight.reject, version, user=user)
    console.print(f"{doc_id}: v{version} rejected")


@app.command()
def stats(index: IndexOpt = Path("index"), store_url: StoreUrlOpt = None) -> None:
    """Served answers, hits, misses (each ask once), the rate per day, tokens saved and
    break-even query counts."""
    from cos_integrations.serving.stats import compute_stats

    idx = open_index(index, store_url=store_url)
    s = compute_stats(idx.store)
    console.print(
        f"queries {s.queries}: served a kept answer {s.served} (of them unverified "
        f"repeats {s.repeats}), summary hits {s.hits}, "
        f"misses {s.misses}, not in source {s.not_in_source}; answered without the source "
        f"{s.hit_rate:.0%}"
    )
    if s.checks:
        from cos_integrations.serving.router import DEFAULT_MAX_ERROR, upper_bound

        bound = upper_bound(s.disagreements, s.checks)
        trusted = "the summaries serve" if bound <= DEFAULT_MAX_ERROR else "the chunks answer"
        console.print(
            f"router: {s.checks} checks against the source, {s.disagreements} disagreed "
            f"(bound {bound:.0%}; at the default 2%: {trusted})"
        )
        for doc_id, (n, k) in sorted(s.checks_by_document.items()):
            console.print(f"  {doc_id}: {k} of {n} checks disagreed")
    for day, (hits, total) in s.per_day.items():
        console.print(f"  {day}: {hits}/{total} hits ({hits / total:.0%})")
    console.print(
        f"context tokens sent: {s.context_tokens}; sending full documents instead: "
        f"{s.full_document_tokens}; saved {s.tokens_saved}"
    )
    table = Table(
        "document", "source tokens", "summary tokens", "CoS tokens spent", "break-even queries"
    )
    for row in s.documents:
        table.add_row(
            row.doc_id,
            str(row.source_tokens),
            str(row.summary_tokens),
            str(row.build_tokens),
            "-" if row.break_even is None else f"{row.break_even:.1f}",
        )
    console.print(table)


@export_app.command("llms-txt")
def export_llms_txt(
    title: Annotated[str, typer.Option(help="H1 title of the file.")],
    index: IndexOpt = Path("index"),
    store_url: StoreUrlOpt = None,
    description: Annotated[str | None, typer.Option(help="The blockquote summary.")] = None,
    details: Annotated[
        str | None,
        typer.Option(help="The paragraph after it (default: one line saying what is listed)."),
    ] = None,
    out: Annotated[Path, typer.Option(help="Where to write llms.txt.")] = Path("llms.txt"),
    base_url: Annotated[
        str | None, typer.Option(help="Prefix for document links (else the source path).")
    ] = None,
    per_page: Annotated[
        Path | None, typer.Option(help="Also write one markdown file per document here.")
    ] = None,
) -> None:
    """Write llms.txt (llmstxt.org) and llms-full.txt from the current summaries."""
    from cos_integrations.serving.export import (
        collect_entries,
        render_llms_full,
        render_llms_txt,
        write_pages,
    )

    idx = open_index(index, store_url=store_url)
    entries = collect_entries(idx, base_url=base_url)
    text = {"description": description or "", "details": details or ""}
    out.write_text(render_llms_txt(title, entries, **text))
    full = out.with_name(out.stem + "-full" + out.suffix)
    full.write_text(render_llms_full(title, entries, **text))
    console.print(f"wrote {out} and {full} ({len(entries)} documents)")
    if per_page:
        pages = write_pages(per_page, entries)
        console.print(f"wrote {len(pages)} pages to {per_page}")


@app.command("migrate-store")
def migrate_store(
    to: Annotated[
        str,
        typer.Option(
            "--to",
            help="The destination store URL (postgresql://USER[:PASSWORD]@HOST[:PORT]/DB).",
            show_default=False,
        ),
    ],
    index: IndexOpt = Path("index"),
    store_url: StoreUrlOpt = None,
    switch: Annotated[
        bool,
        typer.Option(
            "--switch", help="Then record the new store in the index's manifest (no password)."
        ),
    ] = False,
) -> None:
    """Copy an index's store (its SQLite file by default) into another database; idempotent,
    verified (row counts, current versions), the source only read."""
    from cos_integrations.storage.db import StoreError, redact_url
    from cos_integrations.storage.migrate import copy_store
    from cos_integrations.storage.store import SummaryStore

    idx = open_index(index, store_url=store_url)
    try:
        dst = SummaryStore(to, create=True)
        report = copy_store(idx.store, dst)
    except StoreError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from exc
    for table, n in report.source.items():
        console.print(f"  {table}: {n} rows ({report.copied[table]} copied now)")
    console.print(f"verified: {redact_url(to)} matches {idx.store.path}")
    if switch:
        idx.use_store(to)
        console.print(f"{idx.path}: the manifest now names {redact_url(to)} as its store")
    else:
        console.print("use it with --store-url (or COS_STORE_URL), or run again with --switch")
