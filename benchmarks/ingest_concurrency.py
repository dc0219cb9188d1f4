"""Ingestion throughput at concurrency 1, 2 and 4, as ratios to concurrency 1.

Same documents, same model server (one llama.cpp slot on this 2-core machine), a fresh
index per run.

    python benchmarks/ingest_concurrency.py --local-model smoke --docs 6
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from cos_integrations import ChainOfSummaries, CoSConfig
from cos_integrations.embedded.embeddings import LocalEmbedder
from cos_integrations.embedded.server import LocalModelServer
from cos_integrations.loaders import SourceDocument
from cos_integrations.serving.index import CoSIndex

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "squad-v1.1-dev-chunks.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--local-model", default="smoke")
    ap.add_argument("--docs", type=int, default=6)
    ap.add_argument("--words", type=int, default=200, help="truncate documents to N words")
    args = ap.parse_args()
    rows = [json.loads(line) for line in open(DATA)][: args.docs]
    docs = [
        SourceDocument(doc_id=r["doc_id"], text=" ".join(r["text"].split()[: args.words]))
        for r in rows
    ]
    config = CoSConfig.fast(max_summary_words=60, max_output_tokens=256)
    embedder = LocalEmbedder()
    times = {}
    with LocalModelServer(args.local_model, n_ctx=4096) as server:
        llm = server.chat_model()
        for c in (1, 2, 4):
            with tempfile.TemporaryDirectory() as tmp:
                index = CoSIndex(tmp, embedder=embedder, config=config)
                t0 = time.monotonic()
                report = asyncio.run(
                    index.aingest(docs, ChainOfSummaries(llm, config), concurrency=c)
                )
                times[c] = time.monotonic() - t0
                print(
                    f"concurrency {c}: {times[c]:.1f}s, {len(docs) / times[c] * 60:.1f} docs/min,"
                    f" {report.usage.calls} calls, {len(report.failed)} failed"
                )
    for c in (2, 4):
        print(f"throughput ratio concurrency {c} / 1: {times[1] / times[c]:.2f}")


if __name__ == "__main__":
    main()
