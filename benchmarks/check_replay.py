"""Each grounding check of the hit rule left out, replayed on the records of one
``benchmarks/four_sets.sh`` run (no model calls). Every judged question's record holds the
judge's answer and every check's outcome (they are all computed, whichever fails first),
so leaving a check out is exact: a judged miss whose only failed required checks are the
ones left out becomes a hit with the judge's answer (its F1 recomputed in the document's
language), every other question keeps its record. A miss that turns into a hit saves its
answer call: its prompt tokens become its judge call's (the miss's tokens less rag's for
the question, the same answer call over the same chunks). Prints, per set and per check
left out, the questions it turned into hits and how many of them are right (F1 >= 0.5),
then F1, prompt tokens, hit rate and wrong hits with and without it, and the replay
paired against the run and against ``rag-ordered``.

    python benchmarks/check_replay.py [--tag four] [--sets squad,covid,fairy,german]
"""

from __future__ import annotations

import argparse

from four_sets_table import KINDS, LABELS, header, languages, mean, paired, row, rows

from cos_integrations.metrics import squad_f1
from cos_integrations.serving.hit_rule import HitRule

# what can be left out: each required check alone, and the quote's two checks together
# (``in_quote`` fails with ``in_source`` whenever the answer is not in the quote)
LEFT_OUT: tuple[tuple[str, ...], ...] = (
    ("not_echo",),
    ("in_source",),
    ("in_quote", "in_source"),
    ("quoted", "in_quote", "in_source"),
)


def replay(tag: str, sets: list[str]) -> None:
    required = HitRule(judge="llm").required_checks()
    header(
        [
            "text",
            "left out",
            "misses turned hits (right)",
            "fallback F1: run / replay",
            "prompt tokens: run / replay",
            "hit rate: run / replay",
            "wrong hits: run / replay",
            "replay vs run (better / worse)",
            "replay vs rag-ordered",
        ]
    )
    for dataset in sets:
        runs = rows(tag, dataset)
        lang = languages(dataset)
        fb, rag, ordered = runs["fallback"], runs["rag"], runs["rag-ordered"]
        for left in LEFT_OUT:
            kept = [c for c in required if c not in left]
            replayed, turned = {}, []
            for key, q in fb.items():
                checks = q.get("checks") or {}
                judged = "answered" in checks and not q.get("hit")
                if judged and all(checks.get(c) for c in kept):
                    f1 = squad_f1(q.get("judge_answer") or "", q["gold"], lang.get(key[0], "en"))
                    judge = max(q.get("prompt_tokens", 0) - rag[key].get("prompt_tokens", 0), 0)
                    replayed[key] = {**q, "hit": True, "f1": f1, "prompt_tokens": judge}
                    turned.append(key)
                else:
                    replayed[key] = q

            def stats(run: dict) -> tuple[str, str, str, str]:
                hits = [k for k, q in run.items() if q.get("hit")]
                wrong = sum(run[k]["f1"] < 0.5 for k in hits)
                return (
                    f"{mean([q['f1'] for q in run.values()]):.3f}",
                    f"{mean([q.get('prompt_tokens', 0) for q in run.values()]):.0f}",
                    f"{len(hits) / len(run):.0%}",
                    f"{wrong} of {len(hits)}",
                )

            before, after = stats(fb), stats(replayed)
            right = sum(replayed[k]["f1"] >= 0.5 for k in turned)
            cells = [
                LABELS.get(dataset, dataset),
                ", ".join(left),
                f"{len(turned)} ({right})",
                *(f"{a} / {b}" for a, b in zip(before, after, strict=True)),
                paired(replayed, fb),
                f"{paired(replayed, ordered)} (run {paired(fb, ordered)})",
            ]
            row(cells)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tag", default="four")
    parser.add_argument("--sets", default=",".join(KINDS))
    args = parser.parse_args()
    replay(args.tag, args.sets.split(","))
