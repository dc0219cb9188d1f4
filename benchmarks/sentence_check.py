"""Can one cheap call tell a rewording from a near-duplicate? The product's answer call
(``retrieval.ask``, the prompt of plain chunk RAG) over an entry's verified source
sentence alone, asked the new question: were its answer to agree with the entry's
(``answers_agree``), the entry would be served for the price of that call. Tried for the
band under the verified-answer bar (e5 0.90 to 0.98, the same numbers named), not kept.

    python benchmarks/sentence_check.py [SETS] [N]     # default squad,covid,fairy,german 40
    python benchmarks/sentence_check.py --band [SETS]  # no model: who would pay the check

Rewordings: the streams' books (``rewordings-SET.jsonl``: each question with a rewording in
the band); near-duplicates: pairs of questions on one document of the development file
(its first 40 documents, 24 questions each) whose gold answers share no word, in the band.
The entry stands in as the first question's gold answer and the sentence of its document
that holds it (``supporting_sentence``); ``N`` pairs of each kind, shuffled with seed 0.
Prints, by set and kind, the share whose check agrees with the entry (for a rewording: it
would be served; for a near-duplicate: a wrong serve) and the check's prompt tokens; one
JSON line a pair before it. Needs the embedded default model (about 15 minutes here).
``--band``: on the recorded streams (``repeat-SET.json``, ``stream_sets.sh``), the asks the
product did not serve that have an earlier question of the stream in the band, by kind of
ask: each would pay the check.
"""

from __future__ import annotations

import asyncio
import gzip
import itertools
import json
import random
import sys
import time

from answer_bar import DATA, FILES, Vectors
from four_sets_table import RESULTS

from cos_integrations import open_model
from cos_integrations.metrics import squad_f1
from cos_integrations.serving.answers import question_numbers as numbers
from cos_integrations.serving.hit_rule import answers_agree, supporting_sentence
from cos_integrations.serving.index import SearchHit
from cos_integrations.serving.retrieval import ask

LO, HI = 0.90, 0.98


def _by_question(name: str) -> dict[str, tuple[dict, dict]]:
    out = {}
    for line in (DATA / FILES[name][0]).read_text().splitlines():
        doc = json.loads(line)
        for qa in doc["qas"]:
            out[qa["question"]] = (doc, qa)
    return out


def _in_band(vec: Vectors, a: str, b: str) -> float | None:
    s = float(vec(a) @ vec(b))
    return s if LO <= s < HI and numbers(a) == numbers(b) else None


def rewordings(name: str, vec: Vectors, known: dict) -> list[tuple[str, str, float]]:
    out = []
    with gzip.open(RESULTS / f"rewordings-{name}.jsonl.gz", "rt") as f:
        for line in f:
            r = json.loads(line)
            if r["question"] not in known:
                continue
            for w in r["rewordings"]:
                s = _in_band(vec, r["question"], w)
                if s is not None:
                    out.append((r["question"], w, s))
    return out


def near_duplicates(name: str, vec: Vectors) -> list[tuple[str, str, float]]:
    language = FILES[name][1]
    out = []
    for line in (DATA / FILES[name][0]).read_text().splitlines()[:40]:
        qas = json.loads(line)["qas"][:24]
        for a, b in itertools.permutations(qas, 2):
            if squad_f1(a["answers"][0], b["answers"], language) or squad_f1(
                b["answers"][0], a["answers"], language
            ):
                continue
            s = _in_band(vec, a["question"], b["question"])
            if s is not None:
                out.append((a["question"], b["question"], s))
    return out


def band(sets: list[str]) -> None:
    vec = Vectors()
    for name in sets:
        path = RESULTS / f"repeat-{name}.json.stream-rows.jsonl.gz"
        with gzip.open(path, "rt") as f:
            rows = [json.loads(line) for line in f]
        asks = next(r for r in rows if r["method"] == "fallback")["asks"]
        seen: list[str] = []
        counts: dict[str, list[int]] = {}
        for a in asks:
            q = a["question"]
            earlier = [p for p in seen if p != q]
            if a.get("served") is None and earlier:
                near = any(_in_band(vec, p, q) is not None for p in earlier)
                c = counts.setdefault(a["kind"], [0, 0])
                c[0], c[1] = c[0] + 1, c[1] + near
            if q not in seen:
                seen.append(q)
        print(name, ", ".join(f"{k}: {n} of {t} not served" for k, (t, n) in counts.items()))


async def main(sets: list[str], n: int) -> None:
    vec, rng = Vectors(), random.Random(0)
    with open_model("default") as llm:
        for name in sets:
            known = _by_question(name)
            pos, neg = rewordings(name, vec, known), near_duplicates(name, vec)
            rng.shuffle(pos)
            rng.shuffle(neg)
            for kind, pairs in (("reword", pos[:n]), ("neardup", neg[:n])):
                agree = asked = tokens = 0
                start = time.time()
                for q, w, s in pairs:
                    doc, qa = known[q]
                    gold = qa["answers"][0]
                    sentence = supporting_sentence(gold, q, doc["text"])
                    if sentence is None:
                        continue
                    meta = {"title": doc.get("title") or doc["doc_id"]}
                    item = SearchHit("entry", doc["doc_id"], sentence, 1.0, meta, "answer")
                    answer, usage = await ask(llm, w, [item])
                    ok = answers_agree(answer, [gold])
                    agree, asked, tokens = agree + ok, asked + 1, tokens + usage.prompt_tokens
                    line = {"set": name, "kind": kind, "sim": round(s, 3), "q": q, "w": w}
                    print(json.dumps(line | {"gold": gold, "check": answer, "agree": ok}))
                print(
                    f"## {name} {kind}: agree {agree}/{asked} ({agree / max(asked, 1):.0%}), "
                    f"no sentence {len(pairs) - asked}, prompt tokens a check "
                    f"{tokens / max(asked, 1):.0f}, {time.time() - start:.0f} s",
                    flush=True,
                )


if __name__ == "__main__":
    args = sys.argv[1:]
    only_band = args[:1] == ["--band"]
    args = args[1:] if only_band else args
    chosen = (args[0] if args else "squad,covid,fairy,german").split(",")
    if only_band:
        band(chosen)
    else:
        asyncio.run(main(chosen, int(args[1]) if len(args) > 1 else 40))
