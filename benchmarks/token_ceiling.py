"""Can any hit rule over this judge meet the token goal and the wrong-hit goal together?
On the records of one ``benchmarks/four_sets.sh`` run (no model calls).

A hit costs the judge's prompt; a miss costs the judge's prompt (when it was asked) and
rag's. Two oracles decide with the gold answers in hand, over the same judge's replies:

- **decides after the judge**: every question the run judged pays the judge; the oracle
  takes the judge's answer exactly where it is right (F1 >= 0.5), plus as many wrong ones
  as the wrong-hit goal allows (a tenth of the hits; those that save the most tokens);
  every other question reads rag's chunks. The cheapest any rule over this judge can be
  that reads the judge's reply before it decides (the model judge, a confidence bar).
- **knows before the judge**: the same hits, and no judge's call where the oracle will
  not hit (a question that misses costs rag's prompt alone): the cheapest any rule can
  be, with these summaries, this read and this judge, whatever it looks at.
- **a judge as right as the chunks**: the second oracle with a judge that is right on
  every question ``rag`` answers right, at the run's mean judge prompt: how far a better
  judge over the same read could go.

Prints, per set: the questions whose judge's answer is right, the run's prompt tokens and
the two oracles' as a share of rag's, and the oracles' F1 (hits: the judge's answer,
misses: rag's) against rag's and rag-ordered's. A share above 75% means the release goal
(<= 75% of rag's prompt tokens with <= 10% wrong hits) is out of reach for every hit rule
over this judge and read.

    python benchmarks/token_ceiling.py [--tag four] [--sets squad,covid,fairy,german]
"""

from __future__ import annotations

import argparse

from four_sets_table import KINDS, LABELS, header, languages, mean, row, rows

from cos_integrations.metrics import squad_f1

RIGHT = 0.5  # an answer with F1 >= 0.5 is right (the wrong-hit count's rule)
WRONG_SHARE = 0.10  # the goal: at most a tenth of the hits wrong


def ceiling(tag: str, sets: list[str]) -> None:
    header(
        [
            "text",
            "questions",
            "judged",
            "judge's answer right",
            "prompt tokens vs rag: run",
            "oracle deciding after the judge",
            "oracle knowing before it",
            "judge as right as rag, knowing before it",
            "oracles' F1 (rag, rag-ordered)",
        ]
    )
    for dataset in sets:
        runs = rows(tag, dataset)
        fb, rag, ordered = runs["fallback"], runs["rag"], runs["rag-ordered"]
        language = languages(dataset)
        rag_tokens = sum(rag[key]["prompt_tokens"] for key in fb)
        run_tokens = sum(q["prompt_tokens"] for q in fb.values())
        judged: dict = {}  # key -> (judge's prompt tokens, judge's F1)
        for key, q in fb.items():
            if q.get("judge_answer") is None:
                continue
            cost = (
                q["prompt_tokens"]
                if q.get("hit")
                else q["prompt_tokens"] - rag[key]["prompt_tokens"]
            )
            judged[key] = (cost, squad_f1(q["judge_answer"], q["gold"], language.get(key[0], "en")))
        right = [key for key, (_, f1) in judged.items() if f1 >= RIGHT]
        # the wrong answers that save the most tokens as hits, at most a ninth of the right
        allowed = int(len(right) * WRONG_SHARE / (1 - WRONG_SHARE))
        wrong = sorted(
            (key for key, (_, f1) in judged.items() if f1 < RIGHT),
            key=lambda key: judged[key][0] - rag[key]["prompt_tokens"],
        )[:allowed]
        hits = set(right) | set(wrong)
        after = sum(
            judged[key][0] + (0 if key in hits else rag[key]["prompt_tokens"])
            if key in judged
            else rag[key]["prompt_tokens"]
            for key in fb
        )
        before = sum(judged[key][0] if key in hits else rag[key]["prompt_tokens"] for key in fb)
        share = mean([judged[key][0] / rag[key]["prompt_tokens"] for key in judged])
        rag_right = sum(rag[key]["f1"] >= RIGHT for key in fb) / len(fb)
        f1 = mean([judged[key][1] if key in hits else rag[key]["f1"] for key in fb])
        rag_f1 = mean([rag[key]["f1"] for key in fb])
        ordered_f1 = mean([ordered[key]["f1"] for key in fb])
        row(
            [
                LABELS.get(dataset, dataset),
                str(len(fb)),
                str(len(judged)),
                f"{len(right)} ({len(right) / len(fb):.0%})",
                f"{run_tokens / rag_tokens:.0%}",
                f"{after / rag_tokens:.0%}",
                f"{before / rag_tokens:.0%}",
                f"{1 - rag_right * (1 - share):.0%} ({rag_right:.0%} right)",
                f"{f1:.3f} ({rag_f1:.3f}, {ordered_f1:.3f})",
            ]
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tag", default="four")
    parser.add_argument("--sets", default=",".join(KINDS))
    args = parser.parse_args()
    ceiling(args.tag, args.sets.split(","))
