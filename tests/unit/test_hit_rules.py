"""The hit decision on a real Chroma index with the prompt-reading fake model: the
grounded reply (echo, quote), the hit context, routing, and the stored-text fallback."""

import asyncio
import json

import pytest
from fakes import ScriptedFakeModel, make_document

from cos_integrations import ChainOfSummaries, CoSConfig
from cos_integrations.defaults import FOCUS_SENTENCES
from cos_integrations.loaders import SourceDocument
from cos_integrations.serving.hit_rule import HitRule, echoes_question
from cos_integrations.serving.retrieval import FallbackRetriever
from cos_integrations.text import split_sentences

TOPICS = ["lease", "garden", "parking"]


@pytest.fixture
def filled(index):
    model = ScriptedFakeModel(thesis_facts=2)  # summaries hold items 0 and 1 of 8
    engine = ChainOfSummaries(model, CoSConfig.fast(iterations=0))
    documents = [
        SourceDocument(doc_id=t, text=make_document(8, topic=t), source=f"{t}.txt", title=t)
        for t in TOPICS
    ]
    asyncio.run(index.aingest(documents, engine))
    return index, model


def judge(index, model, **kw):
    # each test adds the levers it is about to a rule that reads the summaries; the hit
    # rule alone (no verified answers: a question asked twice is decided twice)
    base = dict(judge="llm", threshold=0.1, hit_context="summaries")
    rule = HitRule(**{**base, **kw})
    return FallbackRetriever(index, llm=model, k=2, rule=rule, answers=False, max_error=None)


def reply(answer, quote):
    return json.dumps({"quote": quote, "answer": answer})


def test_echoes_question():
    assert echoes_question("Scottish Parliament", "Who gave the mace to the Scottish Parliament?")
    assert not echoes_question("the Queen", "Who gave the mace to the Scottish Parliament?")
    assert not echoes_question(None, "Who?") and not echoes_question("", "Who?")


def test_hit_context_best_plus_chunk(filled):
    index, model = filled
    q = "What is the garden item 6?"  # only in the source, not in the 2-fact summary
    assert not judge(index, model).retrieve(q).hit
    both = judge(index, model, hit_context="best+chunk").retrieve(q)
    assert both.hit and both.answer == "value 6g"
    assert [h.kind for h in both.items] == ["summary", "chunk"]
    assert {h.doc_id for h in both.items} == {"garden"}
    assert both.judge_context_tokens == both.context_tokens > 0
    prompt = model.calls[-1][1][0]["content"]
    assert "garden item 6 is value 6g" in prompt  # the judge read the chunk
    for gone in ("everything", "best"):  # "best" (the summary alone) went in 0.3
        with pytest.raises(ValueError, match="hit_context"):
            judge(index, model, hit_context=gone)


def test_a_miss_without_chunk_vectors_ranks_the_stored_text(filled):
    index, model = filled
    index.chunks.delete(where={"doc_id": {"$in": TOPICS}})  # a summaries-only index
    assert index.chunks.count() == 0
    q = "What is the parking item 5?"
    res = judge(index, model).retrieve(q)
    assert not res.hit and res.fallback == "stored text"
    assert "stored text" in res.reason
    assert res.items and all(h.kind == "chunk" and h.metadata["cos_on_the_fly"] for h in res.items)
    assert "parking item 5 is value 5f" in res.items[0].text
    # best+chunk also finds its chunk in the stored text
    hit = judge(index, model, hit_context="best+chunk").retrieve(q)
    assert hit.hit and hit.answer == "value 5f"


def test_an_answer_that_repeats_the_question_is_a_miss(filled):
    index, model = filled
    q = "What is the garden item 1?"
    model.script["grounded"] = [reply("garden item", "The garden item 1 is value 1b.")]
    echo = judge(index, model).retrieve(q)
    assert not echo.hit and echo.answer is None and echo.judge_answer == "garden item"
    assert echo.checks["not_echo"] is False and echo.checks["quoted"] is True
    assert "not_echo failed" in echo.reason and echo.items[0].kind == "chunk"


def test_a_summary_fact_the_source_does_not_state_is_a_miss(filled):
    index, model = filled
    # a summary that states a wrong value (as the 1.5B model's summaries of stories did):
    # quoted right from what the judge read, but the source does not say it: a miss
    index.store.publish_version(
        "garden", "The garden item 1 is value 9z.", expected_version=1, created_by="human"
    )
    index.sync_document("garden")
    res = judge(index, model).retrieve("What is the garden item 1?")
    assert not res.hit and res.judge_answer == "value 9z" and res.checks["quoted"] is True
    assert res.checks["in_source"] is False and res.quote == "The garden item 1 is value 9z."
    # the miss reads the source chunk that has the right value
    assert any("garden item 1 is value 1b" in h.text for h in res.items)


