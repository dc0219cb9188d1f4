"""Replay hit rules on the per-question records of a `cos eval` retrieval run, no model.

    python benchmarks/hit_rules.py benchmarks/results/rag-default-B.json.docs.jsonl \
        [--rag benchmarks/results/rag-default-A.json.docs.jsonl] \
        [--data ../shared/data/squad-v1.1-dev-chunks.jsonl]

Each fallback row keeps the judge's unchecked answer (from the hit context), its checks
(in_context, not_echo, in_source) and the best summary's similarity. A rule (threshold, set
of required checks) decides hit or miss per question; a hit is answered by the judge's
answer, a miss by rag's answer to the same question (the miss path retrieves the same top-k
chunks as rag: the script reports how often the recorded misses did). Exact for thresholds
at or above the run's own (below it the judge was not asked) and for the checks; for a
``--refine-from-traffic`` run, ``--phase after`` replays the test half after refinement
(with ``--index``, the best-chunk checks then read the refined index: after only).
The routing rules (``agrees``: the best summary's document is among the documents of rag's
top-k chunks; ``agrees1``: it is the document of rag's top chunk, the product's
``verify_route``) are gates before the judge: a query they reject is a miss that pays no
judge call, so they are exact on any run whose rag rows record their chunks' documents.
Prints a Markdown table, one row per rule, beside rag; "rag's F1 on those" is rag's F1 on
the very questions the rule answered from the cache, so a hit rule that loses to rag shows
where.
"""

from __future__ import annotations

import argparse
import json
from itertools import product
from pathlib import Path

from cos_integrations.metrics import exact_match
from cos_integrations.research.jsonl import read_jsonl

CHECKS = (
    ("in context (today)", ("in_context",)),
    ("+ not an echo", ("in_context", "not_echo")),
    ("+ in the source", ("in_context", "in_source")),
    ("+ not an echo + in the source", ("in_context", "not_echo", "in_source")),
    ("+ supported by one sentence", ("in_context", "supported")),
    ("+ supported + not an echo", ("in_context", "supported", "not_echo")),
    ("+ in the best chunk of its document", ("in_context", "in_chunk")),
    ("+ in the best chunk + supported", ("in_context", "in_chunk", "supported")),
    # computed with --index: the supporting sentence must be in the source chunk itself
    ("+ supported by a sentence of the best chunk", ("in_context", "chunk_supported")),
    # routing agreement, checked before the judge (a disagreeing query is a miss with no
    # judge call): the best summary's document is among the documents of rag's top-k chunks
    # (``agrees``) or is the document of rag's top chunk (``agrees1``)
    ("routing agrees (top-k chunks)", ("agrees",)),
    ("routing agrees + supported", ("agrees", "in_context", "supported")),
    (
        "routing agrees + in the best chunk + supported",
        ("agrees", "in_context", "in_chunk", "supported"),
    ),
    ("routing agrees with the top chunk + supported", ("agrees1", "in_context", "supported")),
    ("routing agrees (top-k) + in context only", ("agrees", "in_context")),
)
GATES = ("agrees", "agrees1")


def load(path: Path) -> list[dict]:
    return read_jsonl(path)


