"""Streams of asks where questions come back, and `cos eval --stream` over them."""

import asyncio
import json
from collections import Counter

import pytest
from fakes import ScriptedFakeModel, make_document

from cos_integrations import CoSConfig
from cos_integrations.research.datasets import EvalDoc, EvalQA, load_dataset
from cos_integrations.research.evaluation import RetrievalEvalOptions, run_eval
from cos_integrations.research.stream_eval import (
    STREAM_COLUMNS,
    StreamOptions,
    best_semantic,
    stream_table,
)
from cos_integrations.research.streams import RewordingBook, build_stream, parse_mix


def _docs(n_docs: int = 5, n_questions: int = 10) -> list[EvalDoc]:
    return [
        EvalDoc(
            doc_id=f"d{i}",
            text=make_document(n_questions, topic=f"topic{i}"),
            qas=[
                EvalQA(
                    question=f"What is the topic{i} item {j}?",
                    answers=[f"value {j}{chr(97 + j)}"],
                )
                for j in range(n_questions)
            ],
        )
        for i in range(n_docs)
    ]


def _book(docs: list[EvalDoc], n: int = 3) -> RewordingBook:
    book = RewordingBook(None)
    for d in docs:
        for qa in d.qas:
            book.add(qa.question, [f"{qa.question} ({i})" for i in range(n)])
    return book


