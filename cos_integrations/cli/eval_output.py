"""What ``cos eval`` prints (:mod:`cos_integrations.cli.evaluate`): the stream's table,
or the summary methods', the retrieval and the hit-context ablation tables.

Examples:
    >>> print_result({"methods": {}})  # nothing measured, nothing printed
"""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from cos_integrations.cli.common import console

__all__ = ["print_result", "print_stream", "print_summarisers", "print_retrieval"]


def print_result(result: dict) -> None:
    """The stream's table; or the summary methods' table, the retrieval table and the
    hit-context ablation."""
    if result.get("stream"):
        print_stream(result["stream"])
        return
    print_summarisers(result["methods"])
    print_retrieval(result["methods"])


def print_stream(got: dict) -> None:
    """A stream's rows by kind of ask, its refine jobs, and the framework rows beside the
    core's."""
    from cos_integrations.research.stream_eval import (
        STREAM_COLUMNS,
        framework_lines,
        stream_table,
    )

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


SUMMARISER_COLUMNS = (
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


def print_summarisers(methods: dict) -> None:
    """One row a summary method (the retrieval rows are the other table's)."""
    from cos_integrations.research.evaluation import is_retrieval

    table = Table(*SUMMARISER_COLUMNS)
    for method, m in methods.items():
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


def print_retrieval(methods: dict) -> None:
    """The retrieval rows (one column a method, one row a measure), then the hit-context
    ablation when it ran."""
    from cos_integrations.research.evaluation import (
        ABLATION_COLUMNS,
        RETRIEVAL_COLUMNS,
        ablation_table,
        retrieval_table,
    )

    rows = retrieval_table(methods)
    if rows:
        # one column a method, one row a measure (those some method has): it reads at any
        # width, where the 17 measures side by side did not fit a terminal
        side = Table("", *(escape(row[0]) for row in rows), title="retrieval, per question")
        for i, measure in enumerate(RETRIEVAL_COLUMNS[1:], 1):
            cells = [row[i] for row in rows]
            if any(cells):
                side.add_row(measure, *(escape(c) for c in cells))
        console.print(side)
    ablation = ablation_table(methods)
    if ablation:
        cut = Table(*ABLATION_COLUMNS, title="the same hits, answered from each part (F1)")
        for row in ablation:
            cut.add_row(*(escape(c) for c in row))
        console.print(cut)
