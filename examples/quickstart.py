"""The main job end to end on the embedded default model (no API key, no GPU, no internet).

1. ingest examples/docs/ into an index of summaries (Chroma + the SQLite store) in the
   shipped tiered mode: one zero-shot summary call a document;
2. ask a question: the summary path is checked against the source chunks (a new index
   trusts its summaries only once checks show they agree with the source), the chunks'
   answer is returned and kept as a verified answer;
3. ask it again: served the verified answer, with no model call; and in other words: a
   rewording closer than the bar (0.98) is served it too, one further away goes the usual
   way and teaches the entry;
4. ask a question the summaries do not cover (a miss: answered from the full text, a
   refine job queued), run the refine queue, ask it again;
5. print how each ask was answered and the document's version history.

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
    compute_stats,
    load_paths,
    open_model,
)

HERE = Path(__file__).parent
ASKED = "When is the rent due?"
REWORDED = "When is the rent due, please?"
MISS = "Where must bicycles be stored?"
# The shipped preset (tiered) with short summaries (60 words), so that a detail is left
# out and the cache can miss.
CONFIG = CoSConfig.shipped(max_summary_words=60)


def show(label: str, res) -> None:
    how = f"served ({res.served})" if res.served else "HIT" if res.hit else "MISS"
    print(f"\n[{how}] {label}: {res.query!r}  ({res.reason})")
    for h in res.items:
        print(f"    {h.kind:7s} {h.metadata.get('source', h.doc_id)}  score={h.score:.3f}")
    print(f"    answer: {res.answer}   ({res.usage.calls} model calls)")
    if res.job_id is not None:
        print(f"    queued refine job {res.job_id}")


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
                f"tokens, {r.usage.calls} calls"
            )
        # the shipped rule: verified answers, the router, the grounded hit rule, k = 2
        retriever = FallbackRetriever(index, llm=llm)
        print("\n== a question, then the same again and in other words")
        show("first ask", await retriever.aanswer(ASKED))
        show("asked again", await retriever.aanswer(ASKED))
        show("reworded", await retriever.aanswer(REWORDED))
        print("\n== a question the summaries do not cover")
        miss = await retriever.aanswer(MISS)
        show("first ask", miss)
        # a round on the question's first miss, to show one (a worker's default, min_asks=2,
        # waits for a question to come back without a verified answer)
        refiner = Refiner(index, engine, min_asks=1)
        for o in await refiner.arun_once():
            print(f"  refine job {o.job_id} {o.doc_id}: {o.status}; source answer {o.answer!r}")
        show("after refinement", await retriever.aanswer(MISS))
        doc_id = (miss.items[0].doc_id if miss.items else None) or "docs/tenancy-agreement.md"
        print(f"\n== history of {doc_id}")
        for v in index.store.versions(doc_id):
            print(f"  v{v.version} {v.status:9s} by {v.created_by:6s} {v.reason or ''}")
            print(f"      {v.text}")
        s = compute_stats(index.store)
        print(
            f"\n{s.queries} asks: {s.served} served a verified answer, {s.hits} summary hits, "
            f"{s.misses} misses; router checks {s.checks} ({s.disagreements} disagreed); "
            f"index at {index_dir}; total {time.monotonic() - t0:.0f}s"
        )


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("demo-index")))
