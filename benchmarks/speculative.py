"""Prompt-lookup speculation (llama.cpp ``ngram-simple``) on the embedded model: does
checking tokens copied from the context in one batch beat decoding them one by one?

    python benchmarks/speculative.py [--local-model default] [--docs 1]

For each setting (draft tokens / n-gram that must match; 0 = off) a fresh server, one
warm-up call, then the thesis prompt of the first ``--docs`` SQuAD dev chunks (the
engine's longest generation: the summary, capped at 360 tokens for the ``fast`` preset),
greedy. Reports llama.cpp's own timings (decode seconds, tokens/s, drafted and accepted
tokens) and whether the text equals the text without speculation. Run it alone on the
CPU.
"""

from __future__ import annotations

import argparse
import json
import urllib.request
from pathlib import Path

from cos_integrations import CoSConfig
from cos_integrations.embedded.server import LocalModelServer
from cos_integrations.summarize.prompts import thesis_messages

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "squad-v1.1-dev-chunks.jsonl"
SETTINGS = ((0, 6), (16, 3), (8, 3), (16, 6), (8, 6))


def post(base: str, messages: list[dict], max_tokens: int) -> dict:
    body = json.dumps(
        {"messages": messages, "max_tokens": max_tokens, "temperature": 0.0, "seed": 0}
    ).encode()
    req = urllib.request.Request(
        f"{base}/v1/chat/completions", body, {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=900) as r:
        return json.loads(r.read())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--local-model", default="default")
    ap.add_argument("--docs", type=int, default=1)
    args = ap.parse_args()
    cfg = CoSConfig.fast()
    cap = 360  # the engine's thesis cap for the fast preset (200 words x 1.6 + 40)
    rows = [json.loads(line) for line in open(DATA)][: args.docs]
    plain: dict[str, str] = {}
    for draft, ngram in SETTINGS:
        with LocalModelServer(
            args.local_model, n_ctx=8192, draft=draft, draft_ngram=ngram, share=False, reuse=False
        ) as server:
            post(server.address, [{"role": "user", "content": "Hi"}], 1)  # warm-up
            for r in rows:
                msgs = thesis_messages(r["text"], words=cfg.max_summary_words)
                out = post(server.address, msgs, cap)
                text = out["choices"][0]["message"]["content"]
                t = out.get("timings", {})
                plain.setdefault(r["doc_id"], text) if draft == 0 else None
                print(
                    json.dumps(
                        {
                            "draft": draft,
                            "ngram": ngram,
                            "doc": r["doc_id"],
                            "decoded": t.get("predicted_n"),
                            "decode_s": round(t.get("predicted_ms", 0) / 1000, 1),
                            "tokens_per_s": round(t.get("predicted_per_second", 0), 1),
                            "drafted": t.get("draft_n"),
                            "accepted": t.get("draft_n_accepted"),
                            "same_text": text == plain.get(r["doc_id"]),
                        }
                    ),
                    flush=True,
                )


if __name__ == "__main__":
    main()
