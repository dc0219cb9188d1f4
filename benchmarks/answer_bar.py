"""Where a verified answer may serve a reworded question with no call: the e5 similarity of
rewordings to their question against that of near-duplicates that ask something else. No
model call (the rewordings are the streams' books, model-written once).

    python benchmarks/answer_bar.py [--sets squad,covid,fairy,german]

Rewordings: each question of ``rewordings-SET.jsonl`` (benchmarks/stream_sets.sh) with
each of its rewordings. Near-duplicates: the pairs of questions on one document of the
development file (its first 40 documents, 24 questions each) whose gold answers share no
word, the case a semantic cache serves wrong. Both pairs' similarity as the retriever
computes it (query vectors), and the numbers rule (``VerifiedAnswers.same_numbers``). For
each bar: the rewordings served with no call (at or over it, the same numbers), those
that go the usual way and teach the entry (from ``ANSWER_CHECK_SIMILARITY`` to the bar,
the same numbers), and the share of questions that have a near-duplicate with another
answer served with no call at that bar (a wrong serve, were that near-duplicate an entry).
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import numpy as np
from four_sets_table import RESULTS, header, row

from cos_integrations.defaults import ANSWER_CHECK_SIMILARITY
from cos_integrations.embedded.embeddings import LocalEmbedder
from cos_integrations.metrics import squad_f1
from cos_integrations.research.jsonl import read_jsonl
from cos_integrations.serving.answers import question_numbers as numbers

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
FILES = {
    "squad": ("squad-v1.1-dev-chunks.jsonl", "en"),
    "covid": ("covidqa-part-a.jsonl", "en"),
    "fairy": ("fairytaleqa-train.jsonl", "en"),
    "german": ("xquad-de-dev.jsonl", "de"),
}
BARS = (0.93, 0.95, 0.96, 0.97, 0.98, 0.99)


class Vectors:
    def __init__(self) -> None:
        self.embedder = LocalEmbedder()
        self.seen: dict[str, np.ndarray] = {}

    def __call__(self, text: str) -> np.ndarray:
        if text not in self.seen:
            v = np.asarray(self.embedder.embed_query(text), dtype=np.float32)
            self.seen[text] = v / np.linalg.norm(v)
        return self.seen[text]


def rewording_pairs(name: str) -> list[tuple[str, str]]:
    book = RESULTS / f"rewordings-{name}.jsonl"
    return [(r["question"], w) for r in read_jsonl(book) for w in r["rewordings"]]


def near_duplicates(name: str) -> list[tuple[str, str]]:
    path, language = FILES[name]
    out = []
    for line in (DATA / path).read_text().splitlines()[:40]:
        qas = json.loads(line)["qas"][:24]
        for a, b in itertools.combinations(qas, 2):
            if squad_f1(a["answers"][0], b["answers"], language) == 0 and (
                squad_f1(b["answers"][0], a["answers"], language) == 0
            ):
                out.append((a["question"], b["question"]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="squad,covid,fairy,german")
    args = ap.parse_args()
    vec = Vectors()
    header(
        [
            "text",
            "bar",
            "rewordings served free / teaching / not near",
            "questions with a near-duplicate (other answer) served free",
        ]
    )
    for name in args.sets.split(","):
        pos = rewording_pairs(name)
        neg = near_duplicates(name)
        # a set without a stream's rewording book yet: its near-duplicates alone
        ps = np.array([vec(a) @ vec(b) for a, b in pos])
        same = np.array([numbers(a) == numbers(b) for a, b in pos], dtype=bool)
        worst: dict[str, list[tuple[float, bool]]] = {}
        for a, b in neg:
            s = float(vec(a) @ vec(b))
            same_n = numbers(a) == numbers(b)
            worst.setdefault(a, []).append((s, same_n))
            worst.setdefault(b, []).append((s, same_n))
        for bar in BARS:
            free = (ps >= bar) & same
            checked = (ps >= ANSWER_CHECK_SIMILARITY) & (ps < bar) & same
            wrong = sum(any(s >= bar and n for s, n in v) for v in worst.values())
            served = (
                f"{free.mean():.0%} / {checked.mean():.0%} / "
                f"{1 - free.mean() - checked.mean():.0%} of {len(pos)}"
                if len(pos)
                else "- (no rewording book)"
            )
            row(
                [
                    name,
                    f"{bar:.2f}",
                    served,
                    f"{wrong / max(len(worst), 1):.1%} of {len(worst)}",
                ]
            )


if __name__ == "__main__":
    main()
