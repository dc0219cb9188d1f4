"""Fallback retrieval and miss-triggered refinement over a real Chroma index."""

import asyncio
import dataclasses
import json

import pytest
from fakes import ScriptedFakeModel, facts, make_document

from cos_integrations import ChainOfSummaries, CoSConfig
from cos_integrations.defaults import DEFAULT_REFINE_MIN_ASKS
from cos_integrations.loaders import SourceDocument
from cos_integrations.serving import retrieval
from cos_integrations.serving.hit_rule import HitRule
from cos_integrations.serving.refine import BackgroundRefiner, Refiner
from cos_integrations.serving.retrieval import FallbackRetriever
from cos_integrations.storage.answers import question_key
from cos_integrations.storage.refine_queue import STILL_MISSES
from cos_integrations.summarize.questions import QAPair

TOPICS = ["lease", "garden", "parking"]


@pytest.fixture
def filled(index):
    model = ScriptedFakeModel(thesis_facts=2)
    # iterations=0: summaries are the thesis (2 facts of 8), so misses are easy to make
    engine = ChainOfSummaries(model, CoSConfig.fast(iterations=0))
    documents = [
        SourceDocument(doc_id=t, text=make_document(8, topic=t), source=f"{t}.txt", title=t.title())
        for t in TOPICS
    ]
    asyncio.run(index.aingest(documents, engine))
    return index, engine, model


# A hit here means "the summary answers it" (the refine loop's subject): the judge reads the
# summaries alone. The product's default (focused: the best summary's and its chunk's
# sentences on the query) would hit on every fact of these
# one-chunk documents.
SUMMARY_ONLY = HitRule(judge="llm", threshold=0.1, hit_context="summaries")


def retriever(index, model, *, rule=SUMMARY_ONLY, **kw):
    # the hit rule alone (no router): these tests are about what the summary path decides
    kw.setdefault("max_error", None)
    kw.setdefault("refine_min_asks", 1)  # a round on the first miss: what a round does
    return FallbackRetriever(index, llm=model, k=2, rule=rule, **kw)


def refiner(index, engine, **kw):
    # these tests are about what a round does: a job runs on its question's first miss
    kw.setdefault("min_asks", 1)
    return Refiner(index, engine, **kw)


def test_hit_returns_summaries_and_the_answer(filled):
    index, _, model = filled
    r = retriever(index, model).retrieve("What is the garden item 1?")
    assert r.hit and r.answer == "value 1b"
    assert r.items[0].doc_id == "garden" and r.items[0].kind == "summary"
    assert all(h.metadata["cos_hit"] is True for h in r.items)
    assert index.store.event_counts() == {"hit": 1}
    assert not index.store.jobs()


def test_miss_returns_source_chunks_and_queues_one_job(filled):
    index, _, model = filled
    ret = retriever(index, model)
    r = ret.retrieve("What is the garden item 6?")
    assert not r.hit and r.answer is None and r.job_id is not None
    assert r.items and all(h.kind == "chunk" and h.metadata["cos_hit"] is False for h in r.items)
    assert r.items[0].doc_id == "garden" and "garden item 6 is value 6g" in r.items[0].text
    again = ret.retrieve("what is the garden item 6")
    assert again.job_id == r.job_id  # de-duplicated on the normalised query
    assert [(j.doc_id, j.status) for j in index.store.jobs()] == [("garden", "pending")]
    assert (ret.hits, ret.misses) == (0, 2)


def test_score_judge_uses_threshold_only(filled):
    index, _, model = filled
    calls = len(model.calls)
    hit = FallbackRetriever(index, rule=HitRule(threshold=0.0)).retrieve(
        "What is the garden item 6?"
    )
    miss = FallbackRetriever(index, rule=HitRule(threshold=0.99)).retrieve(
        "What is the garden item 6?"
    )
    assert hit.hit and not miss.hit and len(model.calls) == calls


def test_sync_retrieve_reads_in_the_callers_thread_async_in_workers(filled):
    """The sync path spares the worker-thread hops (one call, one read at a time); the async
    path keeps them, so a server's loop is never blocked by a store or vector read."""
    import threading

    index, _, model = filled
    seen: list[int] = []
    record = index.store.record_event

    def spy(*args, **kwargs):
        seen.append(threading.get_ident())
        return record(*args, **kwargs)

    index.store.record_event = spy
    ret = FallbackRetriever(index, rule=HitRule(threshold=0.0))
    assert ret.retrieve("What is the garden item 1?").hit
    assert seen == [threading.get_ident()]
    assert asyncio.run(ret.aretrieve("What is the garden item 1?")).hit
    assert len(seen) == 2 and seen[1] != threading.get_ident()


def test_empty_index_returns_nothing(index):
    r = FallbackRetriever(index).retrieve("anything?")
    assert not r.hit and r.items == []


def test_refine_once_publishes_and_the_query_then_hits(filled):
    index, engine, model = filled
    ret = retriever(index, model)
    q = "What is the parking item 7?"
    assert not ret.retrieve(q).hit
    outcomes = refiner(index, engine).run_once()
    assert [(o.status, o.answer) for o in outcomes] == [("published", "value 7h")]
    current = index.store.current_summary("parking")
    assert current.version == 2 and current.created_by == "refine" and "value 7h" in current.text
    assert current.reason == f"miss: {q}"
    vec = index.summaries.get(where={"doc_id": "parking"}, include=["documents", "metadatas"])
    assert len(vec["ids"]) == 1 and vec["metadatas"][0]["cos_version"] == 2
    assert ret.retrieve(q).hit
    bank = index.store.questions("parking")
    assert any(p.origin == "miss" and p.question == q for p in bank)
    assert index.store.jobs()[0].status == "published"


