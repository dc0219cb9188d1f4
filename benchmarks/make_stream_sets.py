"""The collections of ``benchmarks/stream_sets.sh``: for each kind of text, its two
``four_sets.sh`` slices questioned (``sets/NAME.jsonl`` and ``sets/NAME2.jsonl``), and as
distractors the 200 documents of the collection run (``collection-30+170``: SQuAD chunks,
FairytaleQA stories and COVID-QA papers cut to 600 words, every one summarised the shipped
way) less any the slices question; and one summaries file holding every document's
zero-shot summary (the slices' from ``summaries-NAME*.docs.jsonl``, the others' from the
collection run), for ``cos eval --summaries-from``. No model call.

    python benchmarks/make_stream_sets.py squad covid fairy german
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cos_integrations.research.jsonl import read_jsonl

RESULTS = Path(__file__).resolve().parent / "results"
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _pool() -> list[dict]:
    """The collection run's 200 documents: the first 30 SQuAD chunks and its distractors
    (benchmarks/make_collection.py's rows, rebuilt the same way)."""
    from subprocess import run

    out = RESULTS / "streams" / "distractors-170.jsonl"
    if not out.exists():
        run(
            [
                sys.executable,
                str(Path(__file__).parent / "make_collection.py"),
                "--skip",
                "30",
                "--squad",
                "120",
                "--fairytale",
                "30",
                "--covid",
                "20",
                "--out",
                str(out),
            ],
            check=True,
        )
    first = [
        {k: r[k] for k in ("doc_id", "title", "text")}
        for r in _rows(DATA / "squad-v1.1-dev-chunks.jsonl")[:30]
    ]
    return first + _rows(out)


def main(names: list[str]) -> None:
    pool = _pool()
    collection = {
        r["doc_id"]: r
        for r in read_jsonl(RESULTS / "collection-30+170.json.docs.jsonl")
        if r.get("method") == "zero-shot"
    }
    for name in names:
        slices = [RESULTS / "sets" / f"{name}.jsonl", RESULTS / "sets" / f"{name}2.jsonl"]
        questioned = [r for s in slices for r in _rows(s)]
        asked = {r["doc_id"] for r in questioned}
        distractors = [r for r in pool if r["doc_id"] not in asked]
        base = RESULTS / "streams" / name
        (base.with_suffix(".jsonl")).write_text("".join(json.dumps(r) + "\n" for r in questioned))
        Path(f"{base}-distractors.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in distractors)
        )
        summaries = []
        for s in (name, f"{name}2"):
            summaries += [
                r
                for r in read_jsonl(RESULTS / f"summaries-{s}.docs.jsonl")
                if r.get("method") == "zero-shot"
            ]
        summaries += [collection[r["doc_id"]] for r in distractors]
        Path(f"{base}-summaries.docs.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in summaries)
        )
        print(
            f"{name}: {len(questioned)} questioned, {len(distractors)} distractors, "
            f"{len(summaries)} summaries"
        )


if __name__ == "__main__":
    main(sys.argv[1:] or ["squad", "covid", "fairy", "german"])
