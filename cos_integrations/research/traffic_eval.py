"""Refinement from traffic in a one-question run (``cos eval --refine-from-traffic``): a
document's traffic questions asked (their misses queue refine jobs), one refine pass, the
traffic asked again and in model-written paraphrases, then the test questions.

Examples:
    >>> PARAPHRASE_PROMPT.startswith("Rewrite this question")
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cos_integrations.model import ChatModel
from cos_integrations.research.datasets import EvalDoc, EvalQA
from cos_integrations.research.reporting import aggregate
from cos_integrations.serving.hit_rule import is_grounded
from cos_integrations.summarize.config import CoSConfig
from cos_integrations.summarize.engine import ChainOfSummaries

__all__ = ["PARAPHRASE_PROMPT", "paraphrase", "traffic_step"]

# The paraphrase generator of ``repeat_traffic`` (the model under test, temperature 0):
# a question asked again in other words, the way a second user would ask it.
PARAPHRASE_PROMPT = (
    "Rewrite this question in other words: change the wording and the word order, keep "
    "its meaning and exactly what it asks for, add nothing. Reply with the new question "
    "only.\n\nQuestion: {question}"
)


async def paraphrase(llm: ChatModel, question: str) -> str:
    """One model-written paraphrase of ``question`` (:data:`PARAPHRASE_PROMPT`); the
    question itself when the reply is empty or not a question."""
    res = await llm.chat(
        [{"role": "user", "content": PARAPHRASE_PROMPT.format(question=question)}],
        max_tokens=64,
    )
    said = " ".join(res.text.strip().strip('"').split())
    if said.lower().startswith("question:"):
        said = said[len("question:") :].strip()
    return said if said.endswith("?") and said != question else question


async def traffic_step(
    rec: dict[str, Any],
    doc: EvalDoc,
    traffic: list[EvalQA],
    test: list[EvalQA],
    fallback: Callable[..., Any],
    llm: ChatModel,
    index: Any,
    config: CoSConfig,
    options: Any,
) -> None:
    """refine_from_traffic for one document, into ``rec``: the traffic half asked (its
    misses queue refine jobs), one refine pass (then CoS rounds on documents with traffic
    when ``options.deepen``), the traffic asked again and in paraphrases when
    ``options.repeat_traffic``, and the test half asked after."""
    from cos_integrations.serving.refine import Refiner

    rec["traffic"] = [await fallback(q, traffic=True) for q in traffic]
    engine = ChainOfSummaries(llm, config)
    refiner = Refiner(
        index,
        engine,
        teach=options.refine_teach,
        retarget=options.refine_retarget,
        min_asks=1,  # each traffic question is asked once before the pass: its first miss
    )
    outcomes = await refiner.arun_once()
    rec["refine"] = [
        {"doc_id": o.doc_id, "query": o.query, "status": o.status, "reason": o.reason}
        | ({"answer": o.answer} if o.answer is not None else {})
        for o in outcomes
    ]
    rec["refine_calls"] = sum(o.usage.calls for o in outcomes)
    if options.deepen:
        deepened = await refiner.adeepen_traffic(strategy=options.deepen)
        rec["deepen"] = [
            {"doc_id": o.doc_id, "status": o.status, "reason": o.reason} for o in deepened
        ]
        rec["deepen_calls"] = sum(o.usage.calls for o in deepened)
    if options.repeat_traffic:
        # the same questions again, and in other words: did the misses learn?
        for row in rec["traffic"]:
            row["in_source"] = any(is_grounded(a, doc.text) for a in row["gold"])
        rec["traffic_again"] = [await fallback(q) for q in traffic]
        rec["paraphrases"] = []
        for q in traffic if options.paraphrase_traffic else []:
            said = await paraphrase(llm, q.question)
            rec["paraphrases"].append(
                await fallback(EvalQA(question=said, answers=q.answers, language=q.language))
            )
    after = [await fallback(q) for q in test]
    rec["questions_after"] = after
    rec["test_before"] = aggregate(rec["questions"])
    rec["test_after"] = aggregate(after)
