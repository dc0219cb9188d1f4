"""Which sentence splitter for the hit and refine paths (issue 43 item 3): the shipped one
(``text.split_sentences``: BlingFire plus one merge, a lower-case piece continues the
sentence before it) against the title merge it dropped, ICU's BreakIterator, BlingFire
alone, pysbd and sentencex, on

- a list of hard cases (abbreviations, initials, German, Chinese, dialogue): how many each
  splits into the right number of sentences;
- the four development sets of ``../shared/data`` (its README.md says where each comes
  from), every document of each: how many gold answers found verbatim in a document
  lie inside one sentence (a split through an answer loses it as evidence); and the time.

No model calls. The other splitters are not dependencies of the project:

    pip install pyicu-wheels pysbd sentencex
    python benchmarks/sentence_splitters.py [DATA_DIR]
"""

from __future__ import annotations

import json
import sys
import time
import unicodedata
from pathlib import Path

from cos_integrations.text import split_sentences

CASES = [
    ("Treatment was given e.g. to children. Results were good.", 2),
    ("As shown in Fig. 2, the virus binds ACE-2. It then enters the cell.", 2),
    ("The dose was approx. 5 mg per day. No side effects were seen.", 2),
    ("Running back C. J. Anderson led. Dr. Who ran.", 2),
    ("Der Rhein ist z. B. ein Fluss. Er fließt durch Köln.", 2),
    ("Das geschah am 3. Oktober 1990 in Berlin. Danach feierten alle.", 2),
    ("Die Stadt hat ca. 300.000 Einwohner. Sie liegt am Meer.", 2),
    ("北京是中国的首都。它有很多人口。上海是最大的城市。", 3),
    ("The U.S. Army arrived in 1944. The war ended soon after.", 2),
    ('"Where are you going?" asked the fox. "Home," said the hen.', 2),
    ("He paid $3.50 for it. She paid more.", 2),
    ("Le chat dort. Le chien aboie !", 2),
]
SETS = ["squad-v1.1-dev-chunks", "covidqa-part-a", "fairytaleqa-train", "xquad-de-dev"]


def splitters() -> dict:
    import blingfire
    import icu
    import pysbd
    import sentencex

    def icu_split(text: str) -> list[str]:
        breaker = icu.BreakIterator.createSentenceInstance(icu.Locale("und"))
        breaker.setText(text)
        out, start = [], breaker.first()
        for end in breaker:
            if text[start:end].strip():
                out.append(text[start:end].strip())
            start = end
        return out

    english = pysbd.Segmenter(language="en", clean=False)

    def with_titles(text: str) -> list[str]:
        # the title merge of 0.2's first cut: one word and a full stop is a title ("Mr.")
        out: list[str] = []
        for piece in split_sentences(text):
            if out and " " not in out[-1] and out[-1].endswith("."):
                out[-1] = f"{out[-1]} {piece}"
            else:
                out.append(piece)
        return out

    return {
        "shipped (BlingFire + lower-case merge)": split_sentences,
        "shipped + title merge (dropped)": with_titles,
        "ICU BreakIterator": icu_split,
        "BlingFire alone": lambda t: [s for s in blingfire.text_to_sentences(t).split("\n") if s],
        "pysbd (en)": lambda t: [s.strip() for s in english.segment(t) if s.strip()],
        "sentencex (en)": lambda t: [s.strip() for s in sentencex.segment("en", t) if s.strip()],
    }


def norm(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def held_in_one_sentence(split, path: Path) -> tuple[int, int]:
    held = total = 0
    with path.open(encoding="utf-8") as fh:
        docs = [json.loads(line) for line in fh]
    for doc in docs:
        sentences = [norm(s) for s in split(doc["text"])]
        text = norm(doc["text"])
        for qa in doc["qas"]:
            answers = [norm(a) for a in qa["answers"] if norm(a) in text]
            if answers:
                total += 1
                held += any(a in s for a in answers for s in sentences)
    return held, total


def main(data: Path) -> None:
    print("| splitter | hard cases right | " + " | ".join(SETS) + " | seconds |")
    print("|---" * (len(SETS) + 3) + "|")
    for name, split in splitters().items():
        right = sum(len(split(text)) == n for text, n in CASES)
        start = time.perf_counter()
        cells = []
        for s in SETS:
            held, total = held_in_one_sentence(split, data / f"{s}.jsonl")
            cells.append(f"{held}/{total}")
        seconds = time.perf_counter() - start
        print(f"| {name} | {right}/{len(CASES)} | {' | '.join(cells)} | {seconds:.1f} |")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/data"))
