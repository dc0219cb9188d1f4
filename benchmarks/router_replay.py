"""The router (serving/router.py) replayed on recorded one-question runs, no model call.

    python benchmarks/router_replay.py [--runs four,fresh] [--max-error 0.02]

For each kind of text, the questions of its runs in the order they were asked (the first
slice's ``four`` run, then the second slice's ``fresh`` run: 79-80 questions), each as the
product with the router would have taken it, from what the run recorded for the same
question: a question that never reached the judge (under the threshold, or routed
elsewhere) is the run's miss; one the router sends to the chunks is ``rag``'s answer and
tokens (the product's miss reads the same top-k chunks with the same answer call); a
checked one is ``rag``'s answer at the judge's tokens plus ``rag``'s, its outcome (the
judge's answer against ``rag``'s, when the judge hit) counted; one the summary path serves is
the run's own answer. The judge's tokens of a judged miss are the run's less ``rag``'s.
Prints F1 and prompt tokens beside the run and ``rag``, the checks made and what they
found, and the served summary answers that disagree with the source.
"""

from __future__ import annotations

import argparse

from four_sets_table import RESULTS, row

from cos_integrations.research.jsonl import read_jsonl
from cos_integrations.serving.hit_rule import answers_agree
from cos_integrations.serving.router import Router, upper_bound

KINDS = (
    ("encyclopedia", "squad", "squad2"),
    ("papers", "covid", "covid2"),
    ("stories", "fairy", "fairy2"),
    ("German", "german", "german2"),
)


def _questions(tag: str, name: str) -> list[tuple[dict, dict]]:
    recs = read_jsonl(RESULTS / f"{tag}-{name}.json.docs.jsonl")
    rag = {
        (r["doc_id"], q["question"]): q
        for r in recs
        if r["method"] == "rag"
        for q in r["questions"]
    }
    out = []
    for r in recs:
        if r["method"] == "fallback":
            out += [(q, rag[(r["doc_id"], q["question"])]) for q in r["questions"]]
    return out


def replay(pairs: list[tuple[dict, dict]], router: Router) -> dict:
    checks = disagreements = served = served_wrong = 0
    f1 = tokens = 0.0
    for fb, rg in pairs:
        judged = "answered" in (fb.get("checks") or {})
        if not judged:
            f1 += fb["f1"]
            tokens += fb["prompt_tokens"]
            continue
        judge_tokens = (
            fb["prompt_tokens"] if fb["hit"] else fb["prompt_tokens"] - rg["prompt_tokens"]
        )
        mode = router.mode(fb["question"], checks, disagreements)
        if mode == "chunks":
            f1 += rg["f1"]
            tokens += rg["prompt_tokens"]
        elif mode == "check":
            f1 += rg["f1"]
            tokens += max(judge_tokens, 0) + rg["prompt_tokens"]
            if fb["hit"]:
                checks += 1
                disagreements += not answers_agree(fb["judge_answer"], [rg["answer"] or ""])
        else:
            f1 += fb["f1"]
            tokens += fb["prompt_tokens"]
            if fb["hit"]:
                served += 1
                served_wrong += not answers_agree(fb["judge_answer"], [rg["answer"] or ""])
    n = len(pairs)
    return {
        "f1": f1 / n,
        "tokens": tokens,
        "checks": checks,
        "disagreements": disagreements,
        "served": served,
        "served_wrong": served_wrong,
        "bound": upper_bound(disagreements, checks),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", default="four,fresh", help="the two slices' run tags")
    ap.add_argument("--max-error", type=float, default=0.02)
    args = ap.parse_args()
    first, second = args.runs.split(",")
    router = Router(max_error=args.max_error)
    print(
        "| text | questions | fallback F1 | router F1 | rag F1 | prompt tokens: fallback / "
        "router (of rag's) | checks (disagreeing) | bound after | summary answers served "
        "(disagreeing) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for label, a, b in KINDS:
        pairs = _questions(first, a) + _questions(second, b)
        rag_tokens = sum(r["prompt_tokens"] for _, r in pairs)
        fb_tokens = sum(q["prompt_tokens"] for q, _ in pairs)
        got = replay(pairs, router)
        row(
            [
                label,
                str(len(pairs)),
                f"{sum(q['f1'] for q, _ in pairs) / len(pairs):.3f}",
                f"{got['f1']:.3f}",
                f"{sum(r['f1'] for _, r in pairs) / len(pairs):.3f}",
                f"{fb_tokens / rag_tokens:.0%} / {got['tokens'] / rag_tokens:.0%}",
                f"{got['checks']} ({got['disagreements']})",
                f"{got['bound']:.2f}",
                f"{got['served']} ({got['served_wrong']})",
            ]
        )


if __name__ == "__main__":
    main()
