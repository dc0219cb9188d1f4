"""Compress run records for the repository: every plain ``benchmarks/results/*.jsonl``
(a run's ``.docs.jsonl``, merged ``.summaries.jsonl``, the answer caches) becomes
``NAME.jsonl.gz``, reproducibly (an unchanged file packs to the same bytes). The readers
(``cos eval`` resume, ``--summaries-from``, ``--answer-cache``, the scripts here) take the
plain name and read either, so BENCHMARKS.md's commands are unchanged. The eval scripts run
this at their end; run it by hand after a ``cos eval`` of your own.

    python benchmarks/pack_results.py [FILE.jsonl ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

from cos_integrations.research.jsonl import pack

RESULTS = Path(__file__).parent / "results"
# regenerated inputs (make_collection.py, make_long_docs.py), ignored by git: left as they are
INPUTS = ("distractors-", "long-docs")


def main(args: list[str]) -> None:
    paths = [Path(a) for a in args] or sorted(RESULTS.glob("*.jsonl"))
    for path in paths:
        if path.name.startswith(INPUTS) or not path.is_file():
            continue
        before = path.stat().st_size
        archive = pack(path)
        print(f"{archive}: {before:,} -> {archive.stat().st_size:,} bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
