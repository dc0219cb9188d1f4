"""BENCHMARKS.md's stream tables from `cos eval --stream` runs (benchmarks/stream_sets.sh).
No model call.

    python benchmarks/stream_table.py benchmarks/results/stream-squad.json [...]
    python benchmarks/stream_table.py --against A.json B.json


For each run: its rows as `cos eval` prints them (F1 over the stream and by kind of ask,
prompt tokens with refinement included and their share of rag's, calls, the share answered
with no call, wrong serves), as a Markdown table, and the product's asks paired with rag's
(better / worse by F1) from the run's ``OUT.stream-rows.jsonl``; each framework row beside
the product's, by the way an ask went (``fallback+llamaindex``, ``fallback+langchain``).
With ``--against A.json B.json``: the product's asks in two runs of the same stream (other
settings: a refine trigger, a bar), ask by ask: better / worse by F1 in B, asks served
differently, and each run's refine jobs by outcome.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cos_integrations.research.jsonl import read_jsonl
from cos_integrations.research.stream_eval import STREAM_COLUMNS, framework_lines, stream_table


def main(paths: list[str]) -> None:
    for path in paths:
        result = json.loads(Path(path).read_text())
        stream = result["stream"]
        print(
            f"\n{path}: {stream['asks']} asks over {stream['documents']} documents, "
            f"{stream['kinds']}; refinement {stream.get('refine')}\n"
        )
        print("| " + " | ".join(STREAM_COLUMNS) + " |")
        print("|" + "---|" * len(STREAM_COLUMNS))
        for row in stream_table(stream):
            print("| " + " | ".join(row) + " |")
        rows = {r["method"]: r["asks"] for r in read_jsonl(path + ".stream-rows.jsonl")}
        if "fallback" in rows and "rag" in rows:
            pairs = list(zip(rows["fallback"], rows["rag"], strict=True))
            better = sum(a["f1"] > b["f1"] + 1e-9 for a, b in pairs)
            worse = sum(a["f1"] < b["f1"] - 1e-9 for a, b in pairs)
            print(f"\nfallback against rag, ask by ask: {better} better / {worse} worse")
        for line in framework_lines(stream.get("frameworks") or {}):
            print(f"\n{line}")


def against(first: str, second: str) -> None:
    """The product's asks of two runs of one stream, paired (the same questions in order)."""
    runs = []
    for path in (first, second):
        rows = {r["method"]: r["asks"] for r in read_jsonl(path + ".stream-rows.jsonl")}
        runs.append(rows["fallback"])
        refine = json.loads(Path(path).read_text())["stream"].get("refine") or {}
        print(f"{path}: refine jobs {refine.get('jobs', 0)} {refine.get('outcomes', {})}")
    a, b = runs
    if [x["question"] for x in a] != [y["question"] for y in b]:
        raise SystemExit("the two runs asked different streams")
    better = sum(y["f1"] > x["f1"] + 1e-9 for x, y in zip(a, b, strict=True))
    worse = sum(y["f1"] < x["f1"] - 1e-9 for x, y in zip(a, b, strict=True))
    served = sum(bool(x.get("served")) != bool(y.get("served")) for x, y in zip(a, b, strict=True))
    print(
        f"{second} against {first}, ask by ask: {better} better / {worse} worse; "
        f"{served} of {len(a)} asks served with no call in one run only"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--against"] and len(sys.argv) == 4:
        against(sys.argv[2], sys.argv[3])
    else:
        main(sys.argv[1:])
