"""Reassemble whole SQuAD articles from the chunks (by title) as long documents, with
held-out questions spread evenly over the article.

    python benchmarks/make_long_docs.py --out /tmp/squad-long.jsonl --articles 8
"""

from __future__ import annotations

import argparse
import json
from collections import OrderedDict
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "squad-v1.1-dev-chunks.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--articles", type=int, default=8)
    ap.add_argument("--questions", type=int, default=10)
    ap.add_argument("--min-words", type=int, default=3000)
    ap.add_argument("--max-words", type=int, default=8000)
    args = ap.parse_args()
    by_title: OrderedDict[str, list[dict]] = OrderedDict()
    for line in open(DATA):
        row = json.loads(line)
        by_title.setdefault(row["title"], []).append(row)
    written = 0
    with open(args.out, "w") as out:
        for title, chunks in by_title.items():
            words = sum(len(c["text"].split()) for c in chunks)
            if not args.min_words <= words <= args.max_words:
                continue
            text = "\n\n".join(c["text"] for c in chunks)
            # evenly spread: one question from each chunk in turn
            pools = [list(c["qas"]) for c in chunks]
            qas = []
            while len(qas) < args.questions and any(pools):
                for pool in pools:
                    if pool and len(qas) < args.questions:
                        qas.append(pool.pop(0))
            out.write(
                json.dumps(
                    {
                        "doc_id": f"squad-article:{title}",
                        "title": title,
                        "text": text,
                        "qas": qas,
                        "source": "SQuAD v1.1 dev",
                        "license": "CC BY-SA 4.0",
                    }
                )
                + "\n"
            )
            written += 1
            if written >= args.articles:
                break
    print(f"wrote {written} articles to {args.out}")


if __name__ == "__main__":
    main()
