"""One retrieval method's records in two ``cos eval`` runs, question by question (no model).

    python benchmarks/compare_runs.py \
        benchmarks/results/strategies-30-120w-product.json.docs.jsonl=fallback[zero-shot-120w] \
        benchmarks/results/collection-30+170.json.docs.jsonl=fallback

Pairs the rows by (document, question); prints each run's F1, hit rate, wrong-document
hits and right-document rate over the paired questions, then how many questions scored
better / worse / the same in the second run (any F1 difference) and how many hits came or
went. Used for the same questions over the same summaries in two collections (issue 28
item 2: 30 documents against 30 + 170 distractors).
"""

from __future__ import annotations

import sys
from statistics import mean

from cos_integrations.research.jsonl import read_jsonl


def rows(spec: str) -> dict[tuple[str, str], dict]:
    path, _, method = spec.partition("=")
    out = {}
    for rec in read_jsonl(path):
        if rec["method"] == method:
            for q in rec["questions"]:
                q = {**q, "right_doc": rec["doc_id"] in q.get("docs", [])}
                q["wrong_doc_hit"] = bool(q.get("hit")) and q.get("best_doc") != rec["doc_id"]
                out[(rec["doc_id"], q["question"])] = q
    return out


def main(a_spec: str, b_spec: str) -> None:
    a, b = rows(a_spec), rows(b_spec)
    keys = sorted(set(a) & set(b))
    if not keys:
        raise SystemExit("no question in both runs")
    print(f"{len(keys)} questions in both runs\n")
    print("| run | F1 | hit rate | wrong-doc hits | right doc in context | prompt tok/q |")
    print("|---|---|---|---|---|---|")
    for spec, run in ((a_spec, a), (b_spec, b)):
        qs = [run[k] for k in keys]
        hits = sum(bool(q.get("hit")) for q in qs)
        print(
            f"| {spec} | {mean(q['f1'] for q in qs):.3f} | {hits / len(qs):.0%} | "
            f"{sum(q['wrong_doc_hit'] for q in qs)} of {hits} | "
            f"{sum(q['right_doc'] for q in qs) / len(qs):.0%} | "
            f"{mean(q.get('prompt_tokens', 0) for q in qs):.0f} |"
        )
    better = sum(b[k]["f1"] > a[k]["f1"] + 1e-9 for k in keys)
    worse = sum(b[k]["f1"] < a[k]["f1"] - 1e-9 for k in keys)
    came = sum(bool(b[k].get("hit")) and not a[k].get("hit") for k in keys)
    went = sum(bool(a[k].get("hit")) and not b[k].get("hit") for k in keys)
    print(
        f"\nsecond run against the first: {better} better, {worse} worse, "
        f"{len(keys) - better - worse} the same; {came} new hits, {went} hits lost"
    )


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2])
