"""What an evaluation prints and keeps: per-document aggregates, the methods' table, the
retrieval and ablation tables, the ingest costs and the plot.

Examples:
    >>> rows = [
    ...     {"f1": f1, "em": f1, "context_tokens": 100, "calls": 1, "prompt_tokens": 120}
    ...     for f1 in (1.0, 0.0)
    ... ]
    >>> pooled(rows)["heldout_f1"], pooled(rows)["prompt_tokens_per_question"]
    (0.5, 120.0)
"""

from __future__ import annotations

import logging
from collections import defaultdict
from pathlib import Path
from typing import Any

from cos_integrations.research.datasets import EvalDoc
from cos_integrations.research.peers import (
    PEERS,
)

__all__ = [
    "ABLATIONS",
    "mark_rows",
    "repeat_stats",
    "aggregate",
    "pooled",
    "summarise_records",
    "summary_table",
    "ingest_costs",
    "RETRIEVAL_COLUMNS",
    "retrieval_table",
    "ABLATION_COLUMNS",
    "ablation_table",
    "plot",
]

log = logging.getLogger(__name__)

# what a hit's answer is compared with under ``hit_ablation``
ABLATIONS = ("summary", "chunk", "whole-chunk")


def mark_rows(rows: list[dict[str, Any]], doc_id: str) -> list[dict[str, Any]]:
    """Whether each question's context held its own document (``right_doc``), and, for a
    hit, whether the hit was on another document (``wrong_doc_hit``)."""
    for r in rows:
        if "docs" in r:
            r["right_doc"] = doc_id in r["docs"]
        if r.get("hit"):
            r["wrong_doc_hit"] = (r.get("hit_doc") or r.get("best_doc")) != doc_id
    return rows


def repeat_stats(before: list[dict[str, Any]], again: list[dict[str, Any]]) -> dict[str, Any]:
    """Of the traffic questions that missed and whose answer is in the source: how many hit
    when asked again (``again``: the same questions, or their paraphrases, in order), the F1
    they had as misses, and the F1 of those that hit."""
    pairs = [
        (b, a) for b, a in zip(before, again, strict=True) if not b["hit"] and b.get("in_source")
    ]
    hits = [(b, a) for b, a in pairs if a["hit"]]
    out: dict[str, Any] = {"missed_in_source": len(pairs), "hit_again": len(hits)}
    if pairs:
        out["hit_rate_again"] = len(hits) / len(pairs)
        out["f1_as_misses"] = sum(b["f1"] for b, _ in pairs) / len(pairs)
        out["f1_again"] = sum(a["f1"] for _, a in pairs) / len(pairs)
    if hits:
        out["f1_of_new_hits"] = sum(a["f1"] for _, a in hits) / len(hits)
        out["f1_of_new_hits_as_misses"] = sum(b["f1"] for b, _ in hits) / len(hits)
    return out


def aggregate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Means over one document's questions (pooled over documents by summarise_records)."""
    n = len(rows) or 1
    out: dict[str, Any] = {
        "heldout_f1": sum(r["f1"] for r in rows) / n,
        "heldout_em": sum(r["em"] for r in rows) / n,
        "context_tokens": sum(r["context_tokens"] for r in rows) / n,
        "calls_per_question": sum(r["calls"] for r in rows) / n,
        "prompt_tokens_per_question": sum(r["prompt_tokens"] for r in rows) / n,
    }
    if rows and "hit" in rows[0]:
        hits = [r["f1"] for r in rows if r["hit"]]
        misses = [r["f1"] for r in rows if not r["hit"]]
        out["hit_rate"] = len(hits) / n
        # a hit answered wrongly is the cache's failure mode: the judge trusted the summary
        out["hit_f1"] = sum(hits) / len(hits) if hits else None
        out["miss_f1"] = sum(misses) / len(misses) if misses else None
        out["wrong_hits"] = sum(f < 0.5 for f in hits) / len(hits) if hits else None
        on_wrong = [r["wrong_doc_hit"] for r in rows if r["hit"] and "wrong_doc_hit" in r]
        out["wrong_doc_hits"] = sum(on_wrong) / len(on_wrong) if on_wrong else None
    marked = [r["right_doc"] for r in rows if "right_doc" in r]
    if marked:
        out["right_doc_rate"] = sum(marked) / len(marked)
    ablated = [r for r in rows if r.get("hit") and "ablation" in r]
    if ablated:
        both = {"f1": sum(r["f1"] for r in ablated) / len(ablated)}
        both["context_tokens"] = sum(r["judge_context_tokens"] for r in ablated) / len(ablated)
        out["ablation"] = {"hits": len(ablated), "both": both} | {
            name: {
                key: sum(r["ablation"][name][key] for r in ablated) / len(ablated)
                for key in ("f1", "context_tokens")
            }
            for name in ABLATIONS
        }
    return out


