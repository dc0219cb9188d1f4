"""How fast the review page renders on a large index, over real HTTP from `cos ui`.

    python benchmarks/ui_overview.py [--docs 2000] [--events 40000] [--runs 21]

Builds an index of ``--docs`` documents straight through the store (no model: two summary
versions each, a 10-question bank, ``--events`` hit/miss events, a refine job for every
tenth miss, flags on every seventh summary), starts ``cos ui`` on it as its own process and
times each page with a fresh HTTP request (median and worst of ``--runs``, after one warm-up
request). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from cos_integrations.embedded.embeddings import HashingEmbedder
from cos_integrations.serving.index import CoSIndex
from cos_integrations.summarize.questions import QAPair


def build(path: Path, docs: int, events: int) -> None:
    rng = random.Random(7)
    index = CoSIndex(path, embedder=HashingEmbedder(256))
    store = index.store
    for i in range(docs):
        doc_id = f"docs/section-{i // 100:02d}/page-{i:05d}.md"
        text = " ".join(f"Page {i} states fact {j} about item {j}." for j in range(120))
        store.upsert_document(doc_id, text, source=doc_id, title=f"Page {i}")
        v1 = store.publish_version(
            doc_id,
            f"Page {i} states facts 0 to 3.",
            expected_version=None,
            created_by="cos",
            val_score=rng.random(),
            summary_tokens=40,
        )
        store.publish_version(
            doc_id,
            f"Page {i} states facts 0 to 4 about items 0 to 4.",
            expected_version=v1,
            created_by="refine",
            val_score=rng.random(),
            summary_tokens=48,
            flags=["number not in source: 9999"] if i % 7 == 0 else [],
        )
        for j in range(10):
            store.add_question(
                doc_id,
                QAPair(question=f"What does page {i} state about item {j}?", answers=[f"fact {j}"]),
            )
    ids = [d.doc_id for d in store.documents()]
    for n in range(events):
        doc_id = rng.choice(ids)
        kind = "hit" if rng.random() < 0.4 else "miss"
        query = f"question {n} on {doc_id}"
        store.record_event(kind, doc_id, query, context_tokens=300)
        if kind == "miss" and n % 10 == 0:
            store.enqueue(doc_id, query)
    store.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--events", type=int, default=40000)
    ap.add_argument("--runs", type=int, default=21)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "index"
        t0 = time.perf_counter()
        build(path, args.docs, args.events)
        built = time.perf_counter() - t0
        port = free_port()
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cos_integrations.cli",
                "ui",
                "--index",
                str(path),
                "--port",
                str(port),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            env={**os.environ},
        )
        base = f"http://127.0.0.1:{port}"
        try:
            for _ in range(300):
                try:
                    httpx.get(base + "/static/style.css", timeout=1)
                    break
                except httpx.HTTPError:
                    time.sleep(0.1)
            mid = args.docs // 2
            doc = f"/doc/docs%2Fsection-{mid // 100:02d}%2Fpage-{mid:05d}.md"
            last = f"/?page={-(-args.docs // 50)}"
            pages = [
                ("overview, page 1 (sorted by id)", "/"),
                ("overview, most missed first", "/?sort=missed"),
                ("overview, flagged only", "/?filter=flagged"),
                ("overview, last page", last),
                ("document (2 versions, 10 questions, diff)", doc),
                ("misses, page 1", "/misses"),
            ]
            print(
                f"{args.docs} documents, {args.events} events; built in {built:.0f} s; "
                f"`cos ui` over HTTP, {args.runs} requests a page\n"
            )
            print("| page | median | worst | bytes |")
            print("|---|---|---|---|")
            with httpx.Client(base_url=base, timeout=30) as client:
                for label, url in pages:
                    r = client.get(url)
                    r.raise_for_status()
                    times = []
                    for _ in range(args.runs):
                        t = time.perf_counter()
                        r = client.get(url)
                        times.append(time.perf_counter() - t)
                        r.raise_for_status()
                    print(
                        f"| {label} | {statistics.median(times) * 1000:.0f} ms | "
                        f"{max(times) * 1000:.0f} ms | {len(r.content):,} |"
                    )
        finally:
            proc.terminate()
            proc.wait(timeout=20)


if __name__ == "__main__":
    main()
