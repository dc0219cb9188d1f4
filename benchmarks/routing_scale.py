"""Routing cost at scale (issue 28 item 4): the fallback retriever's hit path against a
plain Chroma search, at 1,000, 10,000 and 100,000 summaries. No model calls.

``build`` makes one index per size with the library's own API (store rows, published
summary versions, Chroma sync): each "document" is a 120-word window of the texts in
``../shared/data`` (SQuAD dev chunks, COVID-QA papers, FairytaleQA stories; windows
overlap where the texts run out) and its stored summary is its first 60 words. The
embedder is the fast ``HashingEmbedder`` (384 dimensions, like e5), so a query's cost is
the search and our work around it, not the embedding model's.

``query`` opens one index in a fresh process and asks the same questions (SQuAD dev
questions) through each path:
  - plain: embed the query, ``collection.query`` top-2 of the summaries collection;
  - hit path: ``FallbackRetriever(rule=HitRule(judge="score", threshold=0.0)).retrieve``:
    embed, search summaries, the hit decision and its event row in the store
    (``refine_on_miss="off"``); the sync call, whose reads run in place;
  - the same call with every read a worker-thread hop (``run_sync(aretrieve(q))``: the
    sync path until 2026-12-03, and what the async path does in a server's loop);
    the three interleaved a query at a time.
``--rule`` picks the hit rule timed (:data:`RULES`: ``score``, ``chunk`` and ``routed``, each
adding one read of the product's own hit path; a routed query that misses is not timed).
It prints p50/p95 of each, their ratio, the process's peak RSS and the index on disk.

    python benchmarks/routing_scale.py build --sizes 1000,10000,100000 --root /tmp/scale
    python benchmarks/routing_scale.py query --size 1000 --root /tmp/scale [--queries 300]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import time
from pathlib import Path

from cos_integrations.embedded.embeddings import HashingEmbedder
from cos_integrations.serving.hit_rule import HitRule
from cos_integrations.serving.index import CoSIndex
from cos_integrations.serving.retrieval import FallbackRetriever
from cos_integrations.sync import run_sync

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
FILES = ("squad-v1.1-dev-chunks.jsonl", "covidqa-part-a.jsonl", "fairytaleqa-train.jsonl")
WINDOW = 120


def words() -> list[str]:
    out: list[str] = []
    for name in FILES:
        for line in (DATA / name).read_text().splitlines():
            out.extend(json.loads(line)["text"].split())
    return out


def windows(n: int) -> list[str]:
    """``n`` distinct 120-word windows, the stride shrunk until ``n`` fit."""
    w = words()
    stride = max(1, min(WINDOW, (len(w) - WINDOW) // n))
    return [" ".join(w[i * stride : i * stride + WINDOW]) for i in range(n)]


def questions(limit: int) -> list[str]:
    out = []
    for line in (DATA / FILES[0]).read_text().splitlines():
        out += [q["question"] for q in json.loads(line)["qas"]]
    return out[:limit]


def build(size: int, root: Path) -> None:
    path = root / f"index-{size}"
    if (path / "manifest.json").exists():
        print(f"{path}: exists")
        return
    index = CoSIndex(path, embedder=HashingEmbedder(384))
    t0 = time.perf_counter()
    texts = windows(size)
    for start in range(0, size, 2000):
        ids = []
        for i in range(start, min(size, start + 2000)):
            doc_id = f"w{i:06d}"
            index.store.upsert_document(doc_id, texts[i], title=doc_id)
            summary = " ".join(texts[i].split()[:60])
            index.store.publish_version(
                doc_id, summary, expected_version=None, created_by="scale", reason="benchmark"
            )
            ids.append(doc_id)
        index.sync_documents(ids, batch=1000)  # the bulk path: Chroma writes batched
        print(f"  {start + len(ids)} documents, {time.perf_counter() - t0:.0f} s", flush=True)
    print(f"built {path}: {size} documents in {time.perf_counter() - t0:.0f} s")


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


# the hit rules timed (no model judge: ``judge="score"``, every query over threshold 0)
RULES = {
    # the similarity decides, the top-k summaries are the hit context
    "score": HitRule(judge="score", threshold=0.0, hit_context="summaries"),
    # + the hit document's best chunk, its chunk vectors read by id
    "chunk": HitRule(judge="score", threshold=0.0, hit_context="best+chunk"),
    # + the product's routing check: a search of the whole chunk collection must agree
    "routed": HitRule(judge="score", threshold=0.0, hit_context="best+chunk"),
}


def query(size: int, root: Path, n: int, rule: str = "score") -> dict:
    index = CoSIndex(root / f"index-{size}", create=False, embedder=HashingEmbedder(384))
    retriever = FallbackRetriever(index, k=2, refine_on_miss="off", rule=RULES[rule])
    qs = questions(n)
    plain: list[float] = []
    hit: list[float] = []
    hit_hops: list[float] = []

    def plain_search(q: str) -> None:
        index.summaries.query(
            query_embeddings=[index.embedder.embed_query(q)],
            n_results=2,
            include=["documents", "metadatas", "distances"],
        )

    for q in qs[:20]:  # warm up both paths
        plain_search(q)
        retriever.retrieve(q)
    hits: set[str] = set()
    for q in qs:
        t0 = time.perf_counter()
        plain_search(q)
        plain.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        res = retriever.retrieve(q)
        elapsed = time.perf_counter() - t0
        t0 = time.perf_counter()
        run_sync(retriever.aretrieve(q))  # every read a worker-thread hop, as async
        hopped = time.perf_counter() - t0
        if res.hit:  # a routed query may miss (the top chunk is another document's)
            hit.append(elapsed)
            hit_hops.append(hopped)
            hits.add(q)
        elif rule != "routed":
            raise SystemExit(f"not a hit at threshold 0: {q!r}")

    def pct(xs: list[float], p: float) -> float:
        return statistics.quantiles(xs, n=100)[int(p) - 1] * 1000

    out = {
        "size": size,
        "rule": rule,
        "queries": len(qs),
        "hits": len(hit),
        "plain_p50_ms": statistics.median(plain) * 1000,
        "plain_p95_ms": pct(plain, 95),
        "hit_p50_ms": statistics.median(hit) * 1000,
        "hit_p95_ms": pct(hit, 95),
        "hit_hops_p50_ms": statistics.median(hit_hops) * 1000,
        "hit_hops_p95_ms": pct(hit_hops, 95),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "index_mb": du(root / f"index-{size}") / 2**20,
        "cpu_count": os.cpu_count(),
    }
    out["ratio_p50"] = out["hit_p50_ms"] / out["plain_p50_ms"]
    out["ratio_p95"] = out["hit_p95_ms"] / out["plain_p95_ms"]
    out["ratio_hops_p50"] = out["hit_hops_p50_ms"] / out["plain_p50_ms"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--sizes", default="1000,10000,100000")
    b.add_argument("--root", type=Path, default=Path("/tmp/scale"))
    q = sub.add_parser("query")
    q.add_argument("--size", type=int, required=True)
    q.add_argument("--root", type=Path, default=Path("/tmp/scale"))
    q.add_argument("--queries", type=int, default=300)
    q.add_argument("--rule", choices=sorted(RULES), default="score")
    args = ap.parse_args()
    if args.cmd == "build":
        for size in (int(s) for s in args.sizes.split(",")):
            build(size, args.root)
    else:
        print(json.dumps(query(args.size, args.root, args.queries, args.rule)))


if __name__ == "__main__":
    main()