def test_a_stream_mixes_new_questions_repeats_and_rewordings_by_popularity():
    docs = _docs(10, 10)
    book = _book(docs)
    asks = build_stream(docs, asks=200, book=book, seed=3)
    assert asks == build_stream(docs, asks=200, book=book, seed=3)  # the same stream
    assert asks != build_stream(docs, asks=200, book=book, seed=4)
    kinds = Counter(a.kind for a in asks)
    assert len(asks) == 200 and asks[0].kind == "new"
    assert 60 <= kinds["new"] <= 100 and 25 <= kinds["exact"] <= 60
    assert 55 <= kinds["reworded"] <= 100
    # new questions round robin over the documents, each document's in order
    new = [a for a in asks if a.kind == "new"]
    assert [a.doc_id for a in new[:5]] == ["d0", "d1", "d2", "d3", "d4"]
    assert sum(a.kind == "new" for a in build_stream(docs, asks=400, book=book)) == 100
    assert [a.question for a in new if a.doc_id == "d0"][:2] == [
        "What is the topic0 item 0?",
        "What is the topic0 item 1?",
    ]
    seen: set[str] = set()
    reworded: Counter = Counter()
    for a in asks:
        if a.kind == "exact":
            assert a.question in seen  # asked before, word for word
        if a.kind == "reworded":
            assert a.question in book.get(a.source) and a.question not in seen
            reworded[a.source] += 1
        j = int(a.source.split("item ")[1][:-1])
        assert a.answers == [f"value {j}{chr(97 + j)}"]
        seen.add(a.question)
    assert max(reworded.values()) <= 3  # each rewording once; then an exact repeat
    # Zipf popularity: a few questions come back far more often than most
    back = Counter(a.source for a in asks if a.kind != "new")
    counts = sorted(back.values(), reverse=True)
    assert counts[0] >= 4 * counts[len(counts) // 2]


def test_a_question_without_rewordings_comes_back_word_for_word():
    docs = _docs(1, 3)
    asks = build_stream(docs, asks=30, book=RewordingBook(None), mix=(0.2, 0.0, 0.8))
    assert {a.kind for a in asks} == {"new", "exact"} and len(asks) == 30
    assert sum(a.kind == "new" for a in asks) == 3  # the new questions ran out


def test_parse_mix_and_the_rewording_book(tmp_path):
    assert parse_mix("2/1/2") == (0.4, 0.2, 0.4)
    for bad in ("40/60", "a/b/c", "-1/1/1", "0/0/0"):
        with pytest.raises(ValueError, match="new/exact/reworded"):
            parse_mix(bad)
    path = tmp_path / "book.jsonl"
    book = RewordingBook(path)
    book.add("When is rent due?", ["when is rent due", " On which day is rent due? ", ""])
    assert RewordingBook(path).get("When is rent due?") == ["On which day is rent due?"]
    model = ScriptedFakeModel()
    qa = EvalQA(question="Wann ist die Miete fällig?", answers=["am 1."], language="de")
    said = asyncio.run(book.write(model, qa))
    assert len(said) == 3 and all("Wann ist die Miete fällig?" in s for s in said)
    assert "(German)" in model.calls[-1][1][-1]["content"]  # asked in the question's language
    asyncio.run(book.write(model, qa))
    assert len(model.calls) == 1  # kept: not written twice
    bad = ScriptedFakeModel(script={"reword": ["not json"]})
    assert asyncio.run(book.write(bad, EvalQA(question="Q?", answers=["a"]))) == []


def _eval(model, docs, methods, cfg, tmp_path, retrieval, distractors):
    return asyncio.run(
        run_eval(
            model,
            docs,
            methods=methods,
            config=cfg,
            out=tmp_path / "r.json",
            model_name="fake",
            dataset="d",
            retrieval=retrieval,
            distractors=distractors,
        )
    )


def _write(path, docs):
    with path.open("w") as fh:
        for d in docs:
            fh.write(d.model_dump_json() + "\n")
    return path


def test_cos_eval_stream_runs_every_row_and_each_pays_what_its_path_pays(tmp_path):
    docs = load_dataset(_write(tmp_path / "d.jsonl", _docs(2, 6)))
    extra = [EvalDoc(doc_id=f"x{i}", text=make_document(6, topic=f"other{i}")) for i in range(2)]
    options = StreamOptions(asks=40, refine_every=5, seed=1)
    retrieval = RetrievalEvalOptions(summary_method="zero-shot", stream=options)
    cfg = CoSConfig.cos(iterations=0, train_questions=2, val_questions=1)

    def run(model):
        return _eval(
            model, docs, ["fallback", "rag", "rag-ordered"], cfg, tmp_path, retrieval, extra
        )

    model = ScriptedFakeModel(thesis_facts=2)
    result = run(model)
    got = result["stream"]
    assert got["asks"] == 40 and got["documents"] == 4 and sum(got["kinds"].values()) == 40
    rows = got["rows"]
    assert {"fallback", "rag", "rag-ordered", "rag+exact-cache"} <= set(rows)
    assert "rag+semantic-cache@0.90" in rows and best_semantic(rows) in rows
    rag, exact, product = rows["rag"], rows["rag+exact-cache"], rows["fallback"]
    assert rag["calls"] == 40 and rag["no_call"] == 0 and rag["served"] == 0  # a call an ask
    assert exact["by_kind"]["exact"]["no_call"] == 1.0  # the same prompt again: served
    assert exact["prompt_tokens"] < rag["prompt_tokens"]
    # the product: a repeat of a question whose answer the source bore out costs nothing
    assert product["by_kind"]["exact"]["no_call"] >= 0.9
    assert product["f1"] >= 0.9 and product["wrong_serves"] == 0
    asks = [json.loads(x) for x in (tmp_path / "r.json.stream.jsonl").read_text().splitlines()]
    assert [a["position"] for a in asks] == list(range(40))
    rewordings = (tmp_path / "r.json.rewordings.jsonl").read_text().splitlines()
    assert rewordings and (tmp_path / "r.json.calls.jsonl").exists()
    table = stream_table(got)
    assert [r[0] for r in table][:4] == ["fallback", "rag", "rag-ordered", "rag+exact-cache"]
    assert all(len(r) == len(STREAM_COLUMNS) for r in table)
    # a rerun replays every call it made before and charges them again: the same figures,
    # no model call
    again = ScriptedFakeModel(thesis_facts=2)
    rerun = run(again)["stream"]
    assert again.calls == []
    assert rerun["rows"]["rag"] == rag and rerun["rows"]["fallback"] == product
    # and so does one after the records were packed (pack_results.py): nothing written
    # twice, the rewording book read from its archive
    from cos_integrations.research.jsonl import pack, read_jsonl

    for name in ("stream", "stream-rows", "rewordings", "calls"):
        pack(tmp_path / f"r.json.{name}.jsonl")
    packed = ScriptedFakeModel(thesis_facts=2)
    assert run(packed)["stream"]["rows"]["fallback"] == product and packed.calls == []
    assert len(read_jsonl(tmp_path / "r.json.stream.jsonl")) == 40
    methods = {r["method"] for r in read_jsonl(tmp_path / "r.json.stream-rows.jsonl")}
    assert len(read_jsonl(tmp_path / "r.json.stream-rows.jsonl")) == len(methods)
    assert len(read_jsonl(tmp_path / "r.json.rewordings.jsonl")) == len(rewordings)


def test_the_product_through_each_framework_pays_what_the_core_pays_counted_by_their_callbacks(
    tmp_path,
):
    """`fallback+llamaindex` / `fallback+langchain`: the stream through CoSQueryEngine and
    create_cos_qa_chain, usage from LlamaIndex's TokenCountingHandler and LangChain's
    UsageMetadataCallbackHandler. A served answer costs no call, a hit the judge's alone,
    with the core's answer and tokens; a miss's calls are seen by the frameworks' counters
    (before, CoSChatLLM reported no call to LlamaIndex's callbacks, and CoSChatModel's
    replies had no model name, so LangChain's usage callback dropped them)."""
    docs = load_dataset(_write(tmp_path / "d.jsonl", _docs(2, 4)))
    extra = [EvalDoc(doc_id="x0", text=make_document(4, topic="other"))]
    options = StreamOptions(asks=16, refine_every=0, seed=2)
    retrieval = RetrievalEvalOptions(summary_method="zero-shot", stream=options)
    cfg = CoSConfig.cos(iterations=0, train_questions=2, val_questions=1)
    methods = ["fallback", "fallback+llamaindex", "fallback+langchain", "rag"]
    model = ScriptedFakeModel(thesis_facts=2)
    result = _eval(model, docs, methods, cfg, tmp_path, retrieval, extra)["stream"]
    rows = {r["method"]: r["asks"] for r in _rows(tmp_path / "r.json.stream-rows.jsonl")}
    core = rows["fallback"]
    assert any(r.get("served") for r in core) and any(not r.get("served") for r in core)
    for name in ("fallback+llamaindex", "fallback+langchain"):
        compared = result["frameworks"][name]
        assert compared["other_way"] == 0, name
        served = compared["served"]
        assert served["asks"] and served["calls"] == 0 and served["same_answer"] == served["asks"]
        for c, r in zip(core, rows[name], strict=True):
            if r.get("served"):
                assert r["calls"] == 0 and r["prompt_tokens"] == 0
            elif r.get("hit"):  # the judge's call alone, as the core counted it
                assert r["calls"] == 1 and r["prompt_tokens"] == c["prompt_tokens"]
                assert r["answer"] == c["answer"]
            else:  # the framework's own answer call, counted by its callbacks
                assert r["calls"] >= 1 and r["prompt_tokens"] > 0, json.dumps([name, r, c])
    assert [t[0] for t in stream_table(result)][:3] == methods[:3]
    one_question = RetrievalEvalOptions(summary_method="zero-shot")
    with pytest.raises(ValueError, match="--stream"):
        _eval(model, docs, ["fallback+langchain"], cfg, tmp_path, one_question, [])


def _rows(path):
    from cos_integrations.research.jsonl import read_jsonl

    return read_jsonl(path)
