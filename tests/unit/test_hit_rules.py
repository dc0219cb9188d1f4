"""The hit decision's levers on a real Chroma index with the prompt-reading fake model:
the echo check, the source check, the hit context, and the stored-text fallback on a miss."""

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
    # each test adds the levers it is about to the old rule (summaries, no support check)
    base = dict(judge="llm", threshold=0.1, hit_context="summaries", require_support=False)
    return FallbackRetriever(index, llm=model, k=2, rule=HitRule(**{**base, **kw}))


def one_answer(text):
    return json.dumps({"answers": [{"id": 1, "answer": text}]})


def test_echoes_question():
    assert echoes_question("Scottish Parliament", "Who gave the mace to the Scottish Parliament?")
    assert not echoes_question("the Queen", "Who gave the mace to the Scottish Parliament?")
    assert not echoes_question(None, "Who?") and not echoes_question("", "Who?")


def test_an_answer_that_repeats_the_question_is_a_hit_only_without_reject_echo(filled):
    index, model = filled
    q = "What is the garden item 1?"
    model.script["answer"] = [one_answer("garden item"), one_answer("garden item")]
    loose = judge(index, model).retrieve(q)
    assert loose.hit and loose.answer == "garden item"  # grounded: the summary says it
    strict = judge(index, model, reject_echo=True).retrieve(q)
    assert not strict.hit and strict.answer is None and strict.judge_answer == "garden item"
    assert strict.checks["not_echo"] is False
    assert strict.checks["in_context"] is True and strict.checks["in_source"] is True
    assert "not_echo failed" in strict.reason and strict.items[0].kind == "chunk"


def test_a_summary_fact_the_source_does_not_state_fails_in_source_and_in_chunk(filled):
    index, model = filled
    # a summary that states a wrong value (as the 1.5B model's summaries sometimes did)
    index.store.publish_version(
        "garden", "The garden item 1 is value 9z.", expected_version=1, created_by="human"
    )
    index.sync_document("garden")
    q = "What is the garden item 1?"
    trusting = judge(index, model).retrieve(q)
    assert trusting.hit and trusting.answer == "value 9z"
    checked = judge(index, model, verify_chunk=True).retrieve(q)
    assert not checked.hit and checked.checks["in_source"] is False
    assert checked.checks["in_chunk"] is False
    assert checked.checks["in_context"] is True
    # the miss returns the source chunk that has the right value
    assert any("garden item 1 is value 1b" in h.text for h in checked.items)


def test_hit_context_best_and_best_plus_chunk(filled):
    index, model = filled
    q = "What is the garden item 6?"  # only in the source, not in the 2-fact summary
    assert not judge(index, model).retrieve(q).hit
    best = judge(index, model, hit_context="best").retrieve("What is the garden item 1?")
    assert best.hit and [h.kind for h in best.items] == ["summary"]
    both = judge(index, model, hit_context="best+chunk").retrieve(q)
    assert both.hit and both.answer == "value 6g"
    assert [h.kind for h in both.items] == ["summary", "chunk"]
    assert {h.doc_id for h in both.items} == {"garden"}
    assert both.judge_context_tokens == both.context_tokens > 0
    prompt = model.calls[-1][1][0]["content"]
    assert "garden item 6 is value 6g" in prompt  # the judge read the chunk
    with pytest.raises(ValueError, match="hit_context"):
        judge(index, model, hit_context="everything")


def test_a_focused_hit_context_keeps_only_the_sentences_on_the_query(filled):
    index, model = filled
    q = "What is the garden item 6?"  # only in the source chunk, not in the summary
    wide = judge(index, model, hit_context="best+chunk").retrieve(q)
    narrow = judge(index, model, hit_context="focused", require_support=True).retrieve(q)
    assert narrow.hit and narrow.answer == "value 6g" and narrow.checks["focused"]
    prompt = model.calls[-1][1][0]["content"]
    assert "garden item 6 is value 6g" in prompt  # the sentence the answer stands in
    assert "lease" not in prompt and "parking" not in prompt
    assert 0 < narrow.judge_context_tokens < wide.judge_context_tokens
    assert all(h.doc_id == "garden" and h.metadata["cos_focused"] for h in narrow.items)
    kept = [s for h in narrow.items for s in split_sentences(h.text)]
    assert len(kept) <= FOCUS_SENTENCES and kept[0].startswith("The garden item")
    # the sentence with every key word is kept before those that hold only some of them
    assert "The garden item 6 is value 6g." in kept
    # the chunk check reads the whole chunk, not its focused sentences
    assert narrow.checks["in_chunk"] is True


