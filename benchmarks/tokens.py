"""Tokens and seconds per call type of CoS ingestion on the embedded model, for the
throughput work (issue 17, item 2): what each step costs, before and after a cut.

    python benchmarks/tokens.py run   --docs 10 --out R.json [--local-model default]
    python benchmarks/tokens.py score R1.json R2.json ...     [--local-model default]

``run``: a fresh llama.cpp server (1 slot, 8,192 tokens, its own prompt cache), CoS with
the ``fast`` preset on the first ``--docs`` SQuAD dev chunks, one document at a time (what
``cos ingest --preset cos-fast`` does on this machine). Every model call is timed and
classified by its prompt (thesis, restate, questions, answers, rewrite), with its prompt,
cached and completion tokens, so the report says where the seconds go. It uses only the
engine's oldest public API (``ChainOfSummaries.asummarize``, ``LocalModelServer``), so it
also times an older checkout: ``PYTHONPATH=/path/to/old/checkout python benchmarks/...``.

``score``: held-out F1 of the summaries in each file (each chunk's human questions 6-10,
answered from the summary in one call per document with *this* checkout's answer
prompt), so summaries from two versions are scored by the same judge. Run it alone on
the CPU, after the runs, never beside another model server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path

import cos_integrations
from cos_integrations import ChainOfSummaries, CoSConfig
from cos_integrations.embedded.server import LocalModelServer

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "squad-v1.1-dev-chunks.jsonl"

# A marker of each prompt kind, present in every prompt version measured so far.
KINDS = (
    ("restate", "That describes what the document is about"),
    ("thesis", "Write an information-dense summary"),
    ("questions", "diverse and specific questions about the document"),
    ("answers", "Answer each question using only the content below"),
    ("rewrite", "Refine the existing summary"),
)


def kind_of(messages: list[dict[str, str]]) -> str:
    last = messages[-1].get("content") or ""
    first = messages[0].get("content") or ""
    for kind, marker in KINDS:
        if marker in last or (kind == "answers" and marker in first):
            return kind
    return "other"


class Timed:
    """The chat model, with every call's seconds and tokens recorded by prompt kind."""

    def __init__(self, llm: object) -> None:
        self.llm = llm
        self.calls: list[dict] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.llm, name)

    async def chat(self, messages, **kwargs):  # noqa: ANN001, ANN201 - any version's signature
        t0 = time.monotonic()
        result = await self.llm.chat(messages, **kwargs)
        u = result.usage
        self.calls.append(
            {
                "kind": kind_of(list(messages)),
                "seconds": round(time.monotonic() - t0, 2),
                "prompt": u.prompt_tokens,
                "cached": u.cached_tokens,
                "completion": u.completion_tokens,
                "max_tokens": kwargs.get("max_tokens"),
                "reply": (result.text or "")[:400],
            }
        )
        return result


def summarize_calls(calls: list[dict], docs: int) -> dict:
    by: dict[str, dict] = {}
    for c in calls:
        row = by.setdefault(c["kind"], {"calls": 0, "seconds": 0.0, "uncached": 0, "completion": 0})
        row["calls"] += 1
        row["seconds"] += c["seconds"]
        row["uncached"] += c["prompt"] - c["cached"]
        row["completion"] += c["completion"]
    for row in by.values():
        row["seconds"] = round(row["seconds"], 1)
        row["per_doc"] = {k: round(row[k] / docs, 1) for k in ("calls", "seconds", "completion")}
    return by


def run(args: argparse.Namespace) -> None:
    rows = [json.loads(line) for line in open(DATA)][: args.docs]
    config = CoSConfig.fast()
    docs = []
    with LocalModelServer(args.local_model, n_ctx=8192, reuse=False) as server:
        timed = Timed(server.chat_model())
        engine = ChainOfSummaries(timed, config)
        t0 = time.monotonic()
        for r in rows:
            d0 = time.monotonic()
            res = asyncio.run(engine.asummarize(r["text"], doc_id=r["doc_id"]))
            docs.append(
                {
                    "doc_id": r["doc_id"],
                    "seconds": round(time.monotonic() - d0, 1),
                    "summary": res.summary,
                    "words": len(res.summary.split()),
                    "iterations": len(res.iterations),
                    "best": res.best_iteration,
                    "stop": res.stop_reason,
                }
            )
            print(json.dumps({k: v for k, v in docs[-1].items() if k != "summary"}), flush=True)
        wall = time.monotonic() - t0
    calls = timed.calls
    out = {
        "code": str(Path(cos_integrations.__file__).resolve().parent),
        "prompt_version": config.prompt_version,
        "draft": os.environ.get("COS_DRAFT", "0"),
        "docs": len(rows),
        "wall_s": round(wall, 1),
        "s_per_doc": round(wall / len(rows), 1),
        "docs_per_hour": round(len(rows) / wall * 3600, 1),
        "calls_per_doc": round(len(calls) / len(rows), 2),
        "completion_per_doc": round(sum(c["completion"] for c in calls) / len(rows), 1),
        "uncached_per_doc": round(sum(c["prompt"] - c["cached"] for c in calls) / len(rows), 1),
        "summary_words": round(sum(d["words"] for d in docs) / len(docs), 1),
        "by_kind": summarize_calls(calls, len(rows)),
        "documents": docs,
        "calls": calls,
    }
    args.out.write_text(json.dumps(out, indent=1))
    print(json.dumps({k: v for k, v in out.items() if k not in ("documents", "calls")}, indent=1))


def score(args: argparse.Namespace) -> None:
    from slots import heldout_f1  # the same scoring as the slots benchmark

    qas = {(r := json.loads(line))["doc_id"]: r["qas"] for line in open(DATA)}
    with LocalModelServer(args.local_model, n_ctx=8192, reuse=False) as server:
        engine = ChainOfSummaries(server.chat_model(), CoSConfig.fast())

        for path in args.files:
            data = json.loads(path.read_text())
            scores = [
                asyncio.run(heldout_f1(engine, d["summary"], qas[d["doc_id"]][5:10]))
                for d in data["documents"]
            ]
            data["heldout_f1"] = round(sum(scores) / len(scores), 3)
            data["heldout_f1_by_doc"] = [round(s, 3) for s in scores]
            data["scored_with"] = engine.config.prompt_version
            path.write_text(json.dumps(data, indent=1))
            print(path, data["heldout_f1"], flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--docs", type=int, default=10)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--local-model", default="default")
    s = sub.add_parser("score")
    s.add_argument("files", type=Path, nargs="+")
    s.add_argument("--local-model", default="default")
    args = ap.parse_args()
    run(args) if args.cmd == "run" else score(args)


if __name__ == "__main__":
    main()
