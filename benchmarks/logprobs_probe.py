"""Can the judge's own token probabilities say how sure it is? A probe of the embedded
llama.cpp server (no quality figure): one grounded call (``hit_rule.GROUNDED_SCHEMA``,
as the judge asks it) with ``logprobs`` on, then the reply's text beside the tokens the
server reports probabilities for. llama.cpp reports pre-sampling probabilities
(ggml-org/llama.cpp#10783); under a JSON schema the grammar picks tokens after them, so
the reported tokens may not be the reply's. Prints both and whether they agree.

    python benchmarks/logprobs_probe.py [--local-model smoke|small|default]
"""

from __future__ import annotations

import argparse

import openai

from cos_integrations import open_model
from cos_integrations.serving.hit_rule import GROUNDED_SCHEMA
from cos_integrations.summarize.prompts import grounded_messages

CONTENT = "The lease starts on 1 March. Rent is due on the 1st of each month."
QUESTION = "When is rent due?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--local-model", default="smoke")
    args = ap.parse_args()
    with open_model(args.local_model) as llm:
        client = openai.OpenAI(base_url=llm.base_url, api_key="sk-no-key-required")
        reply = client.chat.completions.create(
            model=llm.model,
            messages=grounded_messages(CONTENT, QUESTION),
            response_format={"type": "json_schema", "json_schema": GROUNDED_SCHEMA},
            logprobs=True,
            top_logprobs=3,
            max_tokens=64,
            temperature=0.0,
        )
    choice = reply.choices[0]
    text = choice.message.content or ""
    reported = "".join(t.token for t in (choice.logprobs.content if choice.logprobs else []))
    print(f"model: {llm.name}")
    print(f"reply:           {text!r}")
    print(f"reported tokens: {reported!r}")
    print(f"the reported tokens are the reply's: {reported == text}")
    for t in (choice.logprobs.content if choice.logprobs else [])[:8]:
        top = ", ".join(f"{x.token!r} {x.logprob:.2f}" for x in t.top_logprobs)
        print(f"  {t.token!r:>12} {t.logprob:7.2f}   top: {top}")


if __name__ == "__main__":
    main()
