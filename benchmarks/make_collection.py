"""Distractors for a collection of real size (issue 28 item 2): documents from the rest of
``../shared/data`` that ``cos eval --distractors`` indexes beside the questioned SQuAD dev
chunks and never asks about.

    python benchmarks/make_collection.py --skip 30 --squad 120 --fairytale 30 --covid 20 \
        --out benchmarks/results/distractors-170.jsonl

SQuAD dev chunks after the first ``--skip`` (other articles than the questioned ones: the
first 30 chunks are 3 articles), FairytaleQA stories and COVID-QA papers, the last two cut
to their first ``--words`` words so that every distractor is a document of a SQuAD chunk's
size (the long-document case is item 3's). Rows interleave the sources.
"""

from __future__ import annotations

import argparse
import json
from itertools import zip_longest
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip", type=int, default=30, help="questioned SQuAD chunks to leave out")
    ap.add_argument("--squad", type=int, default=120)
    ap.add_argument("--fairytale", type=int, default=30)
    ap.add_argument("--covid", type=int, default=20)
    ap.add_argument("--words", type=int, default=600)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    squad = rows("squad-v1.1-dev-chunks.jsonl")[args.skip : args.skip + args.squad]

    def cut(r: dict) -> dict:
        words = r["text"].split()
        return {"doc_id": r["doc_id"], "title": r["title"], "text": " ".join(words[: args.words])}

    fairy = [cut(r) for r in rows("fairytaleqa-train.jsonl")[: args.fairytale]]
    covid = [cut(r) for r in rows("covidqa-part-a.jsonl")[: args.covid]]
    out = []
    for group in zip_longest(squad, fairy, covid):
        out += [{k: r[k] for k in ("doc_id", "title", "text")} for r in group if r]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in out))
    print(f"wrote {args.out}: {len(out)} distractors")


if __name__ == "__main__":
    main()
