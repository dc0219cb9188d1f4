"""Misses reading their chunks in document order, replayed on the records of
``benchmarks/four_sets.sh`` (no model calls). A miss reads the same top-k chunks as ``rag``
with the same answer call (the script checks that every miss's answer is rag's, question by
question), so a miss that read them in document order would have given ``rag-ordered``'s
answer: each miss takes that row's F1, each hit keeps its own. Prints, per set, the F1 as
run and replayed, and the replay paired against the run and against rag-ordered.

    python benchmarks/miss_order_replay.py [--tag four]
"""

from __future__ import annotations

import argparse

from four_sets_table import KINDS, mean, paired, rows


def replay(tag: str) -> None:
    print(
        "| text | misses (answer = rag's) | fallback F1 | misses in document order | "
        "replay vs run (better / worse) | replay vs rag-ordered |"
    )
    print("|---|---|---|---|---|---|")
    for dataset, kind in KINDS.items():
        runs = rows(tag, dataset)
        fb, rag, ordered = runs["fallback"], runs["rag"], runs["rag-ordered"]
        misses = [k for k, q in fb.items() if not q.get("hit")]
        same = sum(fb[k]["answer"] == rag[k]["answer"] for k in misses)
        replayed = {k: ordered[k] if k in misses else q for k, q in fb.items()}
        print(
            f"| {kind} | {len(misses)} ({same}) | {mean([q['f1'] for q in fb.values()]):.3f} | "
            f"{mean([q['f1'] for q in replayed.values()]):.3f} | {paired(replayed, fb)} | "
            f"{paired(replayed, ordered)} |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tag", default="four")
    replay(parser.parse_args().tag)
