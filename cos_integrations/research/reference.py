"""The authors' published CoS procedure, as a baseline to compare the engine against.

Implemented from the paper (§3, Appendix A prompts) and the design notes on the authors'
code: every question answered in its own call, every round re-answers the training and
validation questions, exact-match judge, the rewrite parsed by splitting on "Summary", and
the *last* iteration returned (no best-iteration selection, no keep-better rule). With
i=10 and 10 + 5 questions that is 1 + 1 + 11 x 15 + 10 = 177 calls per document.

Examples:
    >>> result = await reference_summarize(llm, text, iterations=10)   # doctest: +SKIP
"""

from __future__ import annotations

import asyncio

from cos_integrations.metrics import exact_match
from cos_integrations.model import ChatModel
from cos_integrations.summarize.config import CoSConfig
from cos_integrations.summarize.engine import ModelRun
from cos_integrations.summarize.questions import ParseError, parse_qa_pairs
from cos_integrations.summarize.result import CoSResult, IterationRecord, QuestionScore

__all__ = ["reference_summarize"]


def _qg(text: str, n: int) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": f"Here is the content of the file: {text}"},
        {
            "role": "user",
            "content": (
                f"Generate {n} diverse and specific questions in Q: format based on the content. "
                "Do not include question numbers. Each question should target important "
                "information from the text. Each answer should be concise (word or short phrase) "
                "and directly address the question."
            ),
        },
        {
            "role": "user",
            "content": (
                "Ensure answers are brief (a word or short phrase, not a full sentence) and "
                "factually accurate based on the text. Format should be:\n"
                "Q: <question>\nA: <answer>"
            ),
        },
    ]


def _answer(content: str, question: str) -> list[dict[str, str]]:
    return [
        {
            "role": "system",
            "content": (
                "Given a question and content, answer the question as simply as possible! Don't "
                "answer in complete sentences; words and phrases are sufficient. Answer the "
                "question based on the content provided. If the answer is not present in the "
                "content, say \"I don't know."
            ),
        },
        {"role": "system", "content": f"Content: {content}"},
        {"role": "user", "content": f"Question: {question} Answer:"},
    ]


def _refine(passage: str, summary: str, questions: list[str]) -> list[dict[str, str]]:
    return [
        {
            "role": "system",
            "content": (
                "You are an expert text summarizer. Your task is to refine an existing summary to "
                "address specific user questions.\nRules:\n- Include information that directly "
                "answers the user's questions\n- Preserve relevant key points from the original "
                "summary\n- Return the original summary unchanged if it already contains all "
                "necessary information\n- Return the original summary if the questions are not "
                "relevant to the text\n- Keep the summary short and concise\n- Don't include "
                "questions in the summary.\n- Every time start with: Updated Summary:"
            ),
        },
        {"role": "system", "content": f"Knowledge Base Passage: {passage}"},
        {"role": "user", "content": f"Existing Summary: {summary}"},
        {
            "role": "user",
            "content": (
                f"Questions to Address: {' '.join(questions)}\nProvide an updated summary "
                "addressing the questions while maintaining the informational content of the "
                "original summary."
            ),
        },
    ]


async def reference_summarize(
    llm: ChatModel, text: str, config: CoSConfig | None = None, *, doc_id: str | None = None
) -> CoSResult:
    """Run the authors' procedure; ``config`` gives i, iq and the question counts."""
    cfg = config or CoSConfig.paper()
    run = ModelRun(llm, cfg, doc_id)
    summary = (
        await run.call(
            [{"role": "user", "content": (f"Summarize the following content:\n\n{text}")}]
        )
    ).strip()
    n = cfg.train_questions + cfg.val_questions
    try:
        pairs = parse_qa_pairs(await run.call(_qg(text, n)))[:n]
    except ParseError:
        pairs = []
    for i, p in enumerate(pairs):
        p.split = "val" if i >= cfg.train_questions else "train"
    iterations: list[IterationRecord] = []

    async def evaluate(s: str) -> list[QuestionScore]:
        answers = await asyncio.gather(*(run.call(_answer(s, p.question)) for p in pairs))
        return [
            QuestionScore(
                question=p.question,
                split=p.split,
                answer=a,
                f1=exact_match(a, p.answers),
                answered=exact_match(a, p.answers) > 0,
            )
            for p, a in zip(pairs, answers, strict=True)
        ]

    for index in range(cfg.iterations + 1):
        scores = await evaluate(summary) if pairs else []
        train = [s.f1 for s in scores if s.split == "train"]
        val = [s.f1 for s in scores if s.split == "val"]
        iterations.append(
            IterationRecord(
                index=index,
                kind="thesis" if index == 0 else "rewrite",
                summary=summary,
                scores=scores,
                train_score=sum(train) / len(train) if train else None,
                val_score=sum(val) / len(val) if val else None,
            )
        )
        if index == cfg.iterations:
            break
        missing = [s.question for s in scores if s.split == "train" and not s.answered]
        raw = await run.call(_refine(text, summary, missing[: cfg.questions_per_iteration]))
        # the authors' parsing: split on the word "Summary"
        summary = raw.split("Summary", 1)[-1].lstrip(":* \n").strip() or summary
    return CoSResult(
        doc_id=doc_id,
        strategy="reference",
        summary=summary,
        best_iteration=cfg.iterations,
        iterations=iterations,
        questions=pairs,
        usage=run.usage,
        stop_reason="last iteration (authors' procedure)",
        config_hash=cfg.config_hash(),
    )
