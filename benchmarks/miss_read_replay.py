"""The product's misses reading another row's context, replayed on the records of one
``benchmarks/four_sets.sh`` run that has that row (no model calls). A miss reads the same
top-k chunks as ``rag`` with the same answer call (the script counts the misses whose
answer is rag's, question by question), and every row of a run shares that answer call, so
a miss that read another row's context would have given that row's answer: each miss takes
that row's answer, each hit keeps its own. ``--miss rag-ordered`` (the default): the same
chunks in document order, an exact replay. ``--miss parent-doc`` (a run with
``METHODS=...,parent-doc``): ``ParentDocumentRetriever``'s parents; there a miss's prompt
tokens are estimated as its judge call's (the miss's tokens less rag's for the question)
plus that row's. Prints, per set, the F1 and prompt tokens a question as run and replayed,
and the replay paired against the run, the row read and rag.

    python benchmarks/miss_read_replay.py [--tag four] [--miss rag-ordered]
    python benchmarks/miss_read_replay.py --tag peers --miss parent-doc
"""

from __future__ import annotations

import argparse

from four_sets_table import KINDS, LABELS, PEER_NAMES, header, mean, paired, row, rows


def replay(tag: str, miss: str, sets: list[str]) -> None:
    header(
        [
            "text",
            "misses (answer = rag's)",
            "fallback F1",
            f"misses reading {miss}",
            "replay vs run (better / worse)",
            f"replay vs {miss}",
            "replay vs rag",
            "prompt tokens: run / replay / rag",
        ]
    )
    for dataset in sets:
        runs = rows(tag, dataset)
        fb, rag, other = runs["fallback"], runs["rag"], runs[miss]
        misses = [k for k, q in fb.items() if not q.get("hit")]
        same = sum(fb[k]["answer"] == rag[k]["answer"] for k in misses)
        replayed = {}
        for key, q in fb.items():
            if key not in misses:
                replayed[key] = q
                continue
            judge = max(q.get("prompt_tokens", 0) - rag[key].get("prompt_tokens", 0), 0)
            replayed[key] = {**other[key], "prompt_tokens": judge + other[key]["prompt_tokens"]}

        def tokens(run: dict) -> str:
            return f"{mean([q.get('prompt_tokens', 0) for q in run.values()]):.0f}"

        cells = [
            LABELS.get(dataset, dataset),
            f"{len(misses)} ({same})",
            f"{mean([q['f1'] for q in fb.values()]):.3f}",
            f"{mean([q['f1'] for q in replayed.values()]):.3f}",
            paired(replayed, fb),
            paired(replayed, other),
            paired(replayed, rag),
            f"{tokens(fb)} / {tokens(replayed)} / {tokens(rag)}",
        ]
        row(cells)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tag", default="four")
    parser.add_argument("--miss", default="rag-ordered", choices=sorted(PEER_NAMES))
    parser.add_argument("--sets", default=",".join(KINDS))
    args = parser.parse_args()
    replay(args.tag, args.miss, args.sets.split(","))
