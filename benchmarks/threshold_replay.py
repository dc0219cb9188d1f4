"""A higher similarity bar in front of the judge, replayed on the records of
``benchmarks/four_sets.sh`` (no model calls): for each bar (a percentile of the similarity
of the questions the judge was asked), a judged question below it becomes a miss - its
answer and prompt tokens those of ``rag`` on the same question (a miss reads the same top
chunks) - and every other question keeps its record. Prints F1, prompt tokens against
rag's, hits and wrong hits (F1 < 0.5) per set and bar. With the similarity-only rule
(``--judge score`` runs) every question over the threshold is a hit and is replayed the same
way; ``--chunks-from TAG`` reads the rag rows of another run of the same questions.

    python benchmarks/threshold_replay.py [--tag four] [--sets squad,covid,fairy,german]
    python benchmarks/threshold_replay.py --tag scorechunk --chunks-from four
"""

from __future__ import annotations

import argparse

import numpy as np
from four_sets_table import KINDS, LABELS, mean, rows

PERCENTILES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)


def replay(tag: str, sets: list[str], chunks_from: str | None = None) -> None:
    print("| text | bar (percentile) | F1 | prompt tokens vs rag | hits | wrong hits |")
    print("|---|---|---|---|---|---|")
    for dataset in sets:
        kind = LABELS.get(dataset, dataset)
        runs = rows(tag, dataset)
        fb, rag = runs["fallback"], rows(chunks_from or tag, dataset)["rag"]
        # the questions past the threshold: judged by the model, or hits on similarity alone
        judged = [k for k, q in fb.items() if "answered" in (q.get("checks") or {}) or q["hit"]]
        scores = np.array([fb[k]["best_score"] for k in judged])
        rag_tokens = mean([rag[k]["prompt_tokens"] for k in fb])
        for pct in PERCENTILES:
            bar = float(np.quantile(scores, pct)) if pct else float("-inf")
            f1, tokens, hits, wrong = [], [], 0, 0
            for k, q in fb.items():
                if k in judged and q["best_score"] < bar:
                    f1.append(rag[k]["f1"])
                    tokens.append(rag[k]["prompt_tokens"])
                    continue
                f1.append(q["f1"])
                tokens.append(q["prompt_tokens"])
                hits += bool(q["hit"])
                wrong += bool(q["hit"]) and q["f1"] < 0.5
            print(
                f"| {kind} | {pct:.0%} | {mean(f1):.3f} | {mean(tokens) / rag_tokens:.0%} | "
                f"{hits} | {wrong} |"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tag", default="four")
    parser.add_argument("--chunks-from", metavar="TAG", help="the rag rows from this run")
    parser.add_argument("--sets", default=",".join(KINDS))
    args = parser.parse_args()
    replay(args.tag, args.sets.split(","), args.chunks_from)