# the usual route never hits (threshold 0.99): only a verified answer can serve
UNREACHABLE = SUMMARY_ONLY.model_copy(update={"threshold": 0.99})


def test_a_miss_whose_source_answered_it_is_served_when_asked_again(filled):
    """Issue 56 items 1-2: a refine job's grounded answer is kept as a verified answer and
    an exact repeat (any case, spacing, punctuation) is served it with no model call, the
    source sentence as what was retrieved; an unseen query is not, and the layer can be
    switched off."""
    index, engine, model = filled
    ret = retriever(index, model, rule=UNREACHABLE)
    q = "What is the parking item 7?"
    first = ret.retrieve(q)
    assert not first.hit and first.reason.startswith("best similarity")
    assert not ret.retrieve(q).hit  # no job has run yet, and the caller gave no answer
    assert ret.verified.exact(q) is None
    assert [o.status for o in refiner(index, engine).run_once()] == ["published"]
    entry = ret.verified.exact("  what is the PARKING item 7 ")  # normalised
    assert (entry.doc_id, entry.answer, entry.origin) == ("parking", "value 7h", "refine")
    assert entry.quote == "The parking item 7 is value 7h."  # the source's own sentence
    assert entry.content_hash == index.store.get_document("parking").content_hash
    calls = len(model.calls)
    again = ret.retrieve(q)
    assert again.hit and again.served == "exact" and again.answer == "value 7h"
    assert len(model.calls) == calls and again.usage.calls == 0  # no model call
    [item] = again.items
    assert item.kind == "answer" and item.text == entry.quote and item.doc_id == "parking"
    assert item.metadata["cos_answer"] == "value 7h" and item.metadata["cos_hit"] is True
    assert again.citations[0].source == "parking.txt"
    counts = index.store.event_counts()
    assert counts["answer"] == 1 and counts["miss"] == 2 and "hit" not in counts  # once an ask
    assert (ret.hits, ret.served, ret.misses) == (1, 1, 2)
    assert not ret.retrieve("What is the parking item 6?").hit  # never answered
    assert not retriever(index, model, rule=UNREACHABLE, answers=False).retrieve(q).hit


def test_by_default_a_worker_refines_a_question_once_it_came_back(filled):
    """Issue 56 item 3, the shipped trigger (``DEFAULT_REFINE_MIN_ASKS``): a worker leaves a
    question's first miss alone (its answer from the chunks serves the repeats) and runs
    the job once the question came back and missed again."""
    index, engine, model = filled
    ret = retriever(index, model, rule=UNREACHABLE, refine_min_asks=DEFAULT_REFINE_MIN_ASKS)
    q = "What is the parking item 7?"
    assert not ret.retrieve(q).hit
    assert Refiner(index, engine).run_once() == []  # the first miss: no round
    assert index.store.jobs("pending")[0].asks == 1
    assert not ret.retrieve(q).hit  # it came back, and no answer was kept to serve it
    assert [o.status for o in Refiner(index, engine).run_once()] == ["published"]
    assert ret.retrieve(q).served == "exact"


def test_a_miss_answered_from_its_chunks_is_kept_when_the_source_holds_the_answer(filled):
    """aremember: the answer a caller gave a miss from its chunks is kept when a sentence of
    the chunks holds it (no refine job needed); an answer the chunks do not hold is not."""
    index, _, model = filled
    ret = retriever(index, model, rule=UNREACHABLE, refine_on_miss="off")
    q = "What is the garden item 6?"
    miss = ret.retrieve(q)
    assert ret.remember(miss, "value 9z") is None  # not in what it read
    assert ret.remember(miss, "I don't know") is None
    entry = ret.remember(miss, "value 6g")
    assert entry.origin == "miss" and entry.quote == "The garden item 6 is value 6g."
    assert ret.retrieve("what is the garden item 6").served == "exact"
    # aanswer does both: the chunk answer (one call), then kept
    calls = len(model.calls)
    res = ret.answer("What is the lease item 5?")
    assert not res.hit and res.answer == "value 5f" and res.usage.calls == 1
    assert len(model.calls) == calls + 1
    served = ret.answer("What is the lease item 5?")
    assert served.served == "exact" and served.answer == "value 5f" and served.usage.calls == 0
    assert len(model.calls) == calls + 1


def test_an_unverified_answer_is_served_to_an_exact_repeat_over_the_same_chunks_only(filled):
    """Issue 56 goal "exact repeats served without a model call": an answer no sentence of
    the source holds is kept with no quote ("repeat") and served to the same question
    with no call while it reads the same chunks of the same texts (what an exact-prompt
    cache does), never to a rewording; a verified answer replaces it; a changed text of
    any chunk it read sends the question the usual way again."""
    index, engine, model = filled
    ret = retriever(index, model, rule=UNREACHABLE, refine_on_miss="off")
    q = "What is the garden item 6?"
    miss = ret.retrieve(q)
    assert ret.remember(miss, "value 9z") is None  # not verified
    kept = index.store.answer_for(question_key(q))
    assert (kept.origin, kept.answer, kept.quote) == ("repeat", "value 9z", "")
    assert index.answers.get(where={"doc_id": kept.doc_id})["ids"] == []  # not indexed
    calls = len(model.calls)
    again = ret.retrieve(" what is the GARDEN item 6 ")
    assert again.hit and again.served == "repeat" and again.answer == "value 9z"
    assert again.quote is None and len(model.calls) == calls and again.usage.calls == 0
    assert [h.id for h in again.items] == [h.id for h in miss.items]  # what it was read from
    assert all(h.kind == "chunk" and h.metadata["cos_hit"] for h in again.items)
    # what a framework's documents / nodes carry: the answer, and how it was served
    meta = retrieval.item_metadata(again, again.items[0], "garden.txt")
    assert (meta["cos_served"], meta["cos_answer"]) == ("repeat", "value 9z")
    assert not ret.retrieve("Which value does the garden item 6 have?").served
    assert ret.remember(miss, "value 6g").origin == "miss"  # verified: takes its place
    assert ret.retrieve(q).served == "exact"
    # the same question over changed texts is asked again
    q2 = "What is the lease item 3?"
    first = ret.retrieve(q2)
    assert len({h.doc_id for h in first.items}) == 2
    ret.remember(first, "value 77q")
    assert ret.retrieve(q2).served == "repeat"
    other = first.items[1].doc_id
    changed = make_document(8, topic=other).replace("value 1", "value 1q")
    doc = SourceDocument(doc_id=other, text=changed, source=f"{other}.txt", title=other)
    asyncio.run(index.aingest([doc], engine))
    later = ret.retrieve(q2)
    assert not later.hit and not later.served
    assert [h.id for h in later.items] == [h.id for h in first.items]  # the same chunks