def test_a_focused_hit_context_reads_the_windows_closest_to_the_query(filled):
    index, model = filled
    q = "What is the garden item 6?"  # only in the source chunk, not in the summary
    wide = judge(index, model, hit_context="best+chunk").retrieve(q)
    narrow = judge(index, model, hit_context="focused").retrieve(q)
    assert narrow.hit and narrow.answer == "value 6g"
    prompt = model.calls[-1][1][0]["content"]
    assert "garden item 6 is value 6g" in prompt  # the sentence the answer stands in
    assert "lease" not in prompt and "parking" not in prompt
    assert 0 < narrow.judge_context_tokens < wide.judge_context_tokens
    assert all(h.doc_id == "garden" and h.metadata["cos_focused"] for h in narrow.items)
    kept = [s for h in narrow.items for s in split_sentences(h.text)]
    assert len(kept) <= FOCUS_SENTENCES and "The garden item 6 is value 6g." in kept


def test_an_answer_from_outside_the_focused_sentences_is_a_miss(filled):
    index, model = filled
    q = "What is the garden item 6?"
    assert judge(index, model, hit_context="focused").retrieve(q).hit
    prompt = model.calls[-1][1][0]["content"]
    # a judge that quotes a sentence of the document that the focus left out
    left_out = next(i for i in range(8) if f"garden item {i} is" not in prompt)
    value = f"value {left_out}{chr(97 + left_out)}"
    model.script["grounded"] = [reply(value, f"The garden item {left_out} is {value}.")]
    res = judge(index, model, hit_context="focused").retrieve(q)
    assert not res.hit and res.judge_answer == value
    assert res.checks["quoted"] is False and res.checks["in_source"] is False
    assert res.items and all(h.kind == "chunk" for h in res.items)


def test_focus_items_ranks_windows_by_the_embedding_and_keeps_each_texts_order():
    from cos_integrations.embedded.embeddings import HashingEmbedder
    from cos_integrations.serving.index import SearchHit
    from cos_integrations.serving.retrieval import focus_items

    q = "When did the owners meet in Boca Raton?"
    summary = "The stadium is in Santa Clara. The owners met in Boca Raton in May."
    chunk = "Rain fell all week. Nobody came. The owners meet in Boca Raton each spring."
    items = [
        SearchHit("s", "d", summary, 0.9, {}, "summary"),
        SearchHit("c", "d", chunk, 0.8, {}, "chunk"),
    ]
    kept = focus_items(q, items, embedder=HashingEmbedder(256), limit=2)
    texts = [h.text for h in kept]
    assert any("Boca Raton" in t for t in texts)  # a window of two sentences on the query
    assert sum(len(split_sentences(t)) for t in texts) == 2
    both = focus_items(q, items, embedder=HashingEmbedder(256), limit=4)
    assert [h.id for h in both] == ["s", "c"]  # each text's windows, in the items' order
    assert "Rain fell all week." not in " ".join(h.text for h in both)
    assert focus_items(q, [], embedder=HashingEmbedder(256)) == []


def test_defaults_follow_the_measurement(filled):
    from cos_integrations.serving.retrieval import DEFAULT_THRESHOLD

    index, model = filled
    judged = FallbackRetriever(index, llm=model, rule=HitRule(judge="llm"))
    assert judged.rule.context == "focused" and judged.rule.routes
    # the index's threshold: 0.80 until it knows 10 questions people asked (calibration)
    assert judged.threshold == index.threshold == DEFAULT_THRESHOLD == 0.80
    # without a model judge a hit is the best summary and its document's best chunks, k in
    # all, as a retriever's k promises (BENCHMARKS.md, "Without a model")
    assert FallbackRetriever(index).rule.context == "best+chunk"
    assert not FallbackRetriever(index).rule.routes
    # on the default rule a fact only the source has is a hit from its chunk
    rule = HitRule(judge="llm", threshold=0.1)
    res = FallbackRetriever(index, llm=model, rule=rule, max_error=None).retrieve(
        "What is the garden item 6?"
    )
    assert res.hit and res.answer == "value 6g" and res.checks["in_quote"]
    assert [h.kind for h in res.items] == ["chunk"] or "chunk" in [h.kind for h in res.items]
    assert all(h.metadata["cos_focused"] for h in res.items)  # their windows on the query


def test_the_judge_is_asked_only_where_summary_and_chunk_search_agree(filled):
    index, model = filled
    q = "What is the parking item 1?"
    # garden's summary now reads like the parking question (a summary that routes a query
    # to the wrong document); parking's chunks still hold the fact
    index.store.publish_version(
        "garden",
        "What is the parking item 1? The parking item 1 is value 9z.",
        expected_version=1,
        created_by="human",
    )
    index.sync_document("garden")
    assert index.search_summaries(q, 1)[0].doc_id == "garden"
    assert index.search_chunks(q, 1)[0].doc_id == "parking"
    before = model.counts["grounded"]
    routed = judge(index, model).retrieve(q)
    assert not routed.hit and routed.checks == {"routed": False}
    assert "routing disagrees" in routed.reason and routed.judge_context_tokens == 0
    assert model.counts["grounded"] == before  # no judge call was made
    assert routed.items and routed.items[0].doc_id == "parking"  # the miss's chunks
    # where the two searches agree the judge is asked and the check is reported
    agreed = judge(index, model).retrieve("What is the lease item 1?")
    assert agreed.checks["routed"] is True and model.counts["grounded"] == before + 1
