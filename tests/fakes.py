"""A scripted fake chat model that *reads the prompt* and answers from it.

Documents in tests are made of facts ``The <subject> is <value>.``. The fake finds the task in
the last user message and does it honestly from what the prompt carries: a summary built
from the <document>, questions about its facts, answers looked up in the <content> only,
rewrites that copy the asked-for facts from the document. If the engine sends the wrong
text, the fake answers wrongly and the test fails.

``script`` overrides replies per task (a list consumed in order; ``None`` means "behave
normally") to inject malformed output.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence

from cos_integrations.model import ChatResult
from cos_integrations.usage import Usage

FACT = re.compile(r"The ([a-z][a-z0-9 ]*?) (?:is|are|was) ([^.\n]+)\.")
QUESTION = re.compile(r"What is the ([a-z][a-z0-9 ]*?)\?")


def make_document(n: int, *, prefix: str = "", topic: str = "lease") -> str:
    """A document of ``n`` distinct facts, e.g. ``The lease item 3 is value 3c.``"""
    facts = [f"The {topic} item {i} is {prefix}value {i}{chr(97 + i % 26)}." for i in range(n)]
    return " ".join(facts)


def facts(text: str) -> dict[str, str]:
    return {m.group(1).strip().lower(): m.group(2).strip() for m in FACT.finditer(text)}


def _between(text: str, tag: str) -> str:
    m = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", text, re.S)
    return m.group(1) if m else ""


def task_of(messages: Sequence[dict[str, str]]) -> str:
    last = messages[-1]["content"]
    first = messages[0]["content"]
    # the authors' prompts (reference baseline)
    if last.startswith("Summarize the following content:"):
        return "ref_thesis"
    if first.startswith("Here is the content of the file:"):
        return "ref_questions"
    if len(messages) > 1 and messages[1]["content"].startswith("Content: "):
        return "ref_answer"
    if len(messages) > 1 and messages[1]["content"].startswith("Knowledge Base Passage: "):
        return "ref_rewrite"
    if "Generate " in last and "questions about the document" in last:
        return "questions"
    if last.startswith("That describes what the document is about"):
        return "restate"
    if "Write an information-dense summary" in last:
        return "thesis"
    if last.startswith("Questions:\n"):
        return "answer"
    if last.startswith("Question: ") and '"quote"' in last:
        # the grounded reply: the hit judge reads <content>, a refine job the <document>
        return "source_answer" if "<document>" in first else "grounded"
    if last.startswith("Answer each question using only the document"):
        return "source_answer"
    if "Refine the existing summary" in last:
        return "rewrite"
    if last.startswith("Write one short, self-contained sentence"):
        return "fact"
    if "Missing Entities" in last:
        return "density"
    if "Work in three steps" in last:
        return "mini"
    if "Merge them into a single" in last:
        return "merge"
    if last.startswith("Rewrite this question in other words"):
        return "paraphrase"
    if last.startswith("Write ") and "different ways another person could ask" in last:
        return "reword"
    # a framework's own answer call over retrieved text: LlamaIndex's response synthesizer
    # (its default text QA template), a LangChain prompt in that form
    if "Context information is below" in last and "Query:" in last:
        return "plain_qa"
    # the peers' own summary prompts (cos eval --methods doc-summary,raptor,multi-vector):
    # LlamaIndex's tree_summarize (DocumentSummaryIndex's query, the RAPTOR pack's prompt)
    # and LangChain's documentation's MultiVectorRetriever chain
    if "Context information from multiple sources is below" in last or last.startswith(
        "Summarize the following document:"
    ):
        return "peer_summary"
    return "unknown"


class ScriptedFakeModel:
    """A ChatModel for tests. Records every call as ``(task, messages)`` in ``calls``."""

    def __init__(
        self,
        *,
        thesis_facts: int = 2,
        qa_format: str = "json",
        script: dict[str, list[str | None | Callable[[list], str]]] | None = None,
        rewrite_adds: bool = True,
        neighbours: int = 1,
    ) -> None:
        self.thesis_facts = thesis_facts
        self.qa_format = qa_format
        self.script = {k: list(v) for k, v in (script or {}).items()}
        self.rewrite_adds = rewrite_adds
        self.neighbours = neighbours  # a rewrite also copies the next facts, like real context
        self.calls: list[tuple[str, list[dict[str, str]]]] = []
        self.json_schemas: list[dict | None] = []
        self._seen_prefixes: set[str] = set()

    @property
    def counts(self) -> Counter:
        return Counter(task for task, _ in self.calls)

    async def chat(self, messages, *, max_tokens=None, temperature=0.0, json_schema=None):
        text = self.respond(list(messages), json_schema)
        prompt_chars = sum(len(m["content"]) for m in messages)
        first = messages[0]["content"]
        cached = len(first) // 4 if first in self._seen_prefixes else 0
        self._seen_prefixes.add(first)
        usage = Usage(
            calls=1,
            prompt_tokens=prompt_chars // 4,
            completion_tokens=len(text) // 4,
            cached_tokens=cached,
        )
        return ChatResult(text=text, usage=usage)

    # ------------------------------------------------------------------ behaviour
    def respond(self, messages: list[dict[str, str]], json_schema: dict | None = None) -> str:
        task = task_of(messages)
        self.calls.append((task, messages))
        self.json_schemas.append(json_schema)
        queue = self.script.get(task)
        if queue:
            item = queue.pop(0)
            if callable(item):
                return item(messages)
            if item is not None:
                return item
        return getattr(self, f"_{task}")(messages)

    def _doc(self, messages) -> str:
        return _between(messages[0]["content"], "document")

    def _paraphrase(self, messages) -> str:
        question = messages[-1]["content"].rsplit("Question: ", 1)[1].strip()
        return f"Could you tell me this: {question}"

    def _reword(self, messages) -> str:
        # the stream's rewordings: the same question with other words around it
        question = messages[-1]["content"].rsplit("Question: ", 1)[1].strip()
        said = [f"Please tell me: {question}", f"{question} I wonder.", f"Say, {question}"]
        return json.dumps({"questions": said})

    def _thesis(self, messages) -> str:
        fs = list(facts(self._doc(messages)).items())[: self.thesis_facts]
        return " ".join(f"The {k} is {v}." for k, v in fs)

    def _peer_summary(self, messages) -> str:
        # the first facts of whatever text the framework put in its prompt
        text = "\n".join(m["content"] for m in messages)
        fs = list(facts(text).items())[: self.thesis_facts]
        return " ".join(f"The {k} is {v}." for k, v in fs) or "Nothing to summarise."

    def _restate(self, messages) -> str:
        return self._thesis(messages)  # the facts, from the document that opens the chat

    def _questions(self, messages) -> str:
        last = messages[-1]["content"]
        count = int(re.search(r"Generate (\d+)", last).group(1))
        avoid_block = last.split("Do not repeat", 1)[1] if "Do not repeat" in last else ""
        avoid = set(QUESTION.findall(avoid_block))
        pairs = [
            {"question": f"What is the {k}?", "answer": v}
            for k, v in facts(self._doc(messages)).items()
            if k not in avoid
        ][:count]
        if self.qa_format == "json":
            return json.dumps({"pairs": pairs})
        if self.qa_format == "prose-json":
            return "Sure! Here you go:\n```json\n" + json.dumps({"pairs": pairs}) + "\n```\nDone."
        lines = []
        for i, p in enumerate(pairs, 1):
            lines += [f"{i}. Q: {p['question']}", f"A: {p['answer']}", ""]
        return "\n".join(lines)

    def _answer(self, messages) -> str:
        content = _between(messages[0]["content"], "content")
        known = facts(content)
        qs = re.findall(r"^\d+\. (.*)$", messages[-1]["content"].split("\n\nReply", 1)[0], re.M)
        answers = []
        for i, q in enumerate(qs, 1):
            m = QUESTION.search(q)
            ans = known.get(m.group(1).lower()) if m else None
            answers.append({"id": i, "answer": ans or "I don't know"})
        return json.dumps({"answers": answers})

    def _grounded(self, messages) -> str:
        """The quote and answer from the text the prompt carries (<content> or <document>):
        the fact sentence of the asked subject, copied, and its value; an empty pair when
        the text does not hold it."""
        text = _between(messages[0]["content"], "content") or self._doc(messages)
        question = messages[-1]["content"].split("\n", 1)[0].removeprefix("Question: ")
        m = QUESTION.search(question)
        key = m.group(1).lower() if m else ""
        for fact in FACT.finditer(text):
            if fact.group(1).strip().lower() == key:
                return json.dumps({"quote": fact.group(0), "answer": fact.group(2).strip()})
        return json.dumps({"quote": "", "answer": ""})

    def _fact(self, messages) -> str:
        last = messages[-1]["content"]
        q = QUESTION.search(last)
        doc = facts(self._doc(messages))
        key = q.group(1).lower() if q else ""
        return f"The {key} is {doc[key]}." if key in doc else "I don't know."

    def _source_answer(self, messages) -> str:
        if messages[-1]["content"].startswith("Question: "):
            return self._grounded(messages)
        known = facts(self._doc(messages))
        qs = re.findall(r"^\d+\. (.*)$", messages[-1]["content"].split("\n\nReply", 1)[0], re.M)
        answers = []
        for i, q in enumerate(qs, 1):
            m = QUESTION.search(q)
            answers.append(
                {
                    "id": i,
                    "answer": (known.get(m.group(1).lower()) if m else None) or "I don't know",
                }
            )
        return json.dumps({"answers": answers})

    def _rewrite(self, messages) -> str:
        last = messages[-1]["content"]
        summary = _between(last, "summary")
        doc = facts(self._doc(messages))
        block = last.split("Questions to address:\n", 1)[1].split("\n\n", 1)[0]
        added = []
        keys = list(doc)
        have = facts(summary)
        only_new = "write only the new sentences" in last  # one sentence a question
        for q in QUESTION.findall(block):
            m = re.search(rf"What is the {re.escape(q)}\? \(answer: ([^)]*)\)", block)
            value = doc.get(q) or (m.group(1) if m else None)
            if not (value and self.rewrite_adds):
                continue
            new_keys = [q]
            if q in doc and not only_new:
                pos = keys.index(q)
                new_keys += keys[pos + 1 : pos + 1 + self.neighbours]
            for k in new_keys:
                if k not in have:
                    have[k] = doc.get(k, value)
                    added.append(f"The {k} is {have[k]}.")
        new = " ".join([summary, *added]).strip()
        if only_new:
            new = " ".join(added) or summary  # nothing to add: the summary as it was
        if "####" in last:
            return f"add facts\ncopy from doc\n####\n{new}"
        if only_new:
            return f"New sentences: {new}"
        return f"Updated Summary: {new}"

    def _density(self, messages) -> str:
        doc = facts(self._doc(messages))
        current = _between(messages[-1]["content"], "summary")
        have = facts(current)
        missing = [k for k in doc if k not in have][:2]
        kept = list(have.items())[len(missing) :]  # same length: drop as many as added
        new = [f"The {k} is {v}." for k, v in kept] + [f"The {k} is {doc[k]}." for k in missing]
        if not current:
            new = [f"The {k} is {v}." for k, v in list(doc.items())[:3]]
            missing = []
        ents = "; ".join(doc[k] for k in missing) or "none"
        return f"Missing Entities: {ents}\nSummary: {' '.join(new)}"

    def _mini(self, messages) -> str:
        fs = list(facts(self._doc(messages)).items())
        draft = " ".join(f"The {k} is {v}." for k, v in fs[:2])
        final = " ".join(f"The {k} is {v}." for k, v in fs[:6])
        return f"Draft: {draft}\nQuestions:\n- What else?\nFinal Summary: {final}"

    def _merge(self, messages) -> str:
        return " ".join(f"The {k} is {v}." for k, v in facts(self._doc(messages)).items())

    def _ref_thesis(self, messages) -> str:
        fs = list(facts(messages[-1]["content"]).items())[: self.thesis_facts]
        return " ".join(f"The {k} is {v}." for k, v in fs)

    def _ref_questions(self, messages) -> str:
        n = int(re.search(r"Generate (\d+)", messages[1]["content"]).group(1))
        pairs = list(facts(messages[0]["content"]).items())[:n]
        return "\n".join(f"Q: What is the {k}?\nA: {v}" for k, v in pairs)

    def _ref_answer(self, messages) -> str:
        known = facts(messages[1]["content"])
        m = QUESTION.search(messages[-1]["content"])
        return (known.get(m.group(1).lower()) if m else None) or "I don't know."

    def _ref_rewrite(self, messages) -> str:
        doc = facts(messages[1]["content"])
        summary = messages[2]["content"].removeprefix("Existing Summary: ")
        added = [
            f"The {q} is {doc[q]}." for q in QUESTION.findall(messages[3]["content"]) if q in doc
        ]
        return "Updated Summary: " + " ".join([summary, *added]).strip()

    def _plain_qa(self, messages) -> str:
        """The value of the fact the question asks for, from any text of the prompt."""
        text = "\n".join(m["content"] for m in messages)
        question = messages[-1]["content"].rsplit("Query:", 1)[-1]
        m = QUESTION.search(question)
        return facts(text).get(m.group(1).lower(), "I don't know") if m else "I don't know"

    def _unknown(self, messages) -> str:
        return "I cannot help with that."


def per_document_counts(model: ScriptedFakeModel) -> dict[str, Counter]:
    """Calls per task, grouped by the document in the first message."""
    out: dict[str, Counter] = defaultdict(Counter)
    for task, msgs in model.calls:
        out[_between(msgs[0]["content"], "document")[:40]][task] += 1
    return out


def langchain_fake(fake: ScriptedFakeModel | None = None):
    """The scripted fake as a LangChain ``BaseChatModel`` (reads the prompt the same way)."""
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from pydantic import ConfigDict

    roles = {"system": "system", "human": "user", "ai": "assistant"}

    class ScriptedChatModel(BaseChatModel):
        model_config = ConfigDict(arbitrary_types_allowed=True)
        fake: ScriptedFakeModel

        @property
        def _llm_type(self) -> str:
            return "scripted-fake"

        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            msgs = [{"role": roles.get(m.type, "user"), "content": m.content} for m in messages]
            text = self.fake.respond(msgs)
            usage = {
                "input_tokens": sum(len(m["content"]) for m in msgs) // 4,
                "output_tokens": len(text) // 4,
                "total_tokens": 0,
            }
            msg = AIMessage(content=text, usage_metadata=usage)
            return ChatResult(generations=[ChatGeneration(message=msg)])

    return ScriptedChatModel(fake=fake or ScriptedFakeModel())


def llamaindex_fake(fake: ScriptedFakeModel | None = None):
    """The scripted fake as a LlamaIndex ``CustomLLM`` (chat keeps the message roles)."""
    from llama_index.core.base.llms.types import (
        ChatMessage,
        ChatResponse,
        CompletionResponse,
        LLMMetadata,
        MessageRole,
    )
    from llama_index.core.llms import CustomLLM
    from pydantic import PrivateAttr

    class ScriptedLLM(CustomLLM):
        _fake: ScriptedFakeModel = PrivateAttr()

        def __init__(self, fake):
            super().__init__()
            self._fake = fake

        @property
        def fake(self):
            return self._fake

        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(is_chat_model=True, model_name="scripted-fake")

        def _respond(self, messages):
            msgs = [{"role": m.role.value, "content": m.content or ""} for m in messages]
            text = self._fake.respond(msgs)
            raw = {
                "usage": {
                    "prompt_tokens": sum(len(m["content"]) for m in msgs) // 4,
                    "completion_tokens": len(text) // 4,
                }
            }
            return ChatResponse(
                message=ChatMessage(role=MessageRole.ASSISTANT, content=text), raw=raw
            )

        def chat(self, messages, **kwargs):
            return self._respond(messages)

        async def achat(self, messages, **kwargs):
            return self._respond(messages)

        def complete(self, prompt, formatted=False, **kwargs):
            text = self._respond([ChatMessage(role=MessageRole.USER, content=prompt)]).message
            return CompletionResponse(text=text.content or "")

        def stream_complete(self, prompt, formatted=False, **kwargs):
            yield self.complete(prompt)

    return ScriptedLLM(fake or ScriptedFakeModel())


def llamaindex_hash_embedding(dim: int = 256):
    """A deterministic lexical LlamaIndex embedding (the core HashingEmbedder)."""
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from pydantic import PrivateAttr

    from cos_integrations.embedded.embeddings import HashingEmbedder

    class HashEmbedding(BaseEmbedding):
        _impl: HashingEmbedder = PrivateAttr()

        def __init__(self):
            super().__init__(model_name=f"hashing-bow-{dim}")
            self._impl = HashingEmbedder(dim)

        def _get_query_embedding(self, query):
            return self._impl.embed_query(query)

        async def _aget_query_embedding(self, query):
            return self._impl.embed_query(query)

        def _get_text_embedding(self, text):
            return self._impl.embed_query(text)

    return HashEmbedding()
