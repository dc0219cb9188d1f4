"""Latency of the fallback retriever's hit path against a plain Chroma similarity search.

Both embed the query with the same e5 model and search the same summaries collection; the
retriever also decides hit/miss and records the event in the store (judge="score", so no
model call). Reports medians and the ratio.

    python benchmarks/query_latency.py --index /tmp/qs-index
"""

from __future__ import annotations

import argparse
import statistics
import time

from cos_integrations.serving.hit_rule import HitRule
from cos_integrations.serving.index import CoSIndex
from cos_integrations.serving.retrieval import FallbackRetriever

QUERIES = [
    "When is the rent due?",
    "How long is the warranty?",
    "What is the meal allowance?",
    "Who is the landlord?",
    "Where is the repair centre?",
    "How much is the deposit?",
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", required=True)
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    index = CoSIndex(args.index, create=False)
    retriever = FallbackRetriever(index, k=2, refine_on_miss="off", rule=HitRule(threshold=0.0))
    plain, fallback = [], []
    for q in QUERIES:  # warm up
        index.summaries.query(query_embeddings=[index.embedder.embed_query(q)], n_results=2)
        retriever.retrieve(q)
    for _ in range(args.rounds):
        for q in QUERIES:
            t0 = time.perf_counter()
            index.summaries.query(
                query_embeddings=[index.embedder.embed_query(q)],
                n_results=2,
                include=["documents", "metadatas", "distances"],
            )
            plain.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            assert retriever.retrieve(q).hit
            fallback.append(time.perf_counter() - t0)
    p, f = statistics.median(plain) * 1000, statistics.median(fallback) * 1000
    print(
        f"median plain Chroma search {p:.1f} ms, fallback hit path {f:.1f} ms; "
        f"ratio {f / p:.2f} over {len(plain)} queries each"
    )


if __name__ == "__main__":
    main()
