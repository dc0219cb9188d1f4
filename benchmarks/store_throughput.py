"""Query throughput on the hit path with concurrent clients: SQLite vs PostgreSQL vs a plain
Chroma search.

    python benchmarks/store_throughput.py [--clients 8] [--seconds 20] [--docs 200]

One index of ``--docs`` documents (scripted summaries, the hashing embedder so that the
embedding costs little and the store's share shows) is built once per store; then
``--clients`` processes each ask queries for ``--seconds``:

- ``plain Chroma``: embed the query and search the summary collection (what a user's own
  top-k search costs; no store at all);
- ``fallback, SQLite``/``fallback, PostgreSQL``: the product's ``FallbackRetriever`` with
  ``judge="score"`` (a hit on similarity: embed, search, read the hit's store rows, record
  the hit event), on a SQLite file or a PostgreSQL database (a server started here in a
  temporary directory, as the tests do).

Every query is a hit (threshold 0). Prints queries/s in all and per client, and the
events the store recorded (each must equal the queries answered).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from cos_integrations.embedded.embeddings import HashingEmbedder  # noqa: E402
from cos_integrations.serving.hit_rule import HitRule
from cos_integrations.serving.index import CoSIndex  # noqa: E402


def build(path: Path, docs: int, store_url: str | None) -> None:
    index = CoSIndex(path, embedder=HashingEmbedder(256), store_url=store_url)
    for i in range(docs):
        doc_id = f"page-{i:04d}"
        text = " ".join(f"Page {i} says fact {j} about topic {i % 17}." for j in range(40))
        index.store.upsert_document(doc_id, text)
        index.store.publish_version(
            doc_id,
            f"Page {i} covers topic {i % 17}, facts 0 to 5.",
            expected_version=None,
            created_by="cos",
        )
        index.sync_document(doc_id)
    index.store.close()


def client(path: str, store_url: str | None, mode: str, seconds: float, out) -> None:
    from cos_integrations.serving.retrieval import FallbackRetriever

    index = CoSIndex(path, create=False, store_url=store_url)
    retriever = FallbackRetriever(index, k=4, refine_on_miss="off", rule=HitRule(threshold=0.0))
    n, i = 0, 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        q = f"What does page {i % 200} say about topic {i % 17}?"
        i += 1
        if mode == "plain":
            emb = index.embedder.embed_query(q)
            index.summaries.query(query_embeddings=[emb], n_results=4)
        else:
            res = retriever.retrieve(q)
            assert res.hit
        n += 1
    out.put(n)


def run(path: Path, store_url: str | None, mode: str, clients: int, seconds: float) -> int:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [
        ctx.Process(target=client, args=(str(path), store_url, mode, seconds, out))
        for _ in range(clients)
    ]
    for p in procs:
        p.start()
    total = sum(out.get(timeout=seconds + 120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    return total


def main() -> None:
    import pg_server

    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--docs", type=int, default=200)
    args = ap.parse_args()
    server = pg_server.PostgresServer().start()
    try:
        rows = []
        with tempfile.TemporaryDirectory() as tmp:
            lite = Path(tmp) / "sqlite-index"
            build(lite, args.docs, None)
            pg_url = server.new_database()
            pg = Path(tmp) / "pg-index"
            build(pg, args.docs, pg_url)
            for label, path, url, mode in (
                ("plain Chroma search (no store)", lite, None, "plain"),
                ("fallback hit, SQLite store", lite, None, "fallback"),
                ("fallback hit, PostgreSQL store", pg, pg_url, "fallback"),
            ):
                index = CoSIndex(path, create=False, store_url=url)
                before = index.store.event_counts().get("hit", 0)
                index.store.close()
                n = run(path, url, mode, args.clients, args.seconds)
                index = CoSIndex(path, create=False, store_url=url)
                events = index.store.event_counts().get("hit", 0) - before
                index.store.close()
                rows.append((label, n, events))
        print(
            f"{args.clients} client processes x {args.seconds:.0f} s, {args.docs} documents, "
            "hashing embedder, every query a hit\n"
        )
        print("| path | queries/s | per client | hit events recorded |")
        print("|---|---|---|---|")
        for label, n, events in rows:
            qps = n / args.seconds
            rec = "-" if "plain" in label else f"{events} of {n}"
            print(f"| {label} | {qps:.0f} | {qps / args.clients:.1f} | {rec} |")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