def test_a_hit_whose_answer_the_source_holds_is_kept(filled):
    index, _, model = filled
    ret = retriever(index, model)
    q = "What is the garden item 1?"
    assert ret.retrieve(q).hit and ret.retrieve(q).served == "exact"
    assert ret.verified.exact(q).origin == "hit"


def test_a_verified_answer_is_never_served_for_a_text_it_was_not_verified_on(filled):
    """Issue 56 item 4: change a fact of a document and ingest it again: the old answer is
    not served (the entry, its vector, its "not in source" records and its miss questions
    went with the old text); the new text's answer is found and kept in its place."""
    index, engine, model = filled
    ret = retriever(index, model, rule=UNREACHABLE, refine_on_miss="off")
    q = "What is the lease item 5?"
    assert ret.answer(q).answer == "value 5f"
    assert ret.retrieve(q).served == "exact"
    index.store.add_question(
        "lease", QAPair(question=q, answers=["value 5f"], split="train", origin="miss")
    )
    index.store.enqueue("lease", "What is the lease item 99?")
    job = index.store.lease("w")
    index.store.finish_job(job.id, "w", "not_in_source")
    assert index.store.not_in_source("lease", "What is the lease item 99?")
    assert len(index.answers.get(where={"doc_id": "lease"})["ids"]) == 1
    changed = make_document(8, topic="lease").replace("value 5f", "value 5x")
    doc = SourceDocument(doc_id="lease", text=changed, source="lease.txt", title="Lease")
    asyncio.run(index.aingest([doc], engine))
    assert ret.verified.exact(q) is None and index.store.answers("lease") == []
    assert index.answers.get(where={"doc_id": "lease"})["ids"] == []
    assert not index.store.not_in_source("lease", "What is the lease item 99?")
    assert not any(p.origin == "miss" for p in index.store.questions("lease"))
    again = ret.answer(q)
    assert not again.served and again.answer == "value 5x"  # read off the new text
    served = ret.retrieve(q)
    assert served.served == "exact" and served.answer == "value 5x"
    verified_on = served.items[0].metadata["cos_verified_on"]
    assert verified_on == index.store.get_document("lease").content_hash
    # an entry made on the old text cannot be put in after the change either
    assert index.store.put_answer("lease", "Q?", "a", "a.", "miss", content_hash="0" * 64) is None


def test_a_close_rewording_is_served_and_a_near_duplicate_is_not(filled, monkeypatch):
    """Issue 56 item 2: a question from the entry's bar on is served with no call; under it
    but from the band's floor on, it goes the usual way (the chunks) and the answer it gets
    there teaches the entry: the same answer leaves the bar, another raises it above that
    similarity. (No check reading the entry's sentence alone: the model then gives the
    entry's answer to whatever is asked.)"""
    from cos_integrations.serving.hit_rule import HitRule

    index, _, model = filled
    monkeypatch.setattr(retrieval, "ANSWER_CHECK_SIMILARITY", 0.5)  # hashing embedder's scale
    rule = UNREACHABLE.model_copy(update={"answer_similarity": 0.999})
    ret = retriever(index, model, rule=rule, refine_on_miss="off")
    asked = "Tell me: What is the garden item 6?"
    assert ret.answer(asked).answer == "value 6g"
    entry = ret.verified.exact(asked)
    reworded = "Tell me please: What is the garden item 6?"  # hashing cosine 0.88
    r = ret.answer(reworded)
    assert not r.hit and not r.served and r.answer == "value 6g"  # the chunks answered it
    assert r.near is None  # taught (once): the same answer, the bar stays
    assert ret.verified.nearest(index.embedder.embed_query(reworded), 0.0)[0].id != entry.id
    assert index.store.answers_by_id([entry.id])[entry.id].bar is None
    assert ret.verified.exact(reworded).origin == "miss"  # kept as an entry of its own
    # another item (another number): asks something else, never near that entry
    r = ret.retrieve("Tell me: What is the garden item 5?")
    assert not r.served and r.near is None
    # the same number, another subject: the chunks give another answer, the bar rises
    other = "Tell me: What is the lease item 6?"
    found = ret.verified.nearest(index.embedder.embed_query(other), 0.0)
    r = ret.retrieve(other)
    assert not r.hit and not r.served and r.near == (found[0].id, found[1])
    ret.remember(r, "value 6l")
    raised = index.store.answers_by_id([found[0].id])[found[0].id]
    assert raised.bar is not None and raised.bar > found[1]
    # from the bar on: no call at all (the same numbers)
    free = retriever(index, model, rule=rule.model_copy(update={"answer_similarity": 0.8}))
    calls = len(model.calls)
    third = free.retrieve("Tell me please: What is the garden item 6 ?")
    assert third.served == "exact"  # the kept rewording, normalised
    fourth = free.retrieve("Tell me please, What is the garden item 6?")
    assert fourth.served in ("exact", "similar") and len(model.calls) == calls
    # a number the entry's question does not name is never served without a check
    assert not free.verified.serves(entry, "Tell me: What is the garden item 7?", 1.0, 0.8)
    assert HitRule().answer_similarity == 0.98  # the default (BENCHMARKS.md)


