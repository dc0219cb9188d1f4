"""One ``.docs.jsonl`` of summary records from several runs, for ``cos eval
--summaries-from``. Each argument is ``FILE[=METHOD[=NEWNAME]]``: FILE's records (plain or
packed ``.gz``), only those of METHOD when given, renamed NEWNAME when given (another run's
summaries as one more strategy row).

    python benchmarks/merge_summaries.py run.docs.jsonl old.docs.jsonl=zero-shot=zero-shot-120w
"""

from __future__ import annotations

import json
import sys

from cos_integrations.research.jsonl import existing, read_jsonl


def main(args: list[str]) -> None:
    if not args:
        raise SystemExit(__doc__)
    for spec in args:
        path, method, name = (spec.split("=", 2) + ["", ""])[:3]
        if existing(path) is None:
            raise SystemExit(f"{path}: no such file (nor {path}.gz)")
        for rec in read_jsonl(path):
            if not method or rec.get("method") == method:
                print(json.dumps({**rec, "method": name} if name else rec))


if __name__ == "__main__":
    main(sys.argv[1:])
