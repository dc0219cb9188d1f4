"""Miss-triggered refinement in the background: a miss is served from full text at once,
a background worker refines the summary meanwhile, and the same question then hits.

Run: ``python examples/miss_triggered_refinement.py`` (after ``make install-default``).
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

from cos_integrations import (
    BackgroundRefiner,
    ChainOfSummaries,
    CoSConfig,
    CoSIndex,
    FallbackRetriever,
    HitRule,
    LocalEmbedder,
    Refiner,
    load_paths,
    open_model,
)

HERE = Path(__file__).parent
QUESTION = "What is the travel insurance policy number?"


async def main(index_dir: Path) -> None:
    shutil.rmtree(index_dir, ignore_errors=True)
    docs, _ = load_paths([HERE / "docs" / "travel-policy.md"])
    config = CoSConfig.fast(max_summary_words=50)
    index = CoSIndex(index_dir, embedder=LocalEmbedder(), config=config)
    with open_model(echo=print) as llm:
        engine = ChainOfSummaries(llm, config)
        await index.aingest(docs, engine)
        print("summary v1:", index.store.current_summary(docs[0].doc_id).text)
        with BackgroundRefiner(Refiner(index, engine), idle_poll=1.0) as worker:
            retriever = FallbackRetriever(
                index,
                llm=llm,
                k=1,
                refine_on_miss="background",
                on_miss=worker.notify,
                rule=HitRule(judge="llm", threshold=0.7),
            )
            first = await retriever.aretrieve(QUESTION)
            print(
                f"\nfirst ask: {'HIT' if first.hit else 'MISS'} ({first.reason}); "
                f"served {len(first.items)} source chunks; refine job {first.job_id}"
            )
            print("the application keeps serving while the worker refines ...")
            await asyncio.to_thread(worker.wait_idle, 900)
            for o in worker.outcomes:
                print(f"background refinement: {o.status} ({o.reason}); answer {o.answer!r}")
            again = await retriever.aretrieve(QUESTION)
            print(f"\nsecond ask: {'HIT' if again.hit else 'MISS'}: answer {again.answer!r}")
        for v in index.store.versions(docs[0].doc_id):
            print(f"v{v.version} by {v.created_by} {v.reason}: {v.text}")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("demo-index-refine")))