def test_near_verified_questions_with_different_answers_raise_each_others_bar(filled):
    index, _, model = filled
    rule = UNREACHABLE.model_copy(update={"answer_similarity": 0.8})  # hashing's scale
    ret = retriever(index, model, rule=rule, refine_on_miss="off")
    a = ret.answer("Tell me: What is the garden item 6?")
    b = ret.answer("Tell me: What is the garden item 5?")
    assert (a.answer, b.answer) == ("value 6g", "value 5f")
    e5, e6 = ret.verified.exact(b.query), ret.verified.exact(a.query)
    emb = index.embedder.embed_query(a.query)
    sim = dict((e.id, s) for e, s in index.search_answers(emb, 4))[e5.id]
    assert e6.bar == e5.bar == pytest.approx(min(sim + 0.005, 1.0), abs=1e-3)


def test_a_silent_source_sends_the_job_to_the_next_document(filled):
    """retarget: a job sent to a document whose source is silent goes on to the next
    document of the collection's chunk ranking for the query, in the same pass."""
    index, engine, model = filled
    q = "Tell me: What is the garden item 6?"  # not a bank question already
    assert index.store.enqueue("lease", q) is not None  # the fallback's top chunk was lease's
    only_its_own = refiner(index, engine, retarget=1).run_once()
    assert [o.status for o in only_its_own] == ["not_in_source"]
    assert index.store.answer_for(question_key(q)) is None  # retarget=1: lease only
    index.store.enqueue("parking", q)
    first, second = refiner(index, engine).run_once()  # the default: 3 documents
    assert (first.doc_id, first.status) == ("parking", "not_in_source")
    assert "queued for garden" in first.reason
    assert (second.doc_id, second.status, second.answer) == ("garden", "published", "value 6g")
    entry = index.store.answer_for(question_key(q))
    assert (entry.doc_id, entry.answer) == ("garden", "value 6g")
    # asked nowhere in the sources: every document of the ranking is tried once, then it stops
    nowhere = "Tell me: What is the garden item 99?"
    index.store.enqueue("garden", nowhere)
    outcomes = refiner(index, engine).run_once()
    assert sorted(o.doc_id for o in outcomes) == sorted(TOPICS)
    assert {o.status for o in outcomes} == {"not_in_source"}
    assert all(index.store.not_in_source(t, nowhere) for t in TOPICS)
    with pytest.raises(ValueError, match="retarget"):
        refiner(index, engine, retarget=0)


def test_not_in_source_is_remembered(filled):
    index, engine, model = filled
    ret = FallbackRetriever(index, llm=model, k=1, rule=SUMMARY_ONLY)
    q = "What is the lease item 99?"
    first = ret.retrieve(q)
    assert not first.hit and first.items
    (outcome,) = refiner(index, engine, retarget=1).run_once()  # lease's source only
    assert outcome.status == "not_in_source"
    second = ret.retrieve(q)
    # known silent: no job again, but the source chunks are still read (never worse)
    assert second.not_in_source and second.job_id is None
    assert [h.id for h in second.items] == [h.id for h in first.items]
    assert index.store.enqueue("lease", q) is None  # never queued again
    # with more candidates, one not known to be silent, the full text is still searched
    wider = FallbackRetriever(index, llm=model, k=3, rule=SUMMARY_ONLY)
    assert not wider.retrieve(q).not_in_source


def test_rewrite_that_does_not_answer_falls_back_to_an_appended_fact(filled):
    index, engine, model = filled
    model.rewrite_adds = False  # the rewrite never adds the fact (as the 1.5B model did)
    retriever(index, model).retrieve("What is the lease item 7?")
    (outcome,) = refiner(index, engine, teach="rewrite").run_once()
    assert outcome.status == "published" and model.counts["fact"] == 1
    current = index.store.current_summary("lease").text
    assert current.endswith("The lease item 7 is value 7h.")
    assert current.startswith(index.store.versions("lease")[0].text)


def test_rewrite_and_fact_that_do_not_answer_are_rejected(filled):
    index, engine, model = filled
    model.rewrite_adds = False
    model.script["fact"] = ["The weather is nice."] * 3
    retriever(index, model).retrieve("What is the lease item 7?")
    outcome, *others = refiner(index, engine, teach="rewrite").run_once()
    assert outcome.status == "rejected" and "still does not answer" in outcome.reason
    assert {o.status for o in others} == {"not_in_source"}  # then tried down the ranking
    assert index.store.current_summary("lease").version == 1


def test_extract_appends_the_source_sentence_without_a_rewrite(filled):
    index, engine, model = filled
    model.rewrite_adds = False  # no rewrite could teach it: the source's sentence does
    retriever(index, model).retrieve("What is the lease item 7?")
    (outcome,) = refiner(index, engine).run_once()
    assert outcome.status == "published"
    assert (model.counts["rewrite"], model.counts["fact"]) == (0, 0)
    assert outcome.usage.calls == 3  # source answer, the bank on v1, the bank on v2
    current = index.store.current_summary("lease").text
    assert current == index.store.versions("lease")[0].text + " The lease item 7 is value 7h."


def _unknown_answers(messages) -> str:
    block = messages[-1]["content"].split("\n\nReply", 1)[0]
    n = len([line for line in block.splitlines() if line[:1].isdigit()])
    return json.dumps({"answers": [{"id": i, "answer": "I don't know"} for i in range(1, n + 1)]})


