"""Would a refine job that reads the question's top chunks side by side send each missed
traffic question to its own document? A probe of the 1.5B model, before building it.

A refine job reads one document (the one whose chunk ranked first for the missed question)
and stops at the first whose source grounds an answer, so an ambiguous question can take a
sibling chunk's reading ("How many picks did Peyton Manning throw in the season?": "four",
in one game, where the question's own chunk says 17 for the season). The alternative probed
here: one call reads the collection's top ``--chunks`` chunks for the question, labelled
Passage 1..n, and answers with the passage that holds the answer; the job would then go to
that passage's document. For each traffic question that missed in a recorded
``--refine-from-traffic`` run it prints the passages' documents, the model's answer and
passage, whether that passage is the question's own document, and the answer's SQuAD F1.

    python benchmarks/side_by_side_probe.py RUN.docs.jsonl --index RUN.index-* \
        [--local-model default] [--chunks 3] [--out FILE.jsonl]

Alone on the CPU (it starts the embedded model); 11 questions take about 2 minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
from pathlib import Path

from cos_integrations.embedded.server import LocalModelServer
from cos_integrations.metrics import squad_f1
from cos_integrations.research.jsonl import append_jsonl, read_jsonl
from cos_integrations.serving.index import CoSIndex

PROMPT = (
    "Answer the question using only the passages. Answer as simply as possible: a word or "
    "short phrase. Say which passage holds the answer.\n\nQuestion: {q}\n\n"
    'Reply as JSON: {{"answer": "...", "passage": <number>}}. If no passage answers it, '
    'answer "I don\'t know".'
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a --refine-from-traffic run's OUT.docs.jsonl")
    ap.add_argument("--index", type=Path, required=True, help="that run's OUT.index-* folder")
    ap.add_argument("--local-model", default="default")
    ap.add_argument("--chunks", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    missed = [
        (rec["doc_id"], row)
        for rec in read_jsonl(args.run)
        for row in rec.get("traffic", [])
        if not row["hit"]
    ]
    with tempfile.TemporaryDirectory() as tmp:  # the run's index stays as it was
        index = CoSIndex(shutil.copytree(args.index, Path(tmp) / "index"), create=False)
        with LocalModelServer(args.local_model, n_ctx=8192) as server:
            llm = server.chat_model()
            own = right = 0
            for doc_id, row in missed:
                hits = index.search_chunks(row["question"], args.chunks)
                text = "\n\n".join(f"Passage {i}:\n{h.text}" for i, h in enumerate(hits, 1))
                messages = [
                    {"role": "system", "content": text},
                    {"role": "user", "content": PROMPT.format(q=row["question"])},
                ]
                reply = asyncio.run(llm.chat(messages, max_tokens=60)).text
                try:
                    got = json.loads(reply)
                    answer, passage = str(got.get("answer")), int(got.get("passage"))
                except (ValueError, TypeError, AttributeError):
                    answer, passage = reply, 0
                chosen = hits[passage - 1].doc_id if 0 < passage <= len(hits) else None
                f1 = squad_f1(answer, row["gold"])
                own += chosen == doc_id
                right += f1 >= 0.5
                rec = {
                    "question": row["question"],
                    "own_doc": doc_id,
                    "passages": [h.doc_id for h in hits],
                    "answer": answer,
                    "passage_doc": chosen,
                    "own": chosen == doc_id,
                    "f1": f1,
                    "miss_f1": row["f1"],
                }
                print(json.dumps(rec), flush=True)
                if args.out:
                    append_jsonl(args.out, rec)
    n = len(missed) or 1
    print(
        f"{len(missed)} missed traffic questions: the passage named is the question's own "
        f"document for {own} ({own / n:.0%}); the answer right (F1 >= 0.5) for {right}"
    )


if __name__ == "__main__":
    main()
