"""The router with a stronger model behind the same retriever, the same settings: the
gold answers stand in for the model (an *oracle*), on the stream of ``stream_sets.sh``.

    python benchmarks/router_oracle.py [--set squad] [--asks 400] [--tag stream]

The oracle answers every call the product and ``rag`` make as a model that reads perfectly
would: the judge (a grounded reply) quotes the sentence of its text that holds a gold
answer and gives that answer, or the empty pair when its text holds none; an answer call
gives the gold answer its text holds, or "I don't know". So the summary path is right
exactly where the summary kept the answer, and the chunks exactly where they hold it. The
router (``max_error`` 0.02, shipped) then learns from its checks what it learned from the
1.5B model's (``TAG-SET.json``, ``--tag``): how often a summary answer disagrees with the source,
and whether it may serve. No model runs; the collection's index is a copy of the 1.5B
stream's (``stream-SET.json.stream-index-base``, run ``stream_sets.sh`` first), so nothing
is embedded again but the questions. Refine passes are off (the oracle writes no
summaries). Prints, for the oracle and the recorded 1.5B run: F1, prompt tokens, the
router's checks and their disagreements, and the asks answered from the summaries.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
from pathlib import Path

from cos_integrations.model import ChatResult
from cos_integrations.research.datasets import load_dataset
from cos_integrations.research.evaluation import RetrievalEvalOptions, run_eval
from cos_integrations.research.jsonl import read_jsonl
from cos_integrations.research.stream_eval import StreamOptions
from cos_integrations.research.streams import RewordingBook
from cos_integrations.summarize.config import CoSConfig
from cos_integrations.summarize.prompts import UNKNOWN_ANSWER
from cos_integrations.text import estimate_tokens, split_sentences
from cos_integrations.usage import Usage

RESULTS = Path(__file__).resolve().parent / "results"
QUESTION = re.compile(r"Question: (.*?)\n\n", re.S)
FENCED = re.compile(r"<(content|document)>\n(.*)\n</\1>", re.S)
NUMBERED = re.compile(r"Questions:\n1\. (.*?)\n\n", re.S)


class OracleModel:
    """A ChatModel answering from the gold answers (see the module docstring); ``gold``:
    question text -> its gold answers (rewordings included)."""

    def __init__(self, gold: dict[str, list[str]]) -> None:
        self.gold = gold
        self.calls = 0

    def _held(self, question: str, text: str) -> tuple[str, str] | None:
        """The first gold answer ``text`` holds, with its sentence."""
        for answer in self.gold.get(question.strip(), []):
            for sentence in split_sentences(text):
                if answer and answer.lower() in sentence.lower():
                    return answer, sentence
        return None

    async def chat(self, messages, *, max_tokens=None, temperature=0.0, json_schema=None):
        self.calls += 1
        # what the call reads: the text inside the prompt's fence (prompts._fence)
        fenced = FENCED.search(messages[0]["content"])
        text = fenced.group(2) if fenced else messages[0]["content"]
        task = messages[-1]["content"]
        usage = Usage(calls=1, prompt_tokens=sum(estimate_tokens(m["content"]) for m in messages))
        if (m := QUESTION.match(task)) is not None:  # a grounded reply: quote, then answer
            held = self._held(m.group(1), text)
            quote, answer = (held[1], held[0]) if held else ("", "")
            return ChatResult(json.dumps({"quote": quote, "answer": answer}), usage)
        if (m := NUMBERED.search(task)) is not None:  # an answer call
            held = self._held(m.group(1), text)
            answer = held[0] if held else UNKNOWN_ANSWER
            return ChatResult(json.dumps({"answers": [{"id": 1, "answer": answer}]}), usage)
        raise ValueError(f"the oracle answers questions only, not: {task[:80]!r}")


def _figures(rows_path: Path) -> dict[str, dict]:
    out = {}
    for rec in read_jsonl(rows_path):
        asks = rec["asks"]
        out[rec["method"]] = {
            "f1": sum(a["f1"] for a in asks) / len(asks),
            "prompt_tokens": sum(a["prompt_tokens"] for a in asks),
            "summary_answers": sum(1 for a in asks if a.get("hit") and not a.get("served")),
            "served": sum(1 for a in asks if a.get("served")),
        }
    return out


def _checks(index_dirs: list[Path]) -> tuple[int, int] | None:
    """The router's checks and disagreements in the product's index (its store)."""
    from cos_integrations.storage.store import SummaryStore

    for d in index_dirs:
        if (d / "cos.sqlite").exists():
            store = SummaryStore(d / "cos.sqlite")
            try:
                return store.check_counts()
            finally:
                store.close()
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", default="squad")
    ap.add_argument("--asks", type=int, default=400)
    ap.add_argument("--tag", default="stream", help="the recorded 1.5B run: TAG-SET.json")
    args = ap.parse_args()
    s = RESULTS / "streams" / args.set
    recorded = RESULTS / f"{args.tag}-{args.set}.json"
    base = recorded.with_suffix(".json.stream-index-base")
    if not base.is_dir():
        raise SystemExit(f"{base} missing: run benchmarks/stream_sets.sh for {args.set} first")
    out = RESULTS / f"oracle-stream-{args.set}.json"
    mine = out.with_suffix(".json.stream-index-base")
    if not mine.is_dir():
        shutil.copytree(base, mine)
    docs = load_dataset(f"{s}.jsonl")
    for d in docs:
        d.qas = d.qas[:16]  # cos eval's --heldout-questions default, as stream_sets.sh ran
    extra = load_dataset(f"{s}-distractors.jsonl", questions=False)
    gold = {qa.question: qa.answers for d in docs for qa in d.qas}
    book = RewordingBook(RESULTS / f"rewordings-{args.set}.jsonl")
    for d in docs:
        for qa in d.qas:
            for r in book.get(qa.question) or []:
                gold[r] = qa.answers
    model = OracleModel(gold)
    options = StreamOptions(
        asks=args.asks,
        refine_every=0,
        rewordings=str(RESULTS / f"rewordings-{args.set}.jsonl"),
        calls=str(out.with_suffix(".json.calls.jsonl")),
    )
    retrieval = RetrievalEvalOptions(
        summary_method="zero-shot", summaries_from=f"{s}-summaries.docs.jsonl", stream=options
    )
    asyncio.run(
        run_eval(
            model,
            docs,
            methods=["fallback", "rag"],
            config=CoSConfig(),
            out=out,
            model_name="oracle",
            dataset=args.set,
            retrieval=retrieval,
            distractors=extra,
        )
    )
    oracle = _figures(out.with_suffix(".json.stream-rows.jsonl"))
    real = _figures(recorded.with_suffix(".json.stream-rows.jsonl"))
    # the core row's index (the framework rows' are named fallback-llamaindex-..., -langchain-)
    fresh = sorted(out.parent.glob(f"{out.name}.stream-index-fallback-[0-9]*"))
    old = sorted(recorded.parent.glob(f"{recorded.name}.stream-index-fallback-[0-9]*"))
    print(f"{args.asks} asks over {len(docs) + len(extra)} documents ({args.set})")
    print(
        "| model | product F1 (rag's) | prompt tokens (of rag's) | router checks "
        "(disagreeing) | answered from the summaries | served verified answers |"
    )
    print("|---|---|---|---|---|---|")
    for name, figs, dirs in (("oracle", oracle, fresh), ("1.5B (recorded)", real, old)):
        fb, rag = figs["fallback"], figs["rag"]
        got = _checks(dirs)
        checks = f"{got[0]} ({got[1]})" if got else "n/a"
        print(
            f"| {name} | {fb['f1']:.3f} ({rag['f1']:.3f}) | {fb['prompt_tokens']:,} "
            f"({fb['prompt_tokens'] / rag['prompt_tokens']:.0%}) | "
            f"{checks} | {fb['summary_answers']} | "
            f"{fb['served']} |"
        )


if __name__ == "__main__":
    main()