def test_extract_that_does_not_teach_falls_back_to_a_rewrite(filled):
    index, engine, model = filled
    retriever(index, model).retrieve("What is the lease item 7?")
    # the bank on v1 as usual; on the appended summary the model answers nothing
    model.script["answer"] = [None, _unknown_answers]
    (outcome,) = refiner(index, engine, teach="both").run_once()
    assert outcome.status == "published" and model.counts["rewrite"] == 1
    assert "value 7h" in index.store.current_summary("lease").text


def test_extract_skips_a_sentence_the_summary_already_holds(filled):
    index, engine, model = filled
    summary = index.store.current_summary("lease").text
    assert "The lease item 0 is value 0a." in summary
    index.store.enqueue("lease", "What is the lease item 0?")
    (outcome,) = refiner(index, engine).run_once()  # the default: extract only
    assert outcome.status == "rejected" and model.counts["rewrite"] == 0
    assert "The parking item 0 is value 0a." in index.store.current_summary("parking").text
    index.store.enqueue("parking", "What is the parking item 0?")
    refiner(index, engine, teach="both").run_once()
    assert model.counts["rewrite"] == 1  # nothing to append: the rewrite was asked


def test_extract_only_rejects_what_no_source_sentence_teaches(filled):
    index, engine, model = filled
    retriever(index, model).retrieve("What is the lease item 7?")
    model.script["answer"] = [None, _unknown_answers]
    outcome, *others = refiner(index, engine, teach="extract").run_once()
    assert outcome.status == "rejected" and outcome.reason.startswith(STILL_MISSES)
    assert (model.counts["rewrite"], model.counts["fact"]) == (0, 0)
    assert index.store.current_summary("lease").version == 1
    # it taught nothing, so the query went on down the ranking: silent everywhere else
    assert "queued for" in outcome.reason
    assert sorted(o.doc_id for o in others) == ["garden", "parking"]
    assert {o.status for o in others} == {"not_in_source"}
    entry = index.store.answer_for(question_key("What is the lease item 7?"))
    assert (entry.doc_id, entry.answer) == ("lease", "value 7h")  # the source's, kept


def test_a_source_answer_that_teaches_nothing_sends_the_job_to_the_next_document(
    filled, monkeypatch
):
    """Issue 26 item 5 (tiered-5-retry): a source that answers from a sibling passage's fact
    (here: lease's "item 6" for the garden's) teaches its summary nothing; the query goes on
    to the next document, and a repeat goes where a summary was taught, not to the first
    reader; the source's answer is kept as a verified answer."""
    index, engine, model = filled
    q = "Tell me: What is the garden item 6?"
    index.store.enqueue("lease", q)  # the collection's top chunk was lease's
    # lease's reader quotes a sentence it has (its item 6) and answers with garden's value
    sibling = {"quote": "The lease item 6 is value 6g.", "answer": "value 6g"}
    model.script["source_answer"] = [json.dumps(sibling)]
    first, *rest = refiner(index, engine).run_once()
    assert (first.doc_id, first.status) == ("lease", "rejected")
    assert first.reason.startswith(STILL_MISSES) and "queued for" in first.reason
    taught = [o for o in rest if o.status == "published"]
    assert [(o.doc_id, o.answer) for o in taught] == [("garden", "value 6g")]
    # both sources bear the answer out: the first reading is the verified answer, served
    entry = index.store.answer_for(question_key(q))
    assert (entry.doc_id, entry.answer, entry.origin) == ("lease", "value 6g", "refine")
    again = retriever(index, model, rule=UNREACHABLE).retrieve(q)
    assert again.served == "exact" and again.answer == "value 6g"


def test_teach_must_be_a_known_mode(filled):
    index, engine, _ = filled
    with pytest.raises(ValueError, match="teach must be one of"):
        refiner(index, engine, teach="paraphrase")


def test_pinned_document_gets_a_suggestion_not_a_new_version(filled):
    index, engine, model = filled
    pinned = index.store.publish_version(
        "lease",
        "The lease item 0 is value 0a.",
        expected_version=1,
        created_by="human",
        reason="pin",
    )
    index.sync_document("lease")
    retriever(index, model).retrieve("What is the lease item 4?")
    (outcome,) = refiner(index, engine).run_once()
    assert outcome.status == "suggested"
    assert index.store.current_summary("lease").version == pinned
    assert [v.status for v in index.store.versions("lease")] == [
        "published",
        "published",
        "suggested",
    ]


def test_compare_and_swap_refuses_a_stale_version(filled):
    index, *_ = filled
    store = index.store
    assert store.publish_version("garden", "x", expected_version=1, created_by="refine") == 2
    assert store.publish_version("garden", "y", expected_version=1, created_by="refine") is None
    assert store.current_summary("garden").text == "x"


def test_failed_jobs_retry_then_dead_letter(filled):
    index, _, model = filled

    class Down:
        async def chat(self, *a, **k):
            raise RuntimeError("connection refused")

    retriever(index, model).retrieve("What is the garden item 7?")
    worker = refiner(index, ChainOfSummaries(Down(), CoSConfig.fast()), max_attempts=2)
    assert [o.status for o in worker.run_once(max_jobs=1)] == ["failed"]
    assert [o.status for o in worker.run_once(max_jobs=1)] == ["dead"]
    assert worker.run_once() == []
    assert index.store.jobs()[0].status == "dead"


def test_expired_lease_is_taken_over(filled):
    index, *_ = filled
    store = index.store
    store.enqueue("garden", "What is the garden item 5?")
    first = store.lease("crashed-worker", lease_seconds=-1)  # already expired
    second = store.lease("other-worker")
    assert second.id == first.id and second.attempts == 2
    assert not store.finish_job(first.id, "crashed-worker", "published")
    assert store.finish_job(second.id, "other-worker", "published")


