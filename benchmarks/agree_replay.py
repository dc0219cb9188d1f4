"""Repeats of answered misses with the judge's agreement required, replayed on the records of
a repeated-traffic run of ``benchmarks/four_sets.sh`` (``EXTRA="--refine-from-traffic
--repeat-traffic --no-paraphrases"``; no model calls).

A traffic question that missed, and whose answer a refine job then found in the source,
takes the answered-miss route when asked again. The run's rule before this change made
such a repeat a hit on the grounding alone; requiring the judge's answer to agree with
the job's (``checks["agrees"]``, recorded on every such repeat) turns a disagreeing one
into a miss. A miss reads the collection's top-k source chunks, which refinement does not
change, with the same answer call: the first ask's read (a route is only taken by a query
that missed before), so the replayed repeat gets its first ask's answer, exactly. Prints,
per set, the repeats, the route's hits and how many of them disagreed, and the traffic's
F1 on the first ask, as run and replayed, each paired against the first ask, and the
replay paired against the run.

    python benchmarks/agree_replay.py [--tag refine] [--sets squad,covid,fairy,german]
"""

from __future__ import annotations

import argparse

from four_sets_table import KINDS, LABELS, RESULTS, header, languages, mean, row

from cos_integrations.metrics import squad_f1
from cos_integrations.research.jsonl import read_jsonl


def pair(a: list[float], b: list[float]) -> str:
    better = sum(x > y + 1e-9 for x, y in zip(a, b, strict=True))
    worse = sum(x < y - 1e-9 for x, y in zip(a, b, strict=True))
    return f"{better} / {worse}"


def replay(tag: str, sets: list[str]) -> None:
    header(
        [
            "text",
            "repeats",
            "route hits (judge disagreed)",
            "F1 first ask",
            "again, as run (vs first)",
            "again, agreement required (vs first)",
            "replay vs run",
            "missed, answer in source: hit again, run / replay",
            "their F1 first -> again, run / replay",
        ]
    )
    for dataset in sets:
        language = languages(dataset)
        first, run, agree = [], [], []
        route = disagreed = 0
        missed = []  # (first F1, run F1, replay F1, run hit, replay hit)
        for rec in read_jsonl(RESULTS / f"{tag}-{dataset}.json.docs.jsonl"):
            if rec.get("method") != "fallback" or "traffic_again" not in rec:
                continue
            lang = language.get(rec["doc_id"], "en")
            asked = {q["question"]: q for q in rec["traffic"]}
            for q in rec["traffic_again"]:
                was = squad_f1(asked[q["question"]].get("answer") or "", q["gold"], lang)
                now = squad_f1(q.get("answer") or "", q["gold"], lang)
                checks = q.get("checks") or {}
                taken = bool(q.get("hit") and checks.get("answered_miss"))
                turned = taken and checks.get("agrees") is False
                route += taken
                disagreed += turned
                first.append(was)
                run.append(now)
                agree.append(was if turned else now)
                before = asked[q["question"]]
                if not before["hit"] and before.get("in_source"):
                    hit = bool(q.get("hit"))
                    missed.append((was, now, agree[-1], hit, hit and not turned))
        row(
            [
                LABELS.get(dataset, dataset),
                str(len(run)),
                f"{route} ({disagreed})",
                f"{mean(first):.3f}",
                f"{mean(run):.3f} ({pair(run, first)})",
                f"{mean(agree):.3f} ({pair(agree, first)})",
                pair(agree, run),
                f"{sum(m[3] for m in missed)} / {sum(m[4] for m in missed)} of {len(missed)}",
                f"{mean([m[0] for m in missed]):.3f} -> {mean([m[1] for m in missed]):.3f} / "
                f"{mean([m[2] for m in missed]):.3f}",
            ]
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tag", default="refine")
    parser.add_argument("--sets", default=",".join(KINDS))
    args = parser.parse_args()
    replay(args.tag, args.sets.split(","))
