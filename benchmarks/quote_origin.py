"""Where a hit's quote comes from, on the records of ``benchmarks/four_sets.sh`` (no model
calls): the focused read holds sentences of the best summary and of its document's best
chunk, and a hit's quote must copy the source too (``in_source``); does it also copy the
summary the run read (``benchmarks/results/summaries-SET.docs.jsonl``), or only the
chunk? Prints, per set, the hits whose quote the summary holds and those it does not, each
with how many were right (F1 >= 0.5).

    python benchmarks/quote_origin.py [--tag four]
"""

from __future__ import annotations

import argparse

from four_sets_table import KINDS, RESULTS, rows

from cos_integrations.research.jsonl import read_jsonl
from cos_integrations.text import quote_span


def summaries(dataset: str) -> dict[str, str]:
    """The summary each document's index held (the run's recorded zero-shot summaries)."""
    path = RESULTS / f"summaries-{dataset}.docs.jsonl"
    return {r["doc_id"]: r["summary"] for r in read_jsonl(path) if r.get("summary")}


def origins(tag: str) -> None:
    print("| text | hits | quote in the summary (right) | quote in the chunk only (right) |")
    print("|---|---|---|---|")
    for dataset, kind in KINDS.items():
        summary = summaries(dataset)
        hits = [q for q in rows(tag, dataset)["fallback"].values() if q.get("hit")]
        counts = {True: [0, 0], False: [0, 0]}
        for q in hits:
            doc = q.get("hit_doc") or q.get("best_doc") or ""
            held = quote_span(q.get("quote") or "", summary.get(doc, "")) is not None
            counts[held][0] += 1
            counts[held][1] += q["f1"] >= 0.5
        (s, s_ok), (c, c_ok) = counts[True], counts[False]
        print(f"| {kind} | {len(hits)} | {s} ({s_ok}) | {c} ({c_ok}) |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tag", default="four")
    origins(parser.parse_args().tag)
