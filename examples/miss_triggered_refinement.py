"""Miss-triggered refinement in the background: a miss is served from full text at once,
the retriever's own background refiner teaches the summary meanwhile, and the same
question then hits. One refiner (``refine_on_miss="background"``), closed on exit.

Run: ``python examples/miss_triggered_refinement.py`` (after ``make install-default``).
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

from cos_integrations import (
    ChainOfSummaries,
    CoSConfig,
    CoSIndex,
    FallbackRetriever,
    LocalEmbedder,
    RetrievalResult,
    load_paths,
    open_model,
)

HERE = Path(__file__).parent
QUESTION = "What is the travel insurance policy number?"


async def main(index_dir: Path) -> tuple[RetrievalResult, RetrievalResult]:
    """Ingest one document, ask a question its summary misses, let the background
    refiner teach the summary, ask again; the two results."""
    shutil.rmtree(index_dir, ignore_errors=True)
    docs, _ = load_paths([HERE / "docs" / "travel-policy.md"])
    config = CoSConfig.shipped(max_summary_words=50)  # what `cos ingest` ships, shorter
    index = CoSIndex(index_dir, embedder=LocalEmbedder(), config=config)
    with open_model(echo=print) as llm:
        await index.aingest(docs, ChainOfSummaries(llm, config))
        print("summary v1:", index.store.current_summary(docs[0].doc_id).text)
        # the shipped hit rule (the model judge, as the retriever has a model); the
        # retriever owns the background refiner and close() stops it; refine_min_asks=1
        # refines on the first miss, to show a round (the default, 2, waits for a question
        # to come back without a verified answer)
        retriever = FallbackRetriever(
            index, llm=llm, k=1, refine_on_miss="background", refine_min_asks=1
        )
        try:
            first = await retriever.aretrieve(QUESTION)
            print(
                f"\nfirst ask: {'HIT' if first.hit else 'MISS'} ({first.reason}); "
                f"served {len(first.items)} source chunks; refine job {first.job_id}"
            )
            worker = retriever.background
            if worker is not None:  # a miss started it
                print("the application keeps serving while the worker refines ...")
                await asyncio.to_thread(worker.wait_idle, 900)
                for o in worker.outcomes:
                    print(f"background refinement: {o.status} ({o.reason}); answer {o.answer!r}")
            again = await retriever.aretrieve(QUESTION)
            print(f"\nsecond ask: {'HIT' if again.hit else 'MISS'}: answer {again.answer!r}")
        finally:
            retriever.close()
        for v in index.store.versions(docs[0].doc_id):
            print(f"v{v.version} by {v.created_by} {v.reason}: {v.text}")
    index.store.close()
    return first, again


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("demo-index-refine")))