def test_an_answer_from_outside_the_focused_sentences_is_a_miss(filled):
    index, model = filled
    q = "What is the garden item 6?"
    # a judge that answers with a value of the document that the focus left out
    model.script["answer"] = [one_answer("value 7h")]
    res = judge(index, model, hit_context="focused", require_support=True).retrieve(q)
    prompt = model.calls[-1][1][0]["content"]
    assert "value 7h" not in prompt and "garden item 6 is value 6g" in prompt
    assert not res.hit and res.judge_answer == "value 7h"
    assert res.checks["in_context"] is False and res.checks["supported"] is False
    assert res.items and all(h.kind == "chunk" for h in res.items)


def test_a_focused_context_with_no_sentence_on_the_query_is_a_miss_without_the_judge(filled):
    index, model = filled
    q = "Which garden plants need the most sunlight?"
    calls = len(model.calls)
    res = judge(index, model, hit_context="focused").retrieve(q)
    assert res.candidates and res.candidates[0].score >= 0.1  # the similarity gate passed
    assert not res.hit and res.checks == {"routed": True, "focused": False}
    assert res.judge_answer is None
    assert "key words" in res.reason
    assert len(model.calls) == calls  # no judge call
    assert res.judge_context_tokens == 0 and res.items  # a miss: the source chunks


def test_focus_sentences_ranks_by_key_words_and_keeps_each_texts_order():
    from cos_integrations.serving.hit_rule import focus_sentences, question_keys

    q = "When did the owners meet in Boca Raton?"
    assert question_keys(q) == {"owner", "meet", "boca", "raton"}
    summary = "The owners met in Boca Raton in May. The stadium is in Santa Clara."
    chunk = "Boca Raton hosted it. The owners meet in Boca Raton each spring. Rain fell."
    kept = focus_sentences(q, [summary, chunk], limit=2)
    # the two best (3 and 4 of the 4 key words), in their text's order
    assert kept == [["The owners met in Boca Raton in May."],
                    ["The owners meet in Boca Raton each spring."]]  # fmt: skip
    assert focus_sentences(q, [summary, chunk], limit=4)[1][0] == "Boca Raton hosted it."
    assert focus_sentences("Who won the toss?", [summary, chunk]) == [[], []]


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


def test_is_supported_needs_one_sentence_with_the_answer_and_the_question():
    from cos_integrations.serving.hit_rule import is_supported

    ctx = (
        "Super Bowl 50 was played at Levi's Stadium in the San Francisco Bay Area. "
        "The owners met in Boca Raton in spring 2013 and chose the stadium."
    )
    q = "Where did the spring meetings of the NFL owners take place?"
    assert is_supported("Boca Raton", q, ctx)
    assert not is_supported("San Francisco", q, ctx)  # grounded, but not where it was asked
    assert not is_supported("Miami", q, ctx)  # not in the context at all
    assert not is_supported("I don't know", q, ctx)
    # a question made only of question words and the answer: grounding alone decides
    assert is_supported("Levi's Stadium", "What was Levi's Stadium?", ctx)


def test_supporting_sentence_is_the_one_that_speaks_of_the_question():
    from cos_integrations.serving.hit_rule import supporting_sentence

    ctx = (
        "The Broncos beat the Panthers in Santa Clara. The Broncos had beaten the Patriots "
        "in the AFC Championship. The Panthers lost to the Broncos in Super Bowl 50."
    )
    q = "Who did the Panthers lose Super Bowl 50 to?"
    # three sentences hold "Broncos"; the last holds the question's key words
    assert supporting_sentence("the Broncos", q, ctx) == (
        "The Panthers lost to the Broncos in Super Bowl 50."
    )
    assert supporting_sentence("the Patriots", q, ctx) is None  # its sentence is elsewhere
    assert supporting_sentence("the Giants", q, ctx) is None
    # min_overlap=0: any sentence with the answer and one of the key words (refinement's bar)
    assert supporting_sentence("the Patriots", "Who lost the AFC title?", ctx, min_overlap=0.0) == (
        "The Broncos had beaten the Patriots in the AFC Championship."
    )
    assert (
        supporting_sentence("the Patriots", "Who played in the final?", ctx, min_overlap=0.0)
        is None
    )


