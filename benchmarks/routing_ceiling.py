"""The most any hit rule could give with this model and these summaries, on the records of
``benchmarks/four_sets.sh`` (no model calls). For every question the judge was asked, a
perfect rule would take the judge's answer when it scores higher than the chunks' and the
chunks' otherwise; a question below the threshold is the chunks' either way. The chunks'
answer is ``rag``'s (a miss reads rag's top-k chunks with the same answer call) or, for
misses read in document order, ``rag-ordered``'s. Prints, per set, the F1 of the run's rows
and of the two ceilings.

    python benchmarks/routing_ceiling.py [--tag four] [--sets squad,covid,fairy,german]
"""

from __future__ import annotations

import argparse

from four_sets_table import KINDS, LABELS, languages, mean, rows

from cos_integrations.metrics import squad_f1


def ceiling(tag: str, sets: list[str]) -> None:
    print(
        "| text | fallback F1 | rag F1 | rag-ordered F1 | perfect hit rule, misses as rag "
        "| perfect hit rule, misses in document order |"
    )
    print("|---|---|---|---|---|---|")
    for dataset in sets:
        kind = LABELS.get(dataset, dataset)
        runs = rows(tag, dataset)
        fb, rag, ordered = runs["fallback"], runs["rag"], runs["rag-ordered"]
        language = languages(dataset)
        ranked, in_order = [], []
        for key, q in fb.items():
            judge = None
            if q.get("judge_answer") is not None:
                judge = squad_f1(q["judge_answer"], q["gold"], language.get(key[0], "en"))
            ranked.append(max(judge, rag[key]["f1"]) if judge is not None else rag[key]["f1"])
            best = ordered[key]["f1"]
            in_order.append(max(judge, best) if judge is not None else best)
        f1 = [mean([q["f1"] for q in run.values()]) for run in (fb, rag, ordered)]
        print(
            f"| {kind} | {f1[0]:.3f} | {f1[1]:.3f} | {f1[2]:.3f} | {mean(ranked):.3f} | "
            f"{mean(in_order):.3f} |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tag", default="four")
    parser.add_argument("--sets", default=",".join(KINDS))
    args = parser.parse_args()
    ceiling(args.tag, args.sets.split(","))
