"""Prompt-cache effect of the document-first layout (design rule: document first, byte-
identical; the varying task last).

Runs CoS on the same documents twice against the embedded llama.cpp server: once with the
library's prompts, once with a "document-last" variant (task first, document after it, as
many prompt templates do). Reports uncached prompt tokens per source token for each, and
the ratio. Each run uses a fresh server so nothing is cached across runs.

    python benchmarks/prompt_cache.py --local-model small --docs 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from cos_integrations import ChainOfSummaries, CoSConfig, prompts
from cos_integrations.embedded.server import LocalModelServer
from cos_integrations.text import estimate_tokens

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "squad-v1.1-dev-chunks.jsonl"


def document_last(builder):
    """Wrap a prompt builder: move the document after the task (one user message)."""

    def wrapped(*args, **kwargs):
        msgs = builder(*args, **kwargs)
        if msgs and "<document>" in msgs[0]["content"]:
            task = "\n\n".join(m["content"] for m in msgs[1:])
            return [{"role": "user", "content": f"{task}\n\n{msgs[0]['content']}"}]
        return msgs

    return wrapped


async def run(texts, llm, config):
    engine = ChainOfSummaries(llm, config)
    results = await engine.asummarize_many(texts, concurrency=1)
    prompt = sum(r.usage.prompt_tokens for r in results)
    cached = sum(r.usage.cached_tokens for r in results)
    source = sum(estimate_tokens(t) for t in texts)
    return {
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "uncached": prompt - cached,
        "source_tokens": source,
        "uncached_per_source_token": (prompt - cached) / source,
        "calls": sum(r.usage.calls for r in results),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--local-model", default="small")
    ap.add_argument("--docs", type=int, default=3)
    ap.add_argument("--data", default=str(DATA))
    args = ap.parse_args()
    rows = [json.loads(line) for line in open(args.data)][: args.docs]
    texts = [r["text"] for r in rows]
    config = CoSConfig.fast(max_summary_words=120)
    out = {}
    for layout in ("document-first", "document-last"):
        if layout == "document-last":
            import cos_integrations.summarize.engine as engine_mod

            for name in ("thesis_messages", "questions_messages", "rewrite_messages"):
                setattr(engine_mod, name, document_last(getattr(prompts, name)))
        with LocalModelServer(args.local_model, n_ctx=8192) as server:
            out[layout] = asyncio.run(run(texts, server.chat_model(), config))
        print(layout, json.dumps(out[layout]))
    first, last = out["document-first"], out["document-last"]
    print(
        f"uncached prompt tokens per source token: document-first "
        f"{first['uncached_per_source_token']:.2f}, document-last "
        f"{last['uncached_per_source_token']:.2f}; ratio last/first "
        f"{last['uncached_per_source_token'] / first['uncached_per_source_token']:.2f}"
    )


if __name__ == "__main__":
    main()
