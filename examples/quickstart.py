"""The main job end to end on the embedded default model (no API key, no GPU, no internet).

1. ingest examples/docs/ into an index of summaries (Chroma + the SQLite store) in the
   shipped tiered mode: one zero-shot summary call a document;
2. ask a question the summaries answer (a cache hit);
3. ask one they do not (a miss: answered from the full text, and a refine job queued);
4. run the refine queue once, then ask the miss again: it now hits;
5. print the document's version history.

Run: ``make demo`` (installs everything) or ``python examples/quickstart.py [INDEX_DIR]``.
Set COS_BASE_URL / OPENAI_API_KEY to use another model, COS_LOCAL_MODEL=small for a faster one.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from pathlib import Path

from cos_integrations import (
    ChainOfSummaries,
    CoSConfig,
    CoSIndex,
    FallbackRetriever,
    LocalEmbedder,
    Refiner,
    answer_from,
    load_paths,
    open_model,
)

HERE = Path(__file__).parent
HIT = "When is the rent due?"
MISS = "Where must bicycles be stored?"
# The shipped preset (tiered) with short summaries (60 words), so that a detail is left
# out and the cache can miss.
CONFIG = CoSConfig.shipped(max_summary_words=60)


def show(label: str, res, answer: str | None) -> None:
    state = "HIT " if res.hit else "MISS"
    print(f"\n[{state}] {label}: {res.query!r}  ({res.reason})")
    for h in res.items:
        print(f"    {h.kind:7s} {h.metadata.get('source', h.doc_id)}  score={h.score:.3f}")
    print(f"    answer: {answer}   (context ~{res.context_tokens} tokens)")
    if res.job_id is not None:
        print(f"    queued refine job {res.job_id}")


async def ask(retriever: FallbackRetriever, llm, label: str, query: str):
    res = await retriever.aretrieve(query)
    answer = res.answer
    if answer is None and res.items:
        answer, _ = await answer_from(llm, query, res.items)
    show(label, res, answer)
    return res


async def main(index_dir: Path) -> None:
    t0 = time.monotonic()
    shutil.rmtree(index_dir, ignore_errors=True)
    docs, problems = load_paths([HERE / "docs"])
    for p in problems:
        print(f"skipped {p.path}: {p.reason}")
    index = CoSIndex(index_dir, embedder=LocalEmbedder(), config=CONFIG)
    with open_model(n_ctx=CONFIG.context_tokens, echo=print) as llm:
        engine = ChainOfSummaries(llm, CONFIG)
        print(f"\n== ingest {len(docs)} documents (tiered: zero-shot, <= 60-word summaries)")
        report = await index.aingest(
            docs,
            engine,
            on_progress=lambda d, s: print(f"  {s}: {d} ({time.monotonic() - t0:.0f}s)"),
        )
        for doc_id, r in report.results.items():
            print(
                f"  {doc_id}: {r.summary_tokens} summary tokens from {r.source_tokens} source "
                f"tokens, {r.usage.calls} calls, best iteration {r.best_iteration}"
            )
        # the default hit rule (BENCHMARKS.md): the model reads the sentences of the best
        # summary and its best chunk closest to the query and answers with a quote from them
        retriever = FallbackRetriever(index, llm=llm, k=2)
        print("\n== queries")
        await ask(retriever, llm, "hit expected", HIT)
        miss = await ask(retriever, llm, "miss expected", MISS)
        print("\n== refine the queue once (the miss becomes a question that teaches the summary)")
        refiner = Refiner(index, engine)
        for o in await refiner.arun_once():
            print(
                f"  job {o.job_id} {o.doc_id}: {o.status} ({o.reason}); source answer {o.answer!r}"
            )
        print("\n== the same question again")
        await ask(retriever, llm, "after refinement", MISS)
        doc_id = (miss.items[0].doc_id if miss.items else None) or "docs/tenancy-agreement.md"
        print(f"\n== history of {doc_id}")
        for v in index.store.versions(doc_id):
            print(f"  v{v.version} {v.status:9s} by {v.created_by:6s} {v.reason or ''}")
            print(f"      {v.text}")
        counts = index.store.event_counts()
        print(
            f"\nhits {counts.get('hit', 0)}, misses {counts.get('miss', 0)}; "
            f"index at {index_dir}; total {time.monotonic() - t0:.0f}s"
        )


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("demo-index")))