def test_background_refiner_refines_while_serving(filled):
    """A worker of one's own, notified on each miss (refine_on_miss="queue" + on_miss)."""
    index, engine, model = filled
    with BackgroundRefiner(refiner(index, engine), idle_poll=0.05) as bg:
        ret = retriever(index, model, refine_on_miss="queue", on_miss=bg.notify)
        q = "What is the lease item 6?"
        assert not ret.retrieve(q).hit
        assert bg.wait_idle(timeout=30)
        assert [o.status for o in bg.outcomes] == ["published"]
        assert ret.retrieve(q).hit
    assert "value 6g" in index.store.current_summary("lease").text
    assert facts(index.store.current_summary("lease").text)


def test_refine_on_miss_background_is_the_retrievers_own_worker(filled):
    """ "background" differs from "queue": the retriever starts its own refiner on the first
    miss, refines while it serves, and close() stops it."""
    index, _, model = filled
    ret = retriever(index, model, refine_on_miss="background")
    assert ret.background is None  # nothing started before a miss
    try:
        q = "What is the lease item 6?"
        assert not ret.retrieve(q).hit
        assert ret.background is not None and ret.background.wait_idle(timeout=30)
        assert [o.status for o in ret.background.outcomes] == ["published"]
        assert ret.retrieve(q).hit
    finally:
        ret.close()
    assert ret.background is None
    queued = retriever(index, model, refine_on_miss="queue")
    assert not queued.retrieve("What is the garden item 6?").hit
    assert queued.background is None and index.store.jobs("pending")


@pytest.fixture
def tiered(index):
    """An index summarised in the tiered mode: zero-shot at ingest (no question bank)."""
    model = ScriptedFakeModel(thesis_facts=2)
    engine = ChainOfSummaries(model, CoSConfig.tiered(iterations=2, train_questions=4))
    documents = [SourceDocument(doc_id=t, text=make_document(8, topic=t)) for t in TOPICS]
    asyncio.run(index.aingest(documents, engine))
    assert all(not index.store.questions(t) for t in TOPICS)
    assert model.counts["thesis"] == 3 and len(model.calls) == 3  # one call a document
    return index, engine, model


def test_deepen_runs_cos_rounds_only_where_traffic_is(tiered):
    index, engine, model = tiered
    ret = retriever(index, model, refine_on_miss="off")
    ret.retrieve("What is the parking item 6?")  # a miss on parking
    ret.retrieve("What is the parking item 7?")  # and another
    ret.retrieve("What is the lease item 1?")  # a hit on lease
    rounds = refiner(index, engine)
    assert rounds.deepen_candidates() == ["parking", "lease"]  # misses first; garden: none
    before = len(model.calls)
    outcomes = rounds.deepen(strategy="cos-extract")
    assert [(o.doc_id, o.status) for o in outcomes] == [
        ("parking", "published"),
        ("lease", "published"),
    ]
    tasks = [t for t, _ in model.calls[before:]]
    assert "rewrite" not in tasks and tasks.count("questions") == 2  # cos-extract rounds
    parking = index.store.current_summary("parking")
    assert parking.version == 2 and parking.created_by == "cos-extract"
    thesis = index.store.versions("parking")[0].text
    assert parking.text.startswith(thesis) and len(facts(parking.text)) > len(facts(thesis))
    assert all(s + "." in make_document(8, topic="parking") for s in parking.text.split(". ")[:-1])
    # the bank is stored: deepened once; refinement now validates against it
    assert index.store.questions("parking") and rounds.deepen_candidates() == []
    assert rounds.deepen() == []
    assert index.store.current_summary("garden").version == 1
    # the vector follows the published version
    vec = index.summaries.get(where={"doc_id": "parking"}, include=["metadatas"])
    assert vec["metadatas"][0]["cos_version"] == 2


def test_deepen_publishes_nothing_when_no_round_beats_the_summary(tiered):
    index, engine, _ = tiered
    # a summary that already states every fact: no round can beat it
    whole = make_document(8, topic="lease")
    index.store.publish_version("lease", whole, expected_version=1, created_by="human")
    index.store.record_event("hit", "lease", "What is the lease item 1?")
    outcome = refiner(index, engine).deepen()[0]
    assert outcome.status == "rejected" and "no round beat" in outcome.reason
    assert index.store.current_summary("lease").version == 2
    assert index.store.questions("lease")  # the bank is kept: not deepened again


def test_deepen_refuses_what_it_cannot_do(tiered):
    index, engine, model = tiered
    with pytest.raises(ValueError, match="strategy"):
        asyncio.run(engine.adeepen("The a is b.", "The a is b.", strategy="zero-shot"))
    with pytest.raises(ValueError, match="no summary"):
        asyncio.run(engine.adeepen("The a is b.", "  "))
    small = ChainOfSummaries(model, CoSConfig.tiered(context_tokens=2048, max_output_tokens=64))
    with pytest.raises(ValueError, match="longer than one prompt"):
        asyncio.run(small.adeepen(make_document(400), "The a is b."))


@pytest.mark.parametrize("teach", ["extract", "rewrite"])
def test_the_background_refiner_teaches_the_way_the_retriever_says(filled, teach):
    """refine_teach reaches the retriever's own refiner: "rewrite" asks the model for a
    rewrite, "extract" appends the source's sentence without one."""
    index, _, model = filled
    ret = retriever(index, model, refine_on_miss="background", refine_teach=teach)
    try:
        before = model.counts["rewrite"]
        assert not ret.retrieve("What is the lease item 6?").hit
        assert ret.background is not None and ret.background.wait_idle(timeout=30)
        assert [o.status for o in ret.background.outcomes] == ["published"]
        assert ret.background.refiner.teach == teach
        assert (model.counts["rewrite"] > before) == (teach == "rewrite")
    finally:
        ret.close()
    with pytest.raises(ValueError, match="refine_teach"):
        retriever(index, model, refine_teach="memorise")