def test_require_support_turns_an_unrelated_pick_into_a_miss(filled):
    index, model = filled
    index.store.publish_version(
        "garden",
        "The garden item 1 is value 1b. The shed colour is value 5f.",
        expected_version=1,
        created_by="human",
    )
    index.sync_document("garden")
    q = "What is the garden item 5?"
    model.script["answer"] = [one_answer("value 5f"), one_answer("value 5f")]
    loose = judge(index, model, verify_chunk=True).retrieve(q)
    assert loose.hit and loose.answer == "value 5f"  # right by luck: in summary and source
    strict = judge(index, model, require_support=True).retrieve(q)
    assert not strict.hit and strict.checks["supported"] is False
    assert strict.checks["in_context"] is True
    assert judge(index, model, require_support=True).retrieve("What is the garden item 1?").hit


def test_verify_chunk_needs_the_answer_in_the_documents_best_chunk(filled):
    index, model = filled
    # ~480 words, several 160-word chunks: the orchard facts first, then the barn's
    long_doc = make_document(20, topic="orchard") + " " + make_document(40, topic="barn")
    engine = ChainOfSummaries(model, CoSConfig.fast(iterations=0))
    asyncio.run(index.aingest([SourceDocument(doc_id="orchard", text=long_doc)], engine))
    assert len(index.chunks.get(where={"doc_id": "orchard"})["ids"]) >= 3
    # the summary names a value the source holds far from orchard item 1 (barn item 30's)
    index.store.publish_version(
        "orchard", "The orchard item 1 is value 30e.", expected_version=1, created_by="human"
    )
    index.sync_document("orchard")
    q = "What is the orchard item 1?"
    source_only = judge(index, model).retrieve(q)
    assert source_only.hit and source_only.answer == "value 30e"
    assert source_only.checks["in_source"] is True  # in the source, so that check is fooled
    checked = judge(index, model, verify_chunk=True).retrieve(q)
    assert not checked.hit and checked.checks["in_chunk"] is False
    assert any("orchard item 1 is value 1b" in h.text for h in checked.items)
    index.store.publish_version(
        "orchard", "The orchard item 1 is value 1b.", expected_version=2, created_by="human"
    )
    index.sync_document("orchard")
    right = judge(index, model, verify_chunk=True).retrieve(q)
    assert right.hit and right.checks["in_chunk"] is True and right.answer == "value 1b"


def test_defaults_follow_the_ablation(filled):
    from cos_integrations.serving.retrieval import DEFAULT_THRESHOLD

    index, model = filled
    judged = FallbackRetriever(index, llm=model, rule=HitRule(judge="llm"))
    assert (judged.rule.context, judged.rule.require_support) == ("focused", True)
    # the index's threshold: 0.80 until it knows 10 questions people asked (calibration)
    assert judged.threshold == index.threshold == DEFAULT_THRESHOLD == 0.80
    # without a model judge a hit is the top-k summaries, as a retriever's k promises
    assert FallbackRetriever(index).rule.context == "summaries"
    # on the real default rule a fact only the source has is a hit from its chunk
    res = FallbackRetriever(index, llm=model, rule=HitRule(judge="llm", threshold=0.1)).retrieve(
        "What is the garden item 6?"
    )
    assert res.hit and res.answer == "value 6g" and res.checks["supported"]
    assert [h.kind for h in res.items] == ["summary", "chunk"]
    assert all(h.metadata["cos_focused"] for h in res.items)  # their sentences on the query


def test_verify_route_asks_the_judge_only_where_summary_and_chunk_search_agree(filled):
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
    model.script["answer"] = [one_answer("value 9z")] * 2
    before = model.counts["answer"]
    routed = judge(index, model, verify_route=True).retrieve(q)
    assert not routed.hit and routed.checks == {"routed": False}
    assert "routing disagrees" in routed.reason and routed.judge_context_tokens == 0
    assert model.counts["answer"] == before  # no judge call was made
    assert routed.items and routed.items[0].doc_id == "parking"  # the miss's chunks
    unrouted = judge(index, model, verify_route=False).retrieve(q)
    assert model.counts["answer"] == before + 1
    assert unrouted.hit and unrouted.answer == "value 9z"  # the wrong summary's answer
    assert "routed" not in unrouted.checks
    # where the two searches agree the judge is asked and the check is reported
    agreed = judge(index, model, verify_route=True).retrieve("What is the lease item 1?")
    assert agreed.checks["routed"] is True and model.counts["answer"] == before + 2


def test_verify_route_is_on_for_the_model_judge_only(filled):
    index, model = filled
    assert FallbackRetriever(index, llm=model, rule=HitRule(judge="llm")).rule.routes
    assert not FallbackRetriever(index).rule.routes
    assert FallbackRetriever(index, rule=HitRule(verify_route=True)).rule.routes
