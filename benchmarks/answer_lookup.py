"""What a verified-answer lookup costs beside a plain Chroma query, at N entries. No model.

    python benchmarks/answer_lookup.py [--entries 100000] [--queries 300]

An index (SQLite store, Chroma on disk) holding N verified answers over 1,000 documents:
their rows written in bulk, their question vectors random unit vectors (384 dimensions,
e5's size; a query's cost does not depend on what the vectors mean). Then, for the same
random query vectors: a plain ``collection.query(n_results=1)`` on the answers collection
(what a semantic cache's lookup is), the retriever's similar-answer lookup
(``VerifiedAnswers.nearest``: that query, and the entry read from the store, verified on
its document's current text), and the exact-repeat lookup (``VerifiedAnswers.exact``: one
indexed read by the question's key, no vector). Median and 95th percentile milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from cos_integrations.embedded.embeddings import HashingEmbedder
from cos_integrations.serving.answers import VerifiedAnswers
from cos_integrations.serving.index import CoSIndex
from cos_integrations.storage.store import content_hash

DIM = 384


def build(root: Path, n: int, docs: int = 1000) -> CoSIndex:
    index = CoSIndex(root, embedder=HashingEmbedder(DIM))
    store = index.store
    rng = np.random.default_rng(0)
    with store.backend.transaction() as tx:  # a bulk load, one transaction
        for d in range(docs):
            text = f"Document {d} says its answer {d}."
            tx.execute(
                "INSERT INTO documents(doc_id, content_hash, text, status, created_at,"
                " updated_at) VALUES(?,?,?,'summarized',0,0)",
                (f"d{d}", content_hash(text), text),
            )
        for i in range(n):
            d = i % docs
            text = f"Document {d} says its answer {d}."
            tx.execute(
                "INSERT INTO answers(doc_id, question, key, answer, quote, origin,"
                " content_hash, served, created_at) VALUES(?,?,?,?,?,'miss',?,0,0)",
                (
                    f"d{d}",
                    f"question {i}?",
                    f"question {i}",
                    f"answer {d}",
                    text,
                    content_hash(text),
                ),
            )
    ids = [r[0] for r in store.query("SELECT id FROM answers ORDER BY id")]
    for start in range(0, n, 5000):
        part = ids[start : start + 5000]
        vectors = rng.normal(size=(len(part), DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        index.answers.add(
            ids=[f"answer::{i}" for i in part],
            embeddings=vectors.tolist(),
            metadatas=[{"doc_id": f"d{(i - 1) % docs}", "cos_entry": i} for i in part],
            documents=[f"question {i - 1}?" for i in part],
        )
    return index


def timed(fn, queries) -> tuple[float, float]:
    times = []
    for q in queries:
        t = time.perf_counter()
        fn(q)
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=300)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        index = build(Path(tmp), args.entries)
        print(f"built {args.entries:,} entries in {time.perf_counter() - t:.0f} s")
        rng = np.random.default_rng(1)
        qs = rng.normal(size=(args.queries, DIM)).astype(np.float32)
        qs = (qs / np.linalg.norm(qs, axis=1, keepdims=True)).tolist()
        verified = VerifiedAnswers(index)
        for q in qs[:20]:  # warm both paths
            index.answers.query(query_embeddings=[q], n_results=1)
            verified.nearest(q, 0.0)
        plain = timed(lambda q: index.answers.query(query_embeddings=[q], n_results=1), qs)
        near = timed(lambda q: verified.nearest(q, 0.0), qs)
        keys = [f"question {i * 7 % args.entries}?" for i in range(args.queries)]
        exact = timed(verified.exact, keys)
        print("| lookup | median ms | p95 ms | of the plain query (median) |")
        print("|---|---|---|---|")
        for name, (med, p95) in (
            ("plain Chroma query, n_results=1", plain),
            ("similar: VerifiedAnswers.nearest", near),
            ("exact: VerifiedAnswers.exact", exact),
        ):
            print(f"| {name} | {med:.2f} | {p95:.2f} | {med / plain[0]:.2f}x |")


if __name__ == "__main__":
    main()