def test_only_the_models_own_no_answer_records_a_silent_source(index):
    """A source is recorded silent on a query only when the model says it does not answer
    it; a reply whose answer is not in its quote, whose quote is not in the source, or
    that is no JSON, is rejected and records nothing, so no later miss of it is made worse."""
    replies = {
        "Who parks on the lawn?": json.dumps({"quote": "No one may park.", "answer": "Tom"}),
        "Who mows the lawn?": json.dumps({"quote": "Tom mows it.", "answer": "Tom"}),
        "Who waters the lawn?": "oops",
        "Who owns the lawn?": json.dumps({"quote": "", "answer": ""}),
    }
    model = ScriptedFakeModel(script={"source_answer": list(replies.values())})
    engine = ChainOfSummaries(model, CoSConfig.fast(iterations=0))
    text = make_document(4, topic="garden") + " No one may park on the lawn."
    doc = SourceDocument(doc_id="garden", text=text, source="garden.txt", title="Garden")
    asyncio.run(index.aingest([doc], engine))
    for q in replies:
        index.store.enqueue("garden", q)
    outcomes = refiner(index, engine, retarget=1).run_once()
    assert [o.status for o in outcomes] == ["rejected", "rejected", "rejected", "not_in_source"]
    assert "in_quote failed" in outcomes[0].reason and "quoted" in outcomes[1].reason
    assert "unreadable reply" in outcomes[2].reason
    assert [index.store.not_in_source("garden", q) for q in replies] == [False] * 3 + [True]
    assert all(index.store.answer_for(question_key(q)) is None for q in replies)
    # a quoted answer from the same source is taught as before: the quoted sentence
    index.store.enqueue("garden", "What is the garden item 3?")
    assert [(o.status, o.answer) for o in refiner(index, engine).run_once()] == [
        ("published", "value 3d")
    ]
    assert index.store.current_summary("garden").text.endswith("The garden item 3 is value 3d.")


SEASON = (
    "The lease item 0 is value 0a. Peyton Manning threw 9 touchdowns in the season. "
    "The lease item 1 is value 1b. In contrast, Brock Osweiler threw 10 touchdowns. "
    "Peyton Manning retired after the final. He threw 4 picks in the season."
)


def test_a_source_answer_teaches_the_sentences_its_quote_covers(index):
    """The reader quotes the sentence about Osweiler (the 1.5B model read Manning's figure
    off the sentence before it when it answered without a quote): the summary is taught
    that sentence, and a quote over two sentences teaches both."""
    model = ScriptedFakeModel(thesis_facts=1)
    engine = ChainOfSummaries(model, CoSConfig.fast(iterations=0))
    doc = SourceDocument(doc_id="season", text=SEASON, source="season.txt", title="Season")
    asyncio.run(index.aingest([doc], engine))
    quoted = {"quote": "Brock Osweiler threw 10 touchdowns", "answer": "10"}
    two = {"quote": "Peyton Manning retired after the final. He threw 4 picks", "answer": "4"}
    model.script["source_answer"] = [json.dumps(quoted), json.dumps(two)]
    model.script["answer"] = [None, _answers(model, "10"), None, _answers(model, "4")]
    q = "How many touchdowns did Brock Osweiler throw?"
    index.store.enqueue("season", q)
    (outcome,) = refiner(index, engine).run_once()
    assert (outcome.status, outcome.answer) == ("published", "10"), outcome.reason
    summary = index.store.current_summary("season").text
    assert summary.endswith("In contrast, Brock Osweiler threw 10 touchdowns.")
    index.store.enqueue("season", "How many picks did Peyton Manning throw?")
    (picks,) = refiner(index, engine).run_once()
    assert picks.status == "published"
    assert index.store.current_summary("season").text.endswith(
        "Peyton Manning retired after the final. He threw 4 picks in the season."
    )


def _answers(model, value: str):
    """The fake's answers to the bank, the missed question (asked first) answered ``value``
    (the summary says it in words the fake's fact pattern does not read)."""

    def reply(messages) -> str:
        rows = json.loads(model._answer(messages))["answers"]
        rows[0]["answer"] = value
        return json.dumps({"answers": rows})

    return reply


