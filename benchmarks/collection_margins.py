"""Does a hit stay right when more summaries compete? (issue 28 item 2), no model calls.

    python benchmarks/collection_margins.py benchmarks/results/collection-30+170.json

Reads the ``fallback`` rows of a ``cos eval --distractors`` run (its ``.docs.jsonl``) and
opens the run's own index (``OUT.index-*``, the same summaries and embedder). For each asked
question it searches the summaries again and compares two rankings: the whole collection,
and the questioned documents alone (what the 30-document index held, since a summary's
similarity to a query does not depend on the others). Reported per ranking: how often the
best summary is the question's own document, and the margin of the best over the runner-up.

Then the margin remedy (semantic caches' "margin over the runner-up"), replayed on the
run's records: a hit whose best summary leads the runner-up by less than ``m`` becomes a
miss, answered by ``rag``'s answer to the same question (the miss path retrieves the same
top-k chunks as rag; ``benchmarks/hit_rules.py`` does the same). Exact for the hits it
keeps (their recorded answers); for a demoted hit, rag's F1 stands in for the miss path.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from statistics import mean

from cos_integrations import CoSIndex, LocalEmbedder
from cos_integrations.research.jsonl import read_jsonl


def load(path: Path) -> dict[tuple[str, str], dict]:
    return {(r["doc_id"], r["method"]): r for r in read_jsonl(path)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path, help="the run's OUT (its .docs.jsonl and index beside it)")
    ap.add_argument("--method", default="fallback")
    ap.add_argument("--k", type=int, default=12, help="summaries searched per question")
    ap.add_argument("--margins", default="0,0.005,0.01,0.02,0.03,0.05")
    args = ap.parse_args()
    recs = load(args.out.with_suffix(args.out.suffix + ".docs.jsonl"))
    dirs = sorted(args.out.parent.glob(args.out.name + ".index-*"))
    if not dirs:
        raise SystemExit(f"no index beside {args.out} (OUT.index-*): run the evaluation first")
    index = CoSIndex(dirs[-1], embedder=LocalEmbedder())
    asked = {doc for doc, method in recs if method == args.method}
    rows = []
    for (doc, method), rec in sorted(recs.items()):
        if method != args.method:
            continue
        rag = {q["question"]: q for q in recs.get((doc, "rag"), {}).get("questions", [])}
        for q in rec["questions"]:
            hits = index.search_summaries(q["question"], args.k)
            mine = [h for h in hits if h.doc_id in asked]
            rows.append(
                {
                    "doc": doc,
                    "hit": bool(q.get("hit")),
                    "f1": q["f1"],
                    "rag_f1": rag.get(q["question"], {}).get("f1"),
                    "best_doc": q.get("best_doc"),
                    "all": [(h.doc_id, h.score) for h in hits[:2]],
                    "questioned": [(h.doc_id, h.score) for h in mine[:2]],
                }
            )
    n = len(rows)
    print(f"{n} questions of {len(asked)} documents; index {dirs[-1].name}\n")
    print("| ranking | best summary is the question's own document | margin p10 | p50 |")
    print("|---|---|---|---|")
    for name in ("questioned", "all"):
        right = sum(bool(r[name]) and r[name][0][0] == r["doc"] for r in rows)
        gaps = sorted(r[name][0][1] - r[name][1][1] for r in rows if len(r[name]) > 1)
        p10, p50 = gaps[len(gaps) // 10], gaps[len(gaps) // 2]
        label = "questioned documents only" if name == "questioned" else "whole collection"
        print(f"| {label} | {right}/{n} ({right / n:.0%}) | {p10:.3f} | {p50:.3f} |")
    print("\n| margin rule | hits | wrong-doc hits | F1 | F1 of hits |")
    print("|---|---|---|---|---|")
    for m in (float(x) for x in args.margins.split(",")):
        f1s, hit_f1, hits, wrong = [], [], 0, 0
        for r in rows:
            gap = r["all"][0][1] - r["all"][1][1] if len(r["all"]) > 1 else 1.0
            if r["hit"] and gap >= m:
                hits += 1
                wrong += r["best_doc"] != r["doc"]
                f1s.append(r["f1"])
                hit_f1.append(r["f1"])
            elif r["hit"]:
                f1s.append(r["rag_f1"] if r["rag_f1"] is not None else r["f1"])
            else:
                f1s.append(r["f1"])
        hf = f"{mean(hit_f1):.3f}" if hit_f1 else "-"
        print(f"| margin >= {m:g} | {hits}/{n} | {wrong} | {mean(f1s):.3f} | {hf} |")


if __name__ == "__main__":
    main()
