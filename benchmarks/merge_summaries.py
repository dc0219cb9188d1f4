"""One ``.docs.jsonl`` of summary records from several runs, for ``cos eval
--summaries-from``: the first file as it is, then ``FILE=METHOD=NEWNAME`` adds FILE's
records of METHOD renamed NEWNAME (another run's summaries as one more strategy row).

    python benchmarks/merge_summaries.py run.docs.jsonl old.docs.jsonl=zero-shot=zero-shot-120w
"""

from __future__ import annotations

import json
import sys


def main(args: list[str]) -> None:
    first, *extra = args
    for line in open(first, encoding="utf-8"):
        if line.strip():
            sys.stdout.write(line if line.endswith("\n") else line + "\n")
    for spec in extra:
        path, method, name = spec.split("=", 2)
        for line in open(path, encoding="utf-8"):
            rec = json.loads(line) if line.strip() else None
            if rec and rec.get("method") == method:
                print(json.dumps({**rec, "method": name}))


if __name__ == "__main__":
    main(sys.argv[1:])