def test_the_router_learns_from_checks_where_summaries_may_answer(filled):
    """Issue 57: a new index starts cautious: a question the summary path would answer is
    checked (the chunks answer it; the summary's answer is compared with theirs when the
    caller gives it); once the checks say the summaries disagree with the source beyond
    the bound, questions go straight to the chunks with no judge call; once they say the
    summaries agree, the summary path serves."""
    from cos_integrations.serving.router import Router

    index, _, model = filled
    ret = retriever(index, model, max_error=0.02, refine_on_miss="off", answers=False)
    q = "What is the garden item 1?"  # the summary answers it (items 0-1)
    calls = len(model.calls)
    first = ret.answer(q)
    assert not first.hit and first.judge_answer == "value 1b"  # checked: the chunks answer
    assert first.answer == "value 1b" and first.usage.calls == 2  # the judge and the answer
    assert index.store.check_counts() == (1, 0) and len(model.calls) == calls + 2
    assert "a check" in first.reason and first.items[0].kind == "chunk"
    # the checks so far say the summaries disagree: straight to the chunks, no judge call
    for i in range(4):
        index.store.record_check("garden", f"q{i}", 0.9, "value 1b", "value 9z", False)
    quiet = [f"What is the garden item {i}?" for i in range(8)]
    chunked = [t for t in quiet if Router().mode(t, 5, 4) == "chunks"][0]
    calls = len(model.calls)
    res = ret.retrieve(chunked)
    assert not res.hit and res.checks["router"] is False and "the chunks" in res.reason
    assert len(model.calls) == calls and res.usage.calls == 0
    # they say the summaries agree (150 checks, none disagreeing): the summary path serves
    index.store.backend.execute("DELETE FROM checks")
    for i in range(150):
        index.store.record_check("garden", f"q{i}", 0.9, "value 1b", "value 1b", True)
    held = [f"{p}What is the garden item {i}?" for p in ("", "Say: ", "Tell me: ") for i in (0, 1)]
    served = [t for t in held if Router().mode(t, 150, 0) == "summary"][0]
    hit = ret.retrieve(served)
    assert hit.hit and hit.answer in ("value 0a", "value 1b") and hit.usage.calls == 1
    assert index.store.check_counts_by_document()["garden"] == (150, 0)
    # no router: the hit rule alone, as before 0.3
    assert retriever(index, model, max_error=None).retrieve(q).hit
    with pytest.raises(ValueError, match="max_error"):
        FallbackRetriever(index, max_error=1.5)


def test_the_routers_checks_fall_as_its_estimate_firms_up():
    """Issue 57: exploration falls as the estimate firms up. While it is uncertain every
    question is checked; once the bound is clearly missed (or met), the share checked falls
    under the floor and keeps falling with every check that confirms it, so a verdict more
    checks cannot change stops costing judge calls. The sample is a hash of the question:
    a smaller rate checks a subset of what a larger one checked."""
    from cos_integrations.serving.router import CHECK_FLOOR, Router

    router = Router(max_error=0.02)
    assert router.check_rate(2, 0) == 1.0  # uncertain: every question checked
    missed = [router.check_rate(n, n // 3) for n in (3, 9, 30, 90)]
    met = [router.check_rate(n, 0) for n in (150, 300, 600)]
    for rates in (missed, met):
        assert all(0.0 < r < CHECK_FLOOR for r in rates)
        assert rates == sorted(rates, reverse=True) and rates[-1] < rates[0] / 2
    asks = [f"What is item {i}?" for i in range(2000)]
    wide = {q for q in asks if router.mode(q, 150, 0) == "check"}
    narrow = {q for q in asks if router.mode(q, 600, 0) == "check"}
    assert narrow < wide and len(narrow) < 0.02 * len(asks) < len(wide)
    assert all(router.mode(q, 600, 0) == "summary" for q in set(asks) - narrow)
    assert all(router.mode(q, 9, 3) == "chunks" for q in asks[:50] if q not in wide)


def test_a_check_with_a_background_refiner_is_judged_off_the_callers_latency(filled):
    """Issue 57 item 1: where the retriever runs a background refiner, a check returns the
    chunks with no judge call on the caller's time; the summary path is judged on the
    refiner's thread once the caller's answer is in, and the outcome recorded as an
    inline check's would be (before: the judge's call came first, on the caller's time)."""
    index, _, model = filled
    ret = retriever(index, model, max_error=0.02, refine_on_miss="background", answers=False)
    q = "What is the garden item 1?"  # the summary answers it (items 0-1)
    try:
        calls = len(model.calls)
        first = ret.retrieve(q)
        assert not first.hit and first.check and "a check" in first.reason
        assert len(model.calls) == calls and first.usage.calls == 0  # no judge call
        assert first.judge_answer is None and first.items[0].kind == "chunk"
        meta = retrieval.item_metadata(first, first.items[0], "garden")
        assert meta["cos_check"] is True and "cos_summary_answer" not in meta
        ret.remember(first, "value 1b")  # the caller's answer from the chunks
        assert ret.background is not None and ret.background.wait_idle(timeout=30)
        assert "grounded" in [t for t, _ in model.calls[calls:]]  # judged, in the background
        assert index.store.check_counts() == (1, 0)
        # given back by a framework with the items alone, and not held: nothing to compare
        item = dataclasses.replace(first.items[0], metadata=meta)
        asyncio.run(ret.aremember_items("Unheld: " + q, [item], "value 9z"))
        assert index.store.check_counts() == (1, 0)
    finally:
        ret.close()


def test_an_answer_given_back_with_the_items_alone_teaches_as_the_result_would(filled, monkeypatch):
    """What a framework's chain or query engine gives back (the query, the items it was
    given, its answer) teaches the retriever as the result itself would: the retrieval's
    own result is held until the answer comes (aremember_items), so a rewording near a
    verified answer raises its bar when the answers differ (before, the frameworks rebuilt
    a result from the items without it)."""
    index, _, model = filled
    monkeypatch.setattr(retrieval, "ANSWER_CHECK_SIMILARITY", 0.5)  # hashing embedder's scale
    rule = UNREACHABLE.model_copy(update={"answer_similarity": 0.999})
    ret = retriever(index, model, rule=rule, refine_on_miss="off")
    assert ret.answer("Tell me: What is the garden item 6?").answer == "value 6g"
    other = "Tell me: What is the lease item 6?"
    found = ret.verified.nearest(index.embedder.embed_query(other), 0.0)
    r = ret.retrieve(other)
    assert r.near == (found[0].id, found[1])
    asyncio.run(ret.aremember_items(other, list(r.items), "value 6l"))
    raised = index.store.answers_by_id([found[0].id])[found[0].id]
    assert raised.bar is not None and raised.bar > found[1]
    # nothing held for a query retrieved elsewhere: the items alone, no bar to learn
    assert asyncio.run(ret.aremember_items("Unseen?", [], "x")) is None
