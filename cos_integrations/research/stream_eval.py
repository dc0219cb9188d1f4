"""``cos eval --stream N``: the product on traffic where questions come back, beside RAG
behind the caches users put in front of it.

One stream (:mod:`~cos_integrations.research.streams`) of ``N`` asks over the questioned
documents of a collection (their distractors indexed too) goes through every row in the
same order, each row paying what its path pays:

- ``fallback``: the product (:class:`~cos_integrations.serving.retrieval.FallbackRetriever`
  with its shipped rule): verified answers, the summary hit path, a miss answered from
  its chunks (the answer kept when the source bears it out), and a refine pass every
  ``refine_every`` asks, as a background worker would run (its calls charged too);
- ``rag``: top-``k`` chunks and one answer call an ask; ``rag-ordered``: the same chunks in
  document order;
- ``rag+exact-cache``: ``rag`` behind LangChain's ``InMemoryCache`` (the rendered prompt);
  ``rag+semantic-cache@B``: ``rag`` behind the semantic-cache pattern on the question (e5,
  ``InMemoryVectorStore``) at RedisVL's default bar and at the bar that gave it its best F1
  on this stream (``langchain_ext.caches``; no extra model call: a cache miss is ``rag``'s
  call).

Answer calls are shared by exact prompt (:class:`AnswerCache`), every other call (judge,
check, refine, rewording) is kept by its exact request (:class:`RecordedModel`), so a
second run replays what the first paid and charges it again. Per ask the records keep the
kind, the answer and its F1, the calls and prompt tokens, and whether the answer came from
a cache with no call; a served answer is *wrong* when its F1 is under 0.5 while ``rag``
answers the same ask right.

Examples:
    >>> options = StreamOptions(asks=1000, mix=(0.4, 0.2, 0.4))
    >>> options.refine_every, options.refine_min_asks
    (10, 2)
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from cos_integrations.defaults import DEFAULT_REFINE_MIN_ASKS, DEFAULT_SEMANTIC_THRESHOLD
from cos_integrations.metrics import squad_f1
from cos_integrations.model import ChatModel, ChatResult
from cos_integrations.research.answer_cache import AnswerCache
from cos_integrations.research.datasets import EvalDoc
from cos_integrations.research.framework_eval import (
    FRAMEWORK_ROWS,
    compare_rows,
    framework_asker,
)
from cos_integrations.research.jsonl import append_jsonl, remove
from cos_integrations.research.peers import CallRecord
from cos_integrations.research.streams import (
    ASK_KINDS,
    DEFAULT_MIX,
    REWORDINGS,
    Ask,
    RewordingBook,
    build_stream,
    stream_record,
)
from cos_integrations.serving.index import chunk_position
from cos_integrations.usage import Usage

__all__ = [
    "StreamOptions",
    "RecordedModel",
    "run_stream",
    "stream_table",
    "plot_stream",
    "SEMANTIC_BARS",
    "framework_lines",
]

log = logging.getLogger(__name__)

# the semantic cache's bars tried for its best row (its default, RedisVL's 0.90, among them)
SEMANTIC_BARS = (0.85, 0.88, 0.90, 0.92, 0.94, 0.95, 0.96, 0.97, 0.98, 0.99)
# a served answer is wrong under this F1 while rag answers the same ask right (from it on)
RIGHT_F1 = 0.5


class StreamOptions(BaseModel):
    """How the stream is made and run (part of ``cos eval``'s retrieval options)."""

    asks: int = Field(1000, ge=1, description="asks in the stream")
    mix: tuple[float, float, float] = Field(
        DEFAULT_MIX, description="shares of new questions, exact repeats and rewordings"
    )
    seed: int = Field(0, description="the stream's random draws")
    refine_every: int = Field(
        10, ge=0, description="a refine pass every N asks, as a background worker (0: none)"
    )
    refine_min_asks: int = Field(
        DEFAULT_REFINE_MIN_ASKS,
        ge=1,
        description="a refine job runs once its question missed this often (2: came back)",
    )
    rewordings: str | None = Field(
        None, description="the rewording book (JSONL; default: OUT.rewordings.jsonl)"
    )
    calls: str | None = Field(None, description="the call record (JSONL; default: OUT.calls.jsonl)")


class RecordedModel:
    """A :class:`~cos_integrations.model.ChatModel` whose calls are kept by their exact
    request (model name, messages, limits, schema) in a JSONL file: a call made before is
    replayed, with the usage it had, so every row and run pays it as if made.

    Examples:
        >>> model = RecordedModel(llm, "qwen", Path("calls.jsonl"))   # doctest: +SKIP
        >>> (await model.chat(messages)).usage.calls                   # doctest: +SKIP
        1
    """

    def __init__(self, llm: ChatModel, name: str, path: Path | None) -> None:
        self.llm, self.name = llm, name
        self.record = CallRecord(path)

    async def chat(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        json_schema: dict | None = None,
    ) -> ChatResult:
        key = CallRecord.key([self.name, list(messages), max_tokens, temperature, json_schema])
        found = self.record.get(key)
        if found is not None:
            usage = Usage.model_validate(found["usage"])
            return ChatResult(found["text"], usage, found.get("finish_reason"))
        start = time.perf_counter()
        res = await self.llm.chat(
            messages, max_tokens=max_tokens, temperature=temperature, json_schema=json_schema
        )
        kept = {"text": res.text, "usage": res.usage.model_dump(), "finish_reason": None}
        kept["finish_reason"] = res.finish_reason
        self.record.put(key, kept, time.perf_counter() - start)
        return res


async def run_stream(
    llm: ChatModel,
    docs: list[EvalDoc],
    everything: list[EvalDoc],
    summaries: dict[str, dict],
    *,
    config: Any,
    retrieval: Any,
    options: StreamOptions,
    out: Path,
    model_name: str,
    answer_cache: Path | None,
    methods: Sequence[str],
    make_index: Callable[[Path], Any],
    on_ask: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Build the stream, run each row over it (see the module docstring), write the asks
    to ``OUT.stream.jsonl`` and each row's records to ``OUT.stream-rows.jsonl``; returns
    the rows' figures (:func:`stream_table` prints them). ``make_index(dir)`` builds (or
    resumes) an index of ``everything`` from ``summaries`` in ``dir``: once for the
    collection (kept beside ``out``), copied fresh for the product's row."""
    recorded = RecordedModel(llm, model_name, _path(options.calls, out, ".calls.jsonl"))
    book = RewordingBook(_path(options.rewordings, out, ".rewordings.jsonl"))
    stream = await _make_stream(recorded, docs, book, options)
    asks_path = out.with_suffix(out.suffix + ".stream.jsonl")
    remove(asks_path)
    for ask in stream:
        append_jsonl(asks_path, stream_record(ask))
    answers = AnswerCache(recorded, model_name, answer_cache)
    rows: dict[str, list[dict[str, Any]]] = {}
    # one index of the collection, built once and kept (the chunk rows only read it); the
    # product's starts each run as a fresh copy of it (its state is what the stream made)
    base_path = out.with_suffix(out.suffix + ".stream-index-base")
    base = make_index(base_path)
    k = retrieval.k
    # rag always: the caches' misses are its calls, and wrong serves are judged against it
    for method in ["rag", *(m for m in methods if m == "rag-ordered")]:
        rows[method] = await _rag_row(
            base, stream, answers, k, ordered=method == "rag-ordered", tick=on_ask
        )
    rows |= _cache_rows(stream, rows["rag"], base)
    refines: dict[str, list[dict[str, Any]]] = {}
    # the product: the core's retriever, then each framework's piece over it (a fresh copy
    # of the same index each, the same refine passes)
    for name in [m for m in ("fallback", *FRAMEWORK_ROWS) if m in methods]:
        fresh = _fresh(out, name.replace("+", "-"))
        shutil.copytree(base_path, fresh)
        index = make_index(fresh)
        if name == "fallback":
            asker = _core_asker(index, recorded, answers, retrieval, stream)
        else:
            asker = framework_asker(name, index, recorded, retrieval)
        rows[name], refines[name] = await _product_row(
            name, index, stream, asker, recorded, config, retrieval, options, tick=on_ask
        )
    rows_path = out.with_suffix(out.suffix + ".stream-rows.jsonl")
    remove(rows_path)
    for name, recs in rows.items():
        append_jsonl(rows_path, {"method": name, "asks": recs})
    reference = {r["position"]: r for r in rows["rag"]}
    result = {
        "asks": len(stream),
        "kinds": {kind: sum(a.kind == kind for a in stream) for kind in ASK_KINDS},
        "documents": len(everything),
        "questioned": len(docs),
        "options": options.model_dump(mode="json"),
        "rows": {name: summarise_row(recs, reference) for name, recs in rows.items()},
        "refine": _refine_summary(refines.get("fallback", [])),
        "refines": {name: _refine_summary(r) for name, r in refines.items()},
    }
    if "fallback" in rows:
        result["frameworks"] = {
            name: compare_rows(rows["fallback"], rows[name])
            for name in rows
            if name in FRAMEWORK_ROWS
        }
    return result


def _path(given: str | None, out: Path, suffix: str) -> Path:
    return Path(given) if given else out.with_suffix(out.suffix + suffix)


def _fresh(out: Path, name: str) -> Path:
    """A new, empty index directory for a row (every run starts from nothing: a stream's
    state is what the stream made). A new name each time: Chroma keeps one client a path
    in a process, and a directory deleted under it cannot be written again."""
    prefix = f"{out.name}.stream-index-{name}-"
    for old in out.parent.glob(prefix + "*"):
        shutil.rmtree(old, ignore_errors=True)
    return out.parent / f"{prefix}{time.time_ns()}"


async def _make_stream(
    llm: ChatModel, docs: list[EvalDoc], book: RewordingBook, options: StreamOptions
) -> list[Ask]:
    """The stream: planned with a rewording for every question, the rewordings the plan
    asks for written (and kept), then built again with the book as it is."""
    plan_book = RewordingBook(None)
    for d in docs:
        for qa in d.qas:
            plan_book.book[qa.question] = [f"{qa.question} ({i})" for i in range(REWORDINGS)]
    args = {"asks": options.asks, "mix": options.mix, "seed": options.seed}
    planned = build_stream(docs, book=plan_book, **args)
    wanted = {a.source for a in planned if a.kind == "reworded"}
    for d in docs:
        for qa in d.qas:
            if qa.question in wanted:
                await book.write(llm, qa)
    return build_stream(docs, book=book, **args)


def _row(ask: Ask, answer: str | None, usage: Usage, **extra: Any) -> dict[str, Any]:
    return {
        "position": ask.position,
        "kind": ask.kind,
        "question": ask.question,
        "doc_id": ask.doc_id,
        "gold": ask.answers,
        "answer": answer,
        "f1": squad_f1(answer or "", ask.answers, ask.language),
        "calls": usage.calls,
        "prompt_tokens": usage.prompt_tokens,
        **extra,
    }


async def _rag_row(
    index: Any,
    stream: list[Ask],
    answers: Any,
    k: int,
    *,
    ordered: bool,
    tick: Callable[[str, int, int], None] | None,
) -> list[dict[str, Any]]:
    import asyncio

    name = "rag-ordered" if ordered else "rag"
    out = []
    for ask in stream:
        items = await asyncio.to_thread(index.search_chunks, ask.question, k)
        if ordered:
            items = sorted(items, key=chunk_position)
        answer, usage = await answers(ask.qa, items)
        prompt = json.dumps([[h.id, h.text] for h in items] + [ask.question])
        out.append(_row(ask, answer, usage, prompt=prompt, served=None))
        if tick:
            tick(name, ask.position + 1, len(stream))
    return out


def _cache_rows(stream: list[Ask], rag: list[dict[str, Any]], index: Any) -> dict[str, list]:
    """``rag`` behind the exact-prompt cache and the semantic cache (at each bar of
    :data:`SEMANTIC_BARS`): a cache hit serves the cached answer with no call, a miss pays
    ``rag``'s call for that ask and caches its answer."""
    from cos_integrations.research.peers import PeerUnavailable, load_cache

    exact = load_cache("exact")
    rows: dict[str, list] = {"rag+exact-cache": _through(exact(), stream, rag)}
    embeddings = _CachedEmbeddings(index.embedder)
    semantic = load_cache("semantic")
    for bar in SEMANTIC_BARS:
        try:
            rows[f"rag+semantic-cache@{bar:.2f}"] = _through(
                semantic(embeddings, threshold=bar), stream, rag
            )
        except PeerUnavailable:  # pragma: no cover - the langchain extra is missing
            break
    return rows


def _through(cache: Any, stream: list[Ask], rag: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for ask, r in zip(stream, rag, strict=True):
        found = cache.lookup(ask.question, r["prompt"])
        if found is not None:
            out.append(_row(ask, found, Usage(), served="cache"))
            continue
        out.append({k: v for k, v in r.items() if k != "prompt"} | {"served": None})
        cache.update(ask.question, r["prompt"], r["answer"])
    return out


class _CachedEmbeddings:
    """The index's embedder as LangChain-style embeddings, each text embedded once."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.seen: dict[str, list[float]] = {}

    def embed_query(self, text: str) -> list[float]:
        if text not in self.seen:
            self.seen[text] = self.embedder.embed_query(text)
        return self.seen[text]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]


def _core_asker(index: Any, llm: ChatModel, answers: Any, retrieval: Any, stream: list[Ask]):
    """The core's ask (``fallback``): the retriever, a miss answered from its chunks with
    the shared answer call and kept when the source bears it out."""
    from cos_integrations.serving.retrieval import FallbackRetriever

    retriever = FallbackRetriever(
        index,
        llm=llm,
        rule=retrieval.rule,
        k=retrieval.k,
        refine_on_miss="queue",
        max_error=retrieval.max_error,
    )
    qas = {a.question: a.qa for a in stream}

    async def ask(question: str) -> tuple[str | None, Usage, dict[str, Any]]:
        res = await retriever.aretrieve(question)
        usage = Usage().add(res.usage)
        answer = res.answer
        if answer is None and res.items:
            answer, more = await answers(qas[question], res.items)
            usage.add(more)
            if not res.hit:
                await retriever.aremember(res, answer)
        extra = {"hit": res.hit, "served": res.served, "judged": res.judge_answer is not None}
        return answer, usage, extra | {"entry": res.entry_id}

    return ask


async def _product_row(
    name: str,
    index: Any,
    stream: list[Ask],
    ask: Callable[[str], Any],
    llm: ChatModel,
    config: Any,
    retrieval: Any,
    options: StreamOptions,
    *,
    tick: Callable[[str, int, int], None] | None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The product over the stream (``ask``: the core's, or a framework's), a refine pass
    every ``refine_every`` asks; the asks' records, the refine passes' outcomes and usage."""
    from cos_integrations.serving.refine import Refiner
    from cos_integrations.summarize.engine import ChainOfSummaries

    refiner = Refiner(
        index,
        ChainOfSummaries(llm, config),
        teach=retrieval.refine_teach,
        retarget=retrieval.refine_retarget,
        min_asks=options.refine_min_asks,
    )
    rows, refines = [], []
    for a in stream:
        answer, usage, extra = await ask(a.question)
        rows.append(_row(a, answer, usage, **extra))
        if options.refine_every and (a.position + 1) % options.refine_every == 0:
            for o in await refiner.arun_once():
                refines.append(
                    {
                        "after": a.position,
                        "doc_id": o.doc_id,
                        "query": o.query,
                        "status": o.status,
                        "calls": o.usage.calls,
                        "prompt_tokens": o.usage.prompt_tokens,
                    }
                )
        if tick:
            tick(name, a.position + 1, len(stream))
    return rows, refines


def summarise_row(
    recs: list[dict[str, Any]], reference: dict[int, dict[str, Any]]
) -> dict[str, Any]:
    """A row's figures over the stream and by kind of ask: F1, prompt tokens and calls,
    the share served with no model call, and wrong serves (served from a cache, F1 under
    0.5, while ``rag`` answers the same ask right)."""

    def figures(part: list[dict[str, Any]]) -> dict[str, Any]:
        if not part:
            return {"asks": 0}
        served = [r for r in part if r.get("served")]
        wrong = [
            r
            for r in served
            if r["f1"] < RIGHT_F1 and reference.get(r["position"], {}).get("f1", 0) >= RIGHT_F1
        ]
        return {
            "asks": len(part),
            "f1": sum(r["f1"] for r in part) / len(part),
            "prompt_tokens": sum(r["prompt_tokens"] for r in part),
            "calls": sum(r["calls"] for r in part),
            "no_call": sum(1 for r in part if r["calls"] == 0) / len(part),
            "served": len(served),
            "wrong_serves": len(wrong),
        }

    out = figures(recs)
    out["by_kind"] = {kind: figures([r for r in recs if r["kind"] == kind]) for kind in ASK_KINDS}
    return out


def _refine_summary(refines: list[dict[str, Any]]) -> dict[str, Any]:
    statuses: dict[str, int] = {}
    for r in refines:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    return {
        "jobs": len(refines),
        "outcomes": statuses,
        "calls": sum(r["calls"] for r in refines),
        "prompt_tokens": sum(r["prompt_tokens"] for r in refines),
    }


def best_semantic(rows: dict[str, dict[str, Any]]) -> str | None:
    """The semantic-cache row with the best F1 over the stream (the fewer prompt tokens on a
    tie)."""
    semantic = [n for n in rows if n.startswith("rag+semantic-cache@")]
    if not semantic:
        return None
    return max(semantic, key=lambda n: (round(rows[n]["f1"], 4), -rows[n]["prompt_tokens"]))


def stream_table(result: dict[str, Any]) -> list[list[str]]:
    """The rows to print: the product, rag, rag-ordered, the exact cache, the semantic cache
    at its default bar and at its best; each with F1, prompt tokens (and their share of
    rag's), calls, the share answered with no call and wrong serves, over the stream and
    by kind of ask."""
    rows = result["rows"]
    refines = result.get("refines") or {"fallback": result.get("refine") or {}}
    default = f"rag+semantic-cache@{DEFAULT_SEMANTIC_THRESHOLD:.2f}"
    best = best_semantic(rows)
    names = [
        n
        for n in ("fallback", *FRAMEWORK_ROWS, "rag", "rag-ordered", "rag+exact-cache")
        if n in rows
    ]
    names += [n for n in dict.fromkeys([default, best or ""]) if n in rows]
    rag_tokens = rows["rag"]["prompt_tokens"] if "rag" in rows else None
    out = []
    for name in names:
        r = rows[name]
        refine = refines.get(name) or {}
        tokens = r["prompt_tokens"] + refine.get("prompt_tokens", 0)
        share = f" ({tokens / rag_tokens:.0%})" if rag_tokens else ""
        label = name + (" (best)" if name == best and name != default else "")
        kinds = r["by_kind"]
        out.append(
            [
                label,
                f"{r['f1']:.3f}",
                " / ".join(f"{kinds[k]['f1']:.3f}" if kinds[k]["asks"] else "-" for k in ASK_KINDS),
                f"{tokens:,}{share}",
                str(r["calls"] + refine.get("calls", 0)),
                " / ".join(
                    f"{kinds[k]['no_call']:.0%}" if kinds[k]["asks"] else "-" for k in ASK_KINDS
                ),
                f"{r['wrong_serves']} of {r['served']}",
            ]
        )
    return out


STREAM_COLUMNS = (
    "row",
    "F1",
    "F1 new / exact / reworded",
    "prompt tokens (of rag's)",
    "calls",
    "no call: new / exact / reworded",
    "wrong serves",
)


def plot_stream(result: dict[str, Any], rows_path: Path, path: Path) -> None:
    """Cumulative prompt tokens and running F1 along the stream, a line a row."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from cos_integrations.research.jsonl import read_jsonl

    shown = {r[0].removesuffix(" (best)") for r in stream_table(result)}
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    for rec in read_jsonl(rows_path):
        if rec["method"] not in shown:
            continue
        tokens, f1s, total, f1 = [], [], 0, 0.0
        for i, r in enumerate(rec["asks"], 1):
            total += r["prompt_tokens"]
            f1 += r["f1"]
            tokens.append(total)
            f1s.append(f1 / i)
        width = 2.4 if rec["method"] == "fallback" else 1.2  # the product stands out
        a.plot(range(1, len(tokens) + 1), tokens, label=rec["method"], linewidth=width)
        b.plot(range(1, len(f1s) + 1), f1s, label=rec["method"], linewidth=width)
    a.set_xlabel("ask")
    a.set_ylabel("prompt tokens so far")
    b.set_xlabel("ask")
    b.set_ylabel("F1 so far")
    a.legend(fontsize=7)
    a.set_title(f"{result['asks']} asks over {result['documents']} documents")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def framework_lines(frameworks: dict[str, dict[str, Any]]) -> list[str]:
    """What each framework row did beside the core's, by the way an ask went (served, hit,
    miss): same answers, prompt tokens and calls against the core's
    (:func:`~cos_integrations.research.framework_eval.compare_rows`)."""
    out = []
    for name, c in frameworks.items():
        parts = []
        for way in ("served", "hit", "miss"):
            w = c.get(way) or {}
            if not w.get("asks"):
                continue
            parts.append(
                f"{way} {w['asks']}: same answer {w['same_answer']}, F1 {w['f1']:.3f} "
                f"(core {w['core_f1']:.3f}), prompt tokens {w['tokens_diff']:+.1f} an ask "
                f"(at most {w['max_abs_tokens_diff']}), calls {w['calls']} (core "
                f"{w['core_calls']})"
            )
        parts.append(f"another way than the core: {c['other_way']} of {c['asks']}")
        out.append(f"{name} beside fallback: " + "; ".join(parts))
    return out
