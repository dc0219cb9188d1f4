"""How far refinement from traffic can move the test half, and where a run's did, no model.

    python benchmarks/refine_reach.py [--data ../shared/data/squad-v1.1-dev-chunks.jsonl] \
        [--docs 30] [RUN.docs.jsonl ...]

Refinement from traffic teaches a summary the facts the traffic half asked about (questions
1-5 of each document); the test half (questions 6-10) can only gain hits where it asks about
the same facts. A test question "shares a fact" with the traffic half when the source
sentence that answers it (the sentence holding a gold answer and the most of the question's
key words, :func:`~cos_integrations.serving.hit_rule.supporting_sentence`) also answers a traffic
question. Over the data alone this is the ceiling of what any teaching of the traffic half
can reach. For each recorded ``--refine-from-traffic`` run it then prints, per phase, why
each test question missed (below the threshold, routing disagrees, no focused sentence,
answer not in the context, not supported), the test misses before refinement that share a
fact with the traffic half (the reachable ones), how many of those have the collection's
top chunk in their own document (rag's rows; elsewhere the routing check keeps them a
miss whatever the summary learns), and how many became hits. With ``--index`` (the run's
``OUT.index-*`` directory; one run) it also prints, for each reachable miss, its
similarity to its summary before refinement and to the current summary with every shared
fact's sentence appended: what a perfect teacher of the traffic half would move.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from cos_integrations.metrics import normalize_answer
from cos_integrations.research.jsonl import read_jsonl
from cos_integrations.serving.hit_rule import supporting_sentence


def _answering(question: str, answers: list[str], text: str) -> dict[str, str]:
    """The source sentences that answer ``question`` (one per gold answer), by their
    normalised text: the keys are the "facts" compared across questions."""
    found = (supporting_sentence(a, question, text) for a in answers)
    return {normalize_answer(s): s for s in found if s}


def _why(row: dict, threshold: float) -> str:
    checks = row.get("checks") or {}
    if row["hit"]:
        return "hit"
    if checks.get("answered_miss"):  # past the threshold and the routing: the judge decided
        return "answer not in context" if not checks.get("in_context") else "not supported"
    if row["best_score"] < threshold:
        return "below threshold"
    if checks.get("routed") is False:
        return "routing disagrees"
    if checks.get("focused") is False:
        return "no focused sentence"
    if not checks.get("in_context"):
        return "answer not in context"
    if not checks.get("supported"):
        return "not supported"
    return "other"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="*", type=Path)
    ap.add_argument("--data", type=Path, default=Path("../shared/data/squad-v1.1-dev-chunks.jsonl"))
    ap.add_argument("--docs", type=int, default=30)
    ap.add_argument("--questions", type=int, default=10)
    ap.add_argument("--index", type=Path, help="the run's index: similarity after teaching")
    args = ap.parse_args()
    docs = {}
    for line in args.data.read_text().splitlines():
        d = json.loads(line)
        docs[d["doc_id"]] = d
    first = list(docs.values())[: args.docs]
    total = shared = unsupported = 0
    for d in first:
        qas = d["qas"][: args.questions]
        half = len(qas) // 2
        taught = set().union(
            *(set(_answering(q["question"], q["answers"], d["text"])) for q in qas[:half])
        )
        for q in qas[half:]:
            total += 1
            facts = set(_answering(q["question"], q["answers"], d["text"]))
            unsupported += not facts
            shared += bool(facts & taught)
    print(f"## The data: the first {len(first)} documents of {args.data.name}\n")
    print(f"- test questions: {total}")
    print(f"- sharing a fact with the traffic half: {shared} ({shared / total:.0%})")
    print(f"- with no single source sentence that answers them: {unsupported}\n")
    for run in args.runs:
        every = read_jsonl(run)
        rows = [r for r in every if r["method"] == "fallback" and r.get("questions_after")]
        top = {  # the document of the collection's top chunk, from rag's rows
            (r["doc_id"], q["question"]): q["docs"][0]
            for r in every
            if r["method"] == "rag"
            for q in r["questions"]
            if q.get("docs")
        }
        print(f"## {run.name}: {len(rows)} documents\n")
        print("| phase | hits | " + " | ".join(REASONS) + " |")
        print("|---|---|" + "---|" * len(REASONS))
        for phase in ("questions", "questions_after"):
            why = Counter(_why(q, r["threshold"]) for r in rows for q in r[phase])
            n = sum(why.values())
            name = "before" if phase == "questions" else "after"
            cells = " | ".join(str(why[k]) for k in REASONS)
            print(f"| {name} | {why['hit']}/{n} | {cells} |")
        reach = gained = routable = 0
        index = None
        if args.index:
            from cos_integrations.cli.common import open_index

            index = open_index(args.index)
        for r in rows:
            d = docs[r["doc_id"]]
            qas = {q["question"]: q for q in d["qas"][: args.questions]}
            taught = set()
            for t in r["traffic"]:
                q = qas[t["question"]]
                taught |= set(_answering(q["question"], q["answers"], d["text"]))
            for b, a in zip(r["questions"], r["questions_after"], strict=True):
                q = qas[b["question"]]
                answering = _answering(q["question"], q["answers"], d["text"])
                shared = [x for key, x in answering.items() if key in taught]
                if not b["hit"] and shared:
                    reach += 1
                    if index is not None:
                        summary = index.store.current_summary(r["doc_id"]).text
                        have = normalize_answer(summary)
                        new = [x for x in shared if normalize_answer(x) not in have]
                        text = " ".join([summary, *new])
                        vec = index.embedder.embed_documents([text])[0]
                        query = index.embedder.embed_query(b["question"])
                        sim = sum(x * y for x, y in zip(vec, query, strict=True))
                        print(
                            f"- {b['question'][:60]!r}: {b['best_score']:.3f} before, "
                            f"{sim:.3f} taught (threshold {r['threshold']:.3f})"
                        )
                    gained += a["hit"]
                    routable += top.get((r["doc_id"], b["question"])) == r["doc_id"]
        print(
            f"\nTest misses before refinement that share a fact with the traffic half: "
            f"{reach}, of which {routable} have the collection's top chunk in their own "
            f"document (the routing check can agree); hits after: {gained}.\n"
        )
        repeated(rows)


def repeated(rows: list[dict]) -> None:
    """Repeated traffic (``--repeat-traffic``): each traffic miss whose answer is in its
    source, what its refine job did (on which document) and why it missed again, asked
    the same and in a paraphrase."""
    rows = [r for r in rows if r.get("traffic_again")]
    if not rows:
        return
    print(
        "| question | refined (document: outcome) | asked again | F1 miss -> again | paraphrase |"
    )
    print("|---|---|---|---|---|")
    again: Counter = Counter()
    said: Counter = Counter()
    hits: list[tuple[float, float]] = []  # (F1 as the miss, F1 as the hit) of repeats that hit
    said_hits: list[tuple[float, float]] = []  # (F1 of the miss, F1 of its paraphrase) that hit
    for r in rows:
        jobs: dict[str, list[dict]] = {}
        for j in r.get("refine", []):  # a retargeted job is followed by the next document's
            jobs.setdefault(j["query"], []).append(j)
        pairs = zip(r["traffic"], r["traffic_again"], r["paraphrases"], strict=True)
        for b, a, p in pairs:
            if b["hit"] or not b.get("in_source"):
                continue
            steps = [
                f"{'own' if j['doc_id'] == r['doc_id'] else 'other: ' + j['doc_id']}: {j['status']}"
                for j in jobs.get(b["question"], [])
            ]
            where = " -> ".join(steps) or "no job"
            why_a, why_p = _why(a, r["threshold"]), _why(p, r["threshold"])
            again[why_a] += 1
            said[why_p] += 1
            if a["hit"]:
                hits.append((b["f1"], a["f1"]))
            if p["hit"]:
                said_hits.append((b["f1"], p["f1"]))
                if (p.get("checks") or {}).get("paraphrase"):
                    why_p += " (by meaning)"  # HitRule.answered_miss_similarity's route
            f1 = f"{b['f1']:.2f} -> {a['f1']:.2f}"
            print(f"| {b['question'][:60]} | {where} | {why_a} | {f1} | {why_p} {p['f1']:.2f} |")
    print(f"\nAsked again: {dict(again)}; paraphrased: {dict(said)}.")
    for name, got in (("Repeats", hits), ("Paraphrases", said_hits)):
        if got:
            before = sum(h[0] for h in got) / len(got)
            after = sum(h[1] for h in got) / len(got)
            print(f"{name} that hit: {len(got)}, F1 {before:.3f} as misses -> {after:.3f} as hits.")
    print()


REASONS = (
    "below threshold",
    "routing disagrees",
    "no focused sentence",
    "answer not in context",
    "not supported",
)

if __name__ == "__main__":
    main()
