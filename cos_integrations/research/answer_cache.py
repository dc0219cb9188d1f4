"""The answer call every retrieval method shares, kept by its exact prompt.

Examples:
    >>> cache = AnswerCache(llm, "qwen", Path("answers.jsonl"))   # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path

from cos_integrations.model import ChatModel
from cos_integrations.research.datasets import EvalQA
from cos_integrations.research.jsonl import append_jsonl, read_jsonl
from cos_integrations.research.peers import CallRecord
from cos_integrations.usage import Usage

__all__ = ["AnswerCache", "digest"]


def digest(obj: object) -> str:
    """A short digest of JSON-able data: the call record's key (same bytes), cut to 10."""
    return CallRecord.key(obj)[:10]


class AnswerCache:
    """The one answer call every retrieval method shares (:func:`ask`: the same prompt over
    the items it retrieved), kept by its exact prompt: the same prompt (model, question,
    context) is asked once, so a fallback miss that retrieved rag's chunks reuses rag's
    call, and so does a later run with the same ``path`` (JSONL); each method is still
    charged the call's usage.

    Examples:
        >>> answers = AnswerCache(llm, "qwen", Path("answers.jsonl"))   # doctest: +SKIP
        >>> text, usage = await answers(qa, hits)                      # doctest: +SKIP
    """

    def __init__(self, llm: ChatModel, model_name: str, path: Path | None = None) -> None:
        self.llm = llm
        self.model_name = model_name
        self.path = path
        self.memo: dict[str, tuple[str | None, Usage]] = {}
        for entry in read_jsonl(path) if path else []:
            self.memo[entry["key"]] = (entry["answer"], Usage.model_validate(entry["usage"]))

    async def __call__(self, q: EvalQA, items: list) -> tuple[str | None, Usage]:
        from cos_integrations.serving.retrieval import ask

        key = digest([self.model_name, q.question, [(h.id, h.text) for h in items]])
        if key not in self.memo:
            self.memo[key] = await ask(self.llm, q.question, items)
            if self.path:
                entry = {"key": key, "answer": self.memo[key][0]}
                entry["usage"] = self.memo[key][1].model_dump()
                append_jsonl(self.path, entry)
        return self.memo[key]
