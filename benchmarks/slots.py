"""Ingestion throughput of the embedded model at 1, 2 and 4 llama.cpp slots (continuous
batching), with the ingest concurrency matched to the slots.

    python benchmarks/slots.py [--local-model default] [--docs 10] [--slots 1,2,4]

Per setting: a fresh server (its own prompt cache) with N slots of 8,192 tokens each, a
fresh index (e5), CoS with the `cos-fast` preset (what `cos ingest --preset cos-fast` runs) on the
first ``--docs`` SQuAD dev chunks at concurrency N. Reports wall time, documents per hour,
calls, prompt tokens and the share served from llama.cpp's prompt cache, completion tokens
per document and per call type, and the held-out F1 of the summaries (questions 6-10 of
each chunk's human questions, answered from the summary in one call per document, outside
the timing) so a faster setting that writes worse summaries shows. Run it alone on the CPU.
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
from cos_integrations.summarize.engine import ModelRun
from cos_integrations.summarize.questions import QAPair
from cos_integrations.usage import Usage

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "squad-v1.1-dev-chunks.jsonl"


async def heldout_f1(engine: ChainOfSummaries, summary: str, qas: list[dict]) -> float:
    bank = [QAPair(question=q["question"], answers=q["answers"], split="val") for q in qas]
    ev = await engine.evaluate(summary, bank, ModelRun(engine.llm, engine.config, None))
    return ev.val if not isinstance(ev, str) and ev.val is not None else 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--local-model", default="default")
    ap.add_argument("--docs", type=int, default=10)
    ap.add_argument("--slots", default="1,2,4")
    ap.add_argument("--out", type=Path, default=None, help="also write the rows as JSON")
    args = ap.parse_args()
    rows = [json.loads(line) for line in open(DATA)][: args.docs]
    docs = [SourceDocument(doc_id=r["doc_id"], text=r["text"]) for r in rows]
    config = CoSConfig.fast()
    embedder = LocalEmbedder()
    results = []
    for slots in (int(x) for x in args.slots.split(",")):
        with LocalModelServer(
            args.local_model, n_ctx=8192, slots=slots, share=False, reuse=False
        ) as server:
            llm = server.chat_model()
            engine = ChainOfSummaries(llm, config)
            with tempfile.TemporaryDirectory() as tmp:
                index = CoSIndex(tmp, embedder=embedder, config=config)
                t0 = time.monotonic()
                report = asyncio.run(index.aingest(docs, engine, concurrency=slots))
                wall = time.monotonic() - t0
                by_task: dict[str, Usage] = {}
                for res in report.results.values():
                    for task, u in res.usage_by_task.items():
                        by_task.setdefault(task, Usage()).add(u)
                f1s = []
                for r in rows:
                    cur = index.store.current_summary(r["doc_id"])
                    if cur is not None:
                        f1s.append(asyncio.run(heldout_f1(engine, cur.text, r["qas"][5:10])))
                index.store.close()
        u = report.usage
        row = {
            "slots": slots,
            "wall_s": round(wall, 1),
            "docs_per_hour": round(len(docs) / wall * 3600, 1),
            "failed": len(report.failed),
            "calls": u.calls,
            "prompt_tokens": u.prompt_tokens,
            "cached_share": round(u.cached_tokens / u.prompt_tokens, 3) if u.prompt_tokens else 0,
            "completion_per_doc": round(u.completion_tokens / len(docs)),
            "completion_by_task": {t: x.completion_tokens for t, x in sorted(by_task.items())},
            "prompt_uncached_by_task": {
                t: x.prompt_tokens - x.cached_tokens for t, x in sorted(by_task.items())
            },
            "heldout_f1": round(sum(f1s) / len(f1s), 3) if f1s else None,
        }
        results.append(row)
        print(json.dumps(row), flush=True)
    base = results[0]["docs_per_hour"]
    print(
        "\n| slots | wall | docs/hour | x 1 slot | calls | prompt tokens | from cache | "
        "completion tokens / doc | held-out F1 | failed |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['slots']} | {r['wall_s']:.0f} s | {r['docs_per_hour']:.1f} | "
            f"{r['docs_per_hour'] / base:.2f} | {r['calls']} | {r['prompt_tokens']:,} | "
            f"{r['cached_share']:.0%} | {r['completion_per_doc']} | {r['heldout_f1']} | "
            f"{r['failed']} |"
        )
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