def pooled(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """:func:`aggregate` over question rows pooled across documents (each question counts once)."""
    return {k: v for k, v in aggregate(rows).items() if v is not None} if rows else {}


KEYS = {
    "heldout_f1": "heldout_f1",
    "heldout_em": "heldout_em",
    "summary_tokens": "summary_tokens",
    "source_tokens": "source_tokens",
    "calls_per_doc": "calls",
    "prompt_tokens_per_doc": "prompt_tokens",
    "completion_tokens_per_doc": "completion_tokens",
    "cached_tokens_per_doc": "cached_tokens",
    "seconds_per_doc": "seconds",
    "oracle_heldout_f1": "oracle_heldout_f1",
    "hit_rate": "hit_rate",
    "context_tokens": "context_tokens",
    "hit_f1": "hit_f1",
    "miss_f1": "miss_f1",
}


def _outcomes(rows: list[dict[str, Any]], step: str) -> dict[str, Any]:
    """How a refine-from-traffic step's jobs ended (``STEP_outcomes``: status -> count) and
    its model calls a document (``STEP_calls_per_doc``), over the documents' records."""
    statuses: dict[str, int] = defaultdict(int)
    for r in rows:
        for o in r.get(step, []):
            statuses[o["status"]] += 1
    return {
        f"{step}_outcomes": dict(statuses),
        f"{step}_calls_per_doc": sum(r.get(f"{step}_calls", 0) for r in rows) / len(rows),
    }


def summarise_records(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Mean of every figure per method (over the documents that have it); for the
    retrieval methods, over every question (pooled), before and after refinement."""
    by_method: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        by_method[r["method"]].append(r)
    out: dict[str, dict[str, Any]] = {}
    for method, rows in by_method.items():
        agg: dict[str, Any] = {"docs": len(rows)}
        for r in rows:
            for phase in ("questions", "questions_after"):
                mark_rows(r.get(phase, []), r["doc_id"])
        if all("questions" in r for r in rows):
            agg.update(pooled([q for r in rows for q in r["questions"]]))
            agg["questions"] = sum(len(r["questions"]) for r in rows)
            if any("questions_after" in r for r in rows):
                agg["test_before"] = pooled([q for r in rows for q in r["questions"]])
                agg["test_after"] = pooled([q for r in rows for q in r.get("questions_after", [])])
                for step in ("refine", "deepen"):
                    if step == "refine" or any(step in r for r in rows):
                        agg.update(_outcomes(rows, step))
                if any("traffic_again" in r for r in rows):
                    traffic = [q for r in rows if "traffic_again" in r for q in r["traffic"]]
                    agg["repeat"] = repeat_stats(
                        traffic, [q for r in rows for q in r.get("traffic_again", [])]
                    )
                    said = [q for r in rows for q in r.get("paraphrases", [])]
                    if said:
                        agg["paraphrase"] = repeat_stats(traffic, said)
            out[method] = agg
            continue
        for key, field in KEYS.items():
            vals = [r[field] for r in rows if r.get(field) is not None]
            if vals:
                agg[key] = sum(vals) / len(vals)
        for phase in ("test_before", "test_after"):
            if any(phase in r for r in rows):
                agg[phase] = {
                    k: sum(r[phase][k] for r in rows if phase in r)
                    / sum(1 for r in rows if phase in r)
                    for k in ("heldout_f1", "hit_rate", "context_tokens")
                }
        iters: dict[int, list[float]] = defaultdict(list)
        for r in rows:
            for i, f in r.get("heldout_f1_per_iteration", []):
                iters[i].append(f)
        if iters:
            agg["heldout_f1_per_iteration"] = {i: sum(v) / len(v) for i, v in sorted(iters.items())}
        out[method] = agg
    return out


def summary_table(
    done: dict[tuple[str, str], dict],
    docs: list[EvalDoc],
    methods: set[str],
    ingest: dict[str, dict[str, Any]],
) -> dict[str, dict[str, Any]]:
    """The means per method over the questioned documents, with each row's ingest costs."""
    ids = {d.doc_id for d in docs}
    records = [r for r in done.values() if r["doc_id"] in ids]
    labels = methods | set(ingest)
    summary = summarise_records([r for r in records if r["method"] in labels])
    for label, costs in ingest.items():
        if label in summary:
            summary[label]["ingest"] = costs
    return summary


def ingest_costs(records: list[dict[str, Any]]) -> dict[str, Any]:
    """What one strategy's summaries cost a document at ingest (means over its records):
    seconds, model calls, prompt and completion tokens, and the share of documents whose
    summary is the zero-shot thesis unchanged (CoS strategies)."""
    if not records:
        return {}
    n = len(records)
    out: dict[str, Any] = {
        "docs": n,
        "seconds_per_doc": sum(r.get("seconds") or 0.0 for r in records) / n,
        "calls_per_doc": sum(r.get("calls") or 0 for r in records) / n,
        "tokens_per_doc": sum(
            (r.get("prompt_tokens") or 0) + (r.get("completion_tokens") or 0) for r in records
        )
        / n,
        "summary_tokens": sum(r.get("summary_tokens") or 0 for r in records) / n,
    }
    kept = [r["thesis_kept"] for r in records if "thesis_kept" in r]
    if kept:
        out["thesis_kept"] = sum(kept) / len(kept)
    return out


RETRIEVAL_COLUMNS = (
    "path",
    "docs",
    "questions",
    "F1",
    "EM",
    "context tok/q",
    "calls/q",
    "prompt tok/q",
    "hit rate",
    "F1 of hits",
    "F1 of misses",
    "wrong hits",
    "right doc",
    "wrong-doc hits",
    "ingest s/doc",
    "ingest calls/doc",
    "ingest tok/doc",
)


def retrieval_table(methods: dict[str, dict[str, Any]]) -> list[list[str]]:
    """The side-by-side rows (``RETRIEVAL_COLUMNS``) of the retrieval methods in a result:
    the chunk baselines, the peers, fallback before and after refinement, right-doc. The CLI and
    ``benchmarks/report.py`` both print these, so they cannot disagree."""

    def cell(v: Any, fmt: str) -> str:
        return "" if v is None else fmt.format(v)

    rows = []
    fallbacks = [n for n in methods if n.split("[", 1)[0] == "fallback"]
    order = ("rag", "rag-focused", "rag-ordered", "rag-contextual", *PEERS, *fallbacks, "right-doc")
    for name in order:
        m = methods.get(name)
        if not m or "questions" not in m:
            continue
        phases = [(name, m)]
        if "test_after" in m:
            phases = [
                (f"{name}, before refinement", m["test_before"]),
                (f"{name}, after refinement", m["test_after"]),
            ]
        for label, v in phases:
            rows.append(
                [
                    label,
                    str(m["docs"]),
                    str(m["questions"]),
                    cell(v.get("heldout_f1"), "{:.3f}"),
                    cell(v.get("heldout_em"), "{:.3f}"),
                    cell(v.get("context_tokens"), "{:.0f}"),
                    cell(v.get("calls_per_question"), "{:.2f}"),
                    cell(v.get("prompt_tokens_per_question"), "{:.0f}"),
                    cell(v.get("hit_rate"), "{:.0%}"),
                    cell(v.get("hit_f1"), "{:.3f}"),
                    cell(v.get("miss_f1"), "{:.3f}"),
                    cell(v.get("wrong_hits"), "{:.0%}"),
                    cell(v.get("right_doc_rate"), "{:.0%}"),
                    cell(v.get("wrong_doc_hits"), "{:.0%}"),
                    cell(m.get("ingest", {}).get("seconds_per_doc"), "{:.0f}"),
                    cell(m.get("ingest", {}).get("calls_per_doc"), "{:.1f}"),
                    cell(m.get("ingest", {}).get("tokens_per_doc"), "{:.0f}"),
                ]
            )
    return rows


ABLATION_COLUMNS = (
    "path",
    "hits",
    "both (shipped)",
    "summary sentences alone",
    "chunk sentences alone",
    "whole best chunk alone",
)


def ablation_table(methods: dict[str, dict[str, Any]]) -> list[list[str]]:
    """F1 (and context tokens) of the same hits answered from each part of the hit context
    (``hit_ablation``), one row per fallback strategy."""
    rows = []
    for name, m in methods.items():
        a = m.get("ablation")
        if not a:
            continue
        cells = [
            f"{a[k]['f1']:.3f} ({a[k]['context_tokens']:.0f} tok)" for k in ("both", *ABLATIONS)
        ]
        rows.append([name, str(a["hits"]), *cells])
    return rows


def plot(result: dict[str, Any], path: Path) -> None:
    """Held-out F1 against summary tokens (log scale) per method, and CoS F1 per iteration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, m in result["methods"].items():
        if "summary_tokens" in m and "heldout_f1" in m:
            a.scatter(m["summary_tokens"], m["heldout_f1"], s=50)
            a.annotate(
                name,
                (m["summary_tokens"], m["heldout_f1"]),
                xytext=(4, 4),
                textcoords="offset points",
            )
    a.set_xscale("log")
    a.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # labels overlap otherwise
    a.set_xlabel("summary tokens (log)")
    a.set_ylabel("held-out F1")
    a.set_title(f"{result['dataset']} ({result['docs']} docs)")
    for name in ("cos", "reference"):
        per = result["methods"].get(name, {}).get("heldout_f1_per_iteration")
        if per:
            xs = [int(k) for k in per]
            b.plot(xs, list(per.values()), marker="o", label=name)
    b.xaxis.get_major_locator().set_params(integer=True)
    b.set_xlabel("iteration (0 = thesis)")
    b.set_ylabel("held-out F1")
    if b.lines:
        b.legend()
    else:  # e.g. a zero-shot-only run: no iterations to draw
        b.text(0.5, 0.5, "no iterations in this run", ha="center", transform=b.transAxes)
    b.set_title("F1 per iteration")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
