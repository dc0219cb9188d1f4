"""The first table of BENCHMARKS.md from the records of ``benchmarks/four_sets.sh`` (no
model calls): per kind of text, each method's F1 (normalised for the text's language, as
MLQA's script does), prompt tokens a question, and for the product its hit rate, wrong hits
(F1 < 0.5) among its hits, its hits' F1 against rag's on the same questions, and paired by
question against rag-ordered and rag (better / worse). ``--against TAG`` pairs one run's
fallback with another's (the hit rule before and after a change).

    python benchmarks/four_sets_table.py [--tag four] [--against base] [--sets squad,...]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cos_integrations.metrics import squad_f1
from cos_integrations.research.jsonl import read_jsonl

RESULTS = Path(__file__).parent / "results"
KINDS = {
    "squad": "encyclopedia (SQuAD chunks)",
    "covid": "scientific papers (COVID-QA)",
    "fairy": "stories (FairytaleQA)",
    "german": "German (XQuAD de)",
}


def rows(tag: str, dataset: str) -> dict[str, dict[tuple[str, str], dict]]:
    """Every question's row by method, keyed by (document, question), F1 recomputed in the
    document's language."""
    language = {}
    with (RESULTS / "sets" / f"{dataset}.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            language[doc["doc_id"]] = doc.get("language", "en")
    out: dict[str, dict[tuple[str, str], dict]] = {}
    for rec in read_jsonl(RESULTS / f"{tag}-{dataset}.json.docs.jsonl"):
        if "questions" not in rec or rec.get("error"):
            continue
        lang = language.get(rec["doc_id"], "en")
        for q in rec["questions"]:
            q = {**q, "f1": squad_f1(q.get("answer") or "", q["gold"], lang)}
            out.setdefault(rec["method"], {})[(rec["doc_id"], q["question"])] = q
    return out


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def paired(a: dict, b: dict) -> str:
    keys = a.keys() & b.keys()
    better = sum(a[k]["f1"] > b[k]["f1"] + 1e-9 for k in keys)
    worse = sum(a[k]["f1"] < b[k]["f1"] - 1e-9 for k in keys)
    return f"{better} / {worse}"


def table(tag: str, sets: list[str], against: str | None) -> None:
    head = [
        "text",
        "questions",
        "fallback F1",
        "rag-ordered F1",
        "rag F1",
        "prompt tokens (fallback / rag)",
        "hit rate",
        "wrong hits",
        "hits' F1 / rag's on them",
        "fallback vs rag-ordered, vs rag (better / worse)",
    ]
    if against:
        head.append(f"fallback vs {against}'s (better / worse; its F1)")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for dataset in sets:
        runs = rows(tag, dataset)
        fb, rag, ordered = runs["fallback"], runs["rag"], runs["rag-ordered"]
        hits = [k for k, q in fb.items() if q.get("hit")]
        wrong = sum(fb[k]["f1"] < 0.5 for k in hits)
        tokens = mean([q.get("prompt_tokens", 0) for q in fb.values()])
        rag_tokens = mean([q.get("prompt_tokens", 0) for q in rag.values()])
        cells = [
            KINDS.get(dataset, dataset),
            str(len(fb)),
            f"{mean([q['f1'] for q in fb.values()]):.3f}",
            f"{mean([q['f1'] for q in ordered.values()]):.3f}",
            f"{mean([q['f1'] for q in rag.values()]):.3f}",
            f"{tokens:.0f} / {rag_tokens:.0f} ({tokens / rag_tokens:.0%})",
            f"{len(hits) / len(fb):.0%}",
            f"{wrong} of {len(hits)}",
            f"{mean([fb[k]['f1'] for k in hits]):.3f} / "
            f"{mean([rag[k]['f1'] for k in hits if k in rag]):.3f}",
            f"{paired(fb, ordered)}, {paired(fb, rag)}",
        ]
        if against:
            old = rows(against, dataset)["fallback"]
            cells.append(f"{paired(fb, old)} ({mean([q['f1'] for q in old.values()]):.3f})")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tag", default="four")
    parser.add_argument("--against")
    parser.add_argument("--sets", default=",".join(KINDS))
    args = parser.parse_args()
    table(args.tag, args.sets.split(","), args.against)
