"""Question-keyed hits and a semantic answer cache, measured without a model (issue 13).

The lever: embed the questions a summary is proven to answer (here: the traffic half of each
document's human questions, as if every one had been answered and kept) and treat a test
question close to one of them as a hit on that document, or, closer still, answer it with
the recorded answer and no model call. This script measures what that could buy on the
same split as `cos eval --test-half` (first half of each document's questions = traffic,
second half = test), with the library's e5 embedder:

* routing: how often the nearest traffic question belongs to the test question's own
  document, beside how often the best summary does (from a recorded fallback run) and how
  often rag's top chunk does;
* the answer cache: at each similarity cut, how many test questions would be served from
  it, from the right document, and the F1 of the served answer against the test question's
  gold answers. The served answer is the traffic question's *gold* answer, so this F1 is an
  upper bound of what a recorded model answer could score.

    python benchmarks/question_keyed.py --limit 30 \
        --run benchmarks/results/rag-default-30.json.docs.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cos_integrations.embedded.embeddings import LocalEmbedder
from cos_integrations.metrics import squad_f1
from cos_integrations.research.jsonl import read_jsonl


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("../shared/data/squad-v1.1-dev-chunks.jsonl"))
    ap.add_argument("--limit", type=int, default=30)
    ap.add_argument("--run", type=Path, help="a cos eval docs.jsonl with fallback and rag rows")
    ap.add_argument("--cuts", default="0.90,0.93,0.95,0.97")
    args = ap.parse_args()
    docs = [json.loads(line) for line in args.data.read_text().splitlines()[: args.limit]]
    traffic, test = [], []
    for d in docs:
        qas = d["qas"][:10]
        half = len(qas) // 2
        traffic += [(d["doc_id"], q) for q in qas[:half]]
        test += [(d["doc_id"], q) for q in qas[half:]]
    e = LocalEmbedder()
    tv = [e.embed_query(q["question"]) for _, q in traffic]
    rows = []
    for doc_id, q in test:
        v = e.embed_query(q["question"])
        sims = [sum(a * b for a, b in zip(v, t, strict=True)) for t in tv]
        j = max(range(len(sims)), key=sims.__getitem__)
        served = traffic[j][1]["answers"][0]
        rows.append((sims[j], traffic[j][0] == doc_id, squad_f1(served, q["answers"])))
    n = len(rows)
    print(f"{n} test questions over {len(docs)} documents, {len(traffic)} traffic questions\n")
    print("| routing signal | right document |")
    print("|---|---|")
    print(f"| nearest traffic question | {sum(r[1] for r in rows) / n:.0%} |")
    if args.run:
        recs = read_jsonl(args.run)
        fb = [(r["doc_id"], q) for r in recs if r["method"] == "fallback" for q in r["questions"]]
        rag = [(r["doc_id"], q) for r in recs if r["method"] == "rag" for q in r["questions"]]
        best = sum(q.get("best_doc") == d for d, q in fb) / max(1, len(fb))
        top = sum(bool(q.get("docs")) and q["docs"][0] == d for d, q in rag) / max(1, len(rag))
        print(f"| best summary (fallback run) | {best:.0%} |")
        print(f"| rag's top chunk | {top:.0%} |")
    print(
        "\n| answer cache at cosine >= | served | share | right document"
        " | F1 of served (upper bound) |"
    )
    print("|---|---|---|---|---|")
    for cut in (float(c) for c in args.cuts.split(",")):
        hit = [r for r in rows if r[0] >= cut]
        if not hit:
            print(f"| {cut:.2f} | 0 | 0% | | |")
            continue
        right = sum(r[1] for r in hit) / len(hit)
        f1 = sum(r[2] for r in hit) / len(hit)
        print(f"| {cut:.2f} | {len(hit)} | {len(hit) / n:.0%} | {right:.0%} | {f1:.3f} |")


if __name__ == "__main__":
    main()
