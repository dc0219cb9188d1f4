"""Where the paraphrase bar of ``HitRule.answered_miss_similarity`` sits, no model call.

    python benchmarks/paraphrase_bar.py [RUN.docs.jsonl] [--index RUN.index-*] [--skip 5]

With a ``--repeat-traffic`` run and its index: each traffic paraphrase's cosine (e5, query
vectors) to the nearest answered miss's question (the store's bank rows of origin
``miss``), the test questions nearest to them, and distinct traffic questions' cosine to the
answered misses. Then over the dev chunks after the first ``--skip`` (all their questions):
for question pairs of one chunk whose gold answers plainly agree (F1 >= 0.5) or differ
(F1 0), how many pairs reach each bar, and the share that agree: what the bar alone
would let through, which the answer agreement must then catch. With ``--cost``: what the
retriever's answered-miss vectors cost (embedding 1,000 dev questions one at a time, as
it does; the product and arg-max over 100,000 of them), nothing else.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sqlite3
from pathlib import Path

import numpy as np

from cos_integrations.embedded.embeddings import LocalEmbedder
from cos_integrations.metrics import squad_f1

BARS = (0.90, 0.93, 0.95, 0.97)


def _rows(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f]


def _vectors(embedder: LocalEmbedder, texts: list[str]) -> np.ndarray:
    m = np.asarray([embedder.embed_query(t) for t in texts], dtype=np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def run_side(embedder: LocalEmbedder, run: Path, index: Path) -> None:
    rows = _rows(run)
    db = sqlite3.connect(index / "cos.sqlite")
    missed = [r[0] for r in db.execute("SELECT question FROM questions WHERE origin='miss'")]
    if not missed:
        print("no answered misses in the index")
        return
    misses = _vectors(embedder, missed)
    print("| paraphrase | nearest answered miss | cosine | runner-up |\n|---|---|---|---|")
    for r in rows:
        for p in r.get("paraphrases", []):
            s = _vectors(embedder, [p["question"]])[0] @ misses.T
            order = np.argsort(-s)
            second = f"{s[order[1]]:.3f}" if len(order) > 1 else ""
            near = missed[order[0]][:50]
            print(f"| {p['question'][:60]} | {near} | {s[order[0]]:.3f} | {second} |")
    tests = [q["question"] for r in rows for q in r.get("questions_after", [])]
    s = _vectors(embedder, tests) @ misses.T
    print("\nTest questions nearest an answered miss:")
    for i in np.argsort(-s.max(1))[:8]:
        print(f"- {s[i].max():.3f} {tests[i][:60]!r} -> {missed[int(s[i].argmax())][:60]!r}")
    traffic = [q["question"] for r in rows for q in r.get("traffic", [])]
    s = _vectors(embedder, traffic) @ misses.T
    other = [s[i, j] for i, q in enumerate(traffic) for j, m in enumerate(missed) if q != m]
    print(f"\nDistinct traffic questions to answered misses: max cosine {max(other):.3f}")


def dev_side(embedder: LocalEmbedder, data: Path, skip: int) -> None:
    docs = [json.loads(line) for line in data.read_text().splitlines()][skip:]
    agree, differ = [], []
    for d in docs:
        qs = d["qas"]
        s = _vectors(embedder, [q["question"] for q in qs])
        sims = s @ s.T
        for i in range(len(qs)):
            for j in range(i + 1, len(qs)):
                f1 = max(squad_f1(a, qs[j]["answers"]) for a in qs[i]["answers"])
                if f1 >= 0.5:
                    agree.append(sims[i, j])
                elif f1 == 0:
                    differ.append(sims[i, j])
    a, b = np.asarray(agree), np.asarray(differ)
    print(f"\n{len(docs)} dev chunks: {len(a)} pairs agree, {len(b)} differ")
    print("| bar | pairs that agree | pairs that differ | share that agree |\n|---|---|---|---|")
    for bar in BARS:
        x, y = int((a >= bar).sum()), int((b >= bar).sum())
        print(f"| {bar} | {x} | {y} | {x / max(1, x + y):.0%} |")


def cost(embedder: LocalEmbedder, data: Path) -> None:
    import time

    lines = data.read_text().splitlines()
    qs = [q["question"] for line in lines for q in json.loads(line)["qas"]][:1000]
    embedder.embed_query("warm up")
    t = time.perf_counter()
    v = np.asarray([embedder.embed_query(q) for q in qs], dtype=np.float32)
    per = (time.perf_counter() - t) / len(qs)
    print(f"embed {len(qs)} questions one at a time: {1000 * per:.1f} ms a question")
    m = np.vstack([v] * (100_000 // len(qs)))
    t = time.perf_counter()
    for q in v[:100]:
        int(np.argmax(m @ q))
    ms = 1000 * (time.perf_counter() - t) / 100
    print(f"nearest of {m.shape[0]:,} ({m.nbytes / 1e6:.0f} MB): {ms:.2f} ms a query")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", nargs="?", type=Path)
    ap.add_argument("--index", type=Path)
    ap.add_argument("--data", type=Path, default=Path("../shared/data/squad-v1.1-dev-chunks.jsonl"))
    ap.add_argument("--skip", type=int, default=5)
    ap.add_argument("--cost", action="store_true", help="time the vectors only")
    args = ap.parse_args()
    embedder = LocalEmbedder()
    if args.cost:
        cost(embedder, args.data)
        return
    if args.run and args.index:
        run_side(embedder, args.run, args.index)
    dev_side(embedder, args.data, args.skip)


if __name__ == "__main__":
    main()
