"""Long documents for the evaluation: whole SQuAD articles reassembled from the chunks (by
title), with held-out questions spread evenly over the article, interleaved with COVID-QA
articles of the same length range.

    python benchmarks/make_long_docs.py --out /tmp/long.jsonl --articles 4 --covid 4

Rows alternate SQuAD, COVID-QA, SQuAD, ... so ``cos eval --limit N`` takes both kinds.
"""

from __future__ import annotations

import argparse
import json
from collections import OrderedDict
from itertools import zip_longest
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def squad_articles(args: argparse.Namespace) -> list[dict]:
    by_title: OrderedDict[str, list[dict]] = OrderedDict()
    for line in open(DATA / "squad-v1.1-dev-chunks.jsonl"):
        row = json.loads(line)
        by_title.setdefault(row["title"], []).append(row)
    rows = []
    for title, chunks in by_title.items():
        words = sum(len(c["text"].split()) for c in chunks)
        if not args.min_words <= words <= args.max_words:
            continue
        pools = [list(c["qas"]) for c in chunks]  # evenly spread: one per chunk in turn
        qas: list[dict] = []
        while len(qas) < args.questions and any(pools):
            for pool in pools:
                if pool and len(qas) < args.questions:
                    qas.append(pool.pop(0))
        rows.append(
            {
                "doc_id": f"squad-article:{title}",
                "title": title,
                "text": "\n\n".join(c["text"] for c in chunks),
                "qas": qas,
                "source": "SQuAD v1.1 dev",
                "license": "CC BY-SA 4.0",
            }
        )
        if len(rows) >= args.articles:
            break
    return rows


def covid_articles(args: argparse.Namespace) -> list[dict]:
    rows = []
    for line in open(DATA / "covidqa-part-a.jsonl"):
        row = json.loads(line)
        words = len(row["text"].split())
        if args.min_words <= words <= args.max_words and len(row["qas"]) >= args.questions - 2:
            row["qas"] = row["qas"][: args.questions]
            rows.append(row)
        if len(rows) >= args.covid:
            break
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--articles", type=int, default=4, help="SQuAD articles")
    ap.add_argument("--covid", type=int, default=4, help="COVID-QA articles")
    ap.add_argument("--questions", type=int, default=10)
    ap.add_argument("--min-words", type=int, default=3000)
    ap.add_argument("--max-words", type=int, default=8000)
    args = ap.parse_args()
    squad, covid = squad_articles(args), covid_articles(args)
    with open(args.out, "w") as out:
        for pair in zip_longest(squad, covid):
            for row in pair:
                if row:
                    out.write(json.dumps(row) + "\n")
                    print(f"{row['doc_id'][:60]:60s} {len(row['text'].split()):6d} words")
    print(f"wrote {len(squad)} SQuAD and {len(covid)} COVID-QA articles to {args.out}")


if __name__ == "__main__":
    main()