def fill_chunk_checks(recs: list[dict], path: Path) -> None:
    """Checks on the best summary's document's best chunk depend only on the question, the
    judge's answer and that document, so they can be computed after the run from the index
    the run left: ``in_chunk`` (the answer occurs in the chunk) where it was not recorded,
    and ``chunk_supported`` (one sentence of the chunk, not of the summary, supports it)."""
    from cos_integrations.serving.hit_rule import is_grounded, is_supported
    from cos_integrations.serving.index import CoSIndex

    index = CoSIndex(path, create=False)
    for r in recs:
        for q in r.get("questions", []) if r["method"] == "fallback" else []:
            if not q.get("best_doc"):
                continue
            best = index.search_chunks(q["question"], 1, doc_ids=[q["best_doc"]])
            text = best[0].text if best else ""
            ok = bool(q["checks"].get("in_context"))
            q["checks"].setdefault("in_chunk", ok and is_grounded(q["judge_answer"], text))
            q["checks"]["chunk_supported"] = ok and is_supported(
                q["judge_answer"], q["question"], text
            )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run", type=Path)
    ap.add_argument("--rag", type=Path, help="docs.jsonl with the rag rows (default: run)")
    ap.add_argument("--data", type=Path, default=Path("../shared/data/squad-v1.1-dev-chunks.jsonl"))
    ap.add_argument("--thresholds", default="0.75,0.80,0.82,0.84,0.86")
    ap.add_argument(
        "--index",
        type=Path,
        help="the run's index (OUT.index-*): computes the best-chunk checks after the run",
    )
    ap.add_argument(
        "--phase",
        choices=("before", "after"),
        default="before",
        help="a --refine-from-traffic run: replay the test half before or after refinement",
    )
    args = ap.parse_args()
    recs = load(args.run)
    if args.phase == "after":
        for r in recs:
            if r["method"] == "fallback":
                if "questions_after" not in r:
                    raise SystemExit(f"{r['doc_id']}: no questions_after (not a refine run)")
                r["questions"] = r["questions_after"]
    if args.index:
        fill_chunk_checks(recs, args.index)
    rag_recs = load(args.rag) if args.rag else recs
    gold = {}
    for line in args.data.read_text().splitlines():
        d = json.loads(line)
        for q in d["qas"]:
            gold[(d["doc_id"], q["question"])] = q["answers"]
    fb = [r for r in recs if r["method"] == "fallback"]
    rag = {
        (r["doc_id"], q["question"]): q
        for r in rag_recs
        if r["method"] == "rag"
        for q in r["questions"]
    }
    right = {
        (r["doc_id"], q["question"]): q
        for r in rag_recs + recs
        if r["method"] == "right-doc"
        for q in r["questions"]
    }
    rows = [
        (r["doc_id"], q) for r in fb for q in r["questions"] if (r["doc_id"], q["question"]) in rag
    ]
    if not rows:
        raise SystemExit("no fallback question has a rag row")
    opts = fb[0]["signature"]["retrieval"]
    run_t = opts["threshold"]
    if run_t is None:  # calibrated in the run: the value each record says it used
        run_t = min(r.get("threshold", 0.0) for r in fb)
    same = [q["docs"] == rag[(d, q["question"])]["docs"] for d, q in rows if not q["hit"]]
    print(
        f"{len(rows)} questions over {len({d for d, _ in rows})} documents; run: hit_context "
        f"{opts['hit_context']}, threshold {run_t}, k {opts['k']}, summaries "
        f"{opts['summary_method']}; recorded misses that retrieved rag's chunks: "
        f"{sum(same)}/{len(same)}\n"
    )
    n = len(rows)
    g = [rag[(d, q["question"])] for d, q in rows]
    cols = (
        "rule|F1|EM|context tok/q|calls/q|hit rate|F1 of hits|rag's F1 on those|"
        "F1 of misses|wrong hits"
    )
    print("| " + cols.replace("|", " | ") + " |")
    print("|---" * len(cols.split("|")) + "|")
    print(
        f"| rag (top-{opts['k']} chunks) | {sum(x['f1'] for x in g) / n:.3f} | "
        f"{sum(x['em'] for x in g) / n:.3f} | {sum(x['context_tokens'] for x in g) / n:.0f} | "
        "1.00 | | | | | |"
    )
    rd = [right[(d, q["question"])] for d, q in rows if (d, q["question"]) in right]
    if len(rd) == n:
        print(
            f"| right-doc (ceiling) | {sum(x['f1'] for x in rd) / n:.3f} | "
            f"{sum(x['em'] for x in rd) / n:.3f} | {sum(x['context_tokens'] for x in rd) / n:.0f}"
            " | 1.00 | | | | | |"
        )
    thresholds = [t for t in (float(x) for x in args.thresholds.split(",")) if t >= run_t]
    for (_d, q), r in zip(rows, g, strict=True):
        if q.get("best_doc") and r.get("docs"):
            q["checks"]["agrees"] = q["best_doc"] in r["docs"]
            q["checks"]["agrees1"] = q["best_doc"] == r["docs"][0]
    recorded = set().union(*(q["checks"] for _, q in rows))
    for t, (label, need) in product(thresholds, CHECKS):
        if not set(need) <= recorded:
            continue  # a check this run did not record
        f1s, ems, ctx, calls, hit_f1, miss_f1, rag_on_hits = [], [], [], [], [], [], []
        for (d, q), r in zip(rows, g, strict=True):
            called = (
                q.get("judge_context_tokens", 0) > 0
                and (q["best_score"] or 0) >= t
                and all(q["checks"].get(c) for c in need if c in GATES)
            )
            hit = called and all(q["checks"].get(c) for c in need)
            if hit:
                f1 = q["judge_f1"]
                em = exact_match(q["judge_answer"] or "", gold[(d, q["question"])])
            else:
                f1, em = r["f1"], r["em"]
            f1s.append(f1)
            ems.append(em)
            ctx.append(
                (q["judge_context_tokens"] if called else 0) + (0 if hit else r["context_tokens"])
            )
            calls.append(int(called) + int(not hit))
            (hit_f1 if hit else miss_f1).append(f1)
            if hit:
                rag_on_hits.append(r["f1"])
        hits = len(hit_f1)
        wrong = sum(f < 0.5 for f in hit_f1) / hits if hits else None
        print(
            f"| t={t:.2f}, {label} | {sum(f1s) / n:.3f} | {sum(ems) / n:.3f} | "
            f"{sum(ctx) / n:.0f} | {sum(calls) / n:.2f} | {hits / n:.0%} | "
            + (f"{sum(hit_f1) / hits:.3f} | {sum(rag_on_hits) / hits:.3f}" if hits else " | ")
            + " | "
            + (f"{sum(miss_f1) / len(miss_f1):.3f}" if miss_f1 else "")
            + " | "
            + (f"{wrong:.0%}" if wrong is not None else "")
            + " |"
        )


if __name__ == "__main__":
    main()
