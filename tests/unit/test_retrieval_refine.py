"""Fallback retrieval and miss-triggered refinement over a real Chroma index."""

import asyncio
import json

import pytest
from fakes import ScriptedFakeModel, facts, make_document

from cos_integrations import ChainOfSummaries, CoSConfig
from cos_integrations.loaders import SourceDocument
from cos_integrations.serving import retrieval
from cos_integrations.serving.hit_rule import GROUNDING_CHECKS, HitRule
from cos_integrations.serving.refine import BackgroundRefiner, Refiner
from cos_integrations.serving.retrieval import FallbackRetriever
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
    return FallbackRetriever(index, llm=model, k=2, rule=rule, **kw)


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
    outcomes = Refiner(index, engine).run_once()
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


# the usual route never hits (threshold 0.99): only a repeat of an answered miss can
UNREACHABLE = SUMMARY_ONLY.model_copy(update={"threshold": 0.99, "answered_misses": True})


def test_a_miss_whose_source_answered_it_hits_when_asked_again(filled):
    """Issue 26 item 5: the repeat goes to the document whose source answered it, past the
    threshold; an unseen query does not, and the rule can turn it off."""
    index, engine, model = filled
    ret = retriever(index, model, rule=UNREACHABLE)
    q = "What is the parking item 7?"
    first = ret.retrieve(q)
    assert not first.hit and first.reason.startswith("best similarity")
    assert not ret.retrieve(q).hit  # no job has run yet
    assert index.store.answered_miss(q) is None
    assert [o.status for o in Refiner(index, engine).run_once()] == ["published"]
    found = index.store.answered_miss("  what is the PARKING item 7 ")  # normalised
    assert found == ("parking", ["value 7h"])
    again = ret.retrieve(q)
    assert again.hit and again.answer == "value 7h" and again.checks["answered_miss"]
    # the source's answering sentence in front of the summary that now holds it too
    assert [(h.doc_id, h.kind) for h in again.items] == [
        ("parking", "chunk"),
        ("parking", "summary"),
    ]
    assert index.store.event_counts()["hit"] == 1
    assert not ret.retrieve("What is the parking item 6?").hit  # never asked: the usual route
    off = UNREACHABLE.model_copy(update={"answered_misses": False})
    assert not retriever(index, model, rule=off).retrieve(q).hit
    assert HitRule().answered_misses is True  # measured (tiered-5-agree): the default
    # a recorded document outside the top-k: its summary read by id, as a search returns it
    emb = index.embedder.embed_query(q)
    far = index.summary_hit("lease", emb)
    assert far.doc_id == "lease" and far.kind == "summary" and far.id == "lease::summary::v1"
    searched = [h for h in index.search_summaries(q, 3, embedding=emb) if h.doc_id == "lease"]
    assert far.score == pytest.approx(searched[0].score, abs=1e-4)


def test_an_answered_miss_still_needs_the_judge(filled):
    """The recorded document is where the query goes, not a hit by itself: when its summary
    cannot answer, the judge's checks keep it a miss."""

    index, _, model = filled
    q = "What is the garden item 6?"
    pair = QAPair(question=q, answers=["value 6g"], split="train", origin="miss")
    index.store.add_question("lease", pair)  # recorded on a document that does not say it
    r = retriever(index, model, rule=UNREACHABLE).retrieve(q)
    assert not r.hit and r.checks.get("answered_miss") and r.checks["answered"] is False
    assert r.items and r.items[0].kind == "chunk"  # the usual fallback answers it


def test_an_answered_miss_reads_the_sentence_its_source_answered_with(filled):
    """The repeat's context holds the source sentence that answered the miss (found again
    in the stored text) even when no teaching put it in the summary: the judge reads it."""
    from cos_integrations.summarize.questions import QAPair

    index, _, model = filled
    q = "Tell me: What is the garden item 6?"  # not a bank question already
    assert "value 6g" not in index.store.current_summary("garden").text
    pair = QAPair(question=q, answers=["value 6g"], split="train", origin="miss")
    index.store.add_question("garden", pair)  # a refine job found it; its teaching was rejected
    r = retriever(index, model, rule=UNREACHABLE).retrieve(q)
    assert r.hit and r.answer == "value 6g" and r.checks["evidence"]
    evidence = r.items[0]
    assert evidence.kind == "chunk" and evidence.metadata["cos_evidence"] is True
    assert evidence.doc_id == "garden" and evidence.text == "The garden item 6 is value 6g."
    assert "value 6g" not in "".join(h.text for h in r.items[1:])
    # the source no longer says it (the answer recorded is not in it): no evidence, a miss
    pair = QAPair(question="Say: What is the lease item 5?", answers=["value 9z"], origin="miss")
    index.store.add_question("lease", pair)
    gone = retriever(index, model, rule=UNREACHABLE).retrieve(pair.question)
    assert not gone.hit and gone.checks["evidence"] is False


def test_an_answered_miss_hits_only_with_the_jobs_answer(filled):
    """A repeat of an answered miss hits only when the judge gives the answer the refine
    job found in the full source (``agrees``): a grounded answer that is not the source's
    is a miss, and the repeat reads the source chunks as its first ask did."""
    from cos_integrations.summarize.questions import QAPair

    index, _, model = filled
    q = "Tell me quickly please, for the records: What is the garden item 6?"
    pair = QAPair(question=q, answers=["value 6g"], split="train", origin="miss")
    index.store.add_question("garden", pair)
    r = retriever(index, model, rule=UNREACHABLE).retrieve(q)
    assert r.hit and r.answer == "value 6g" and r.checks["agrees"] is True
    # recorded with another answer of the same source (item 5's): the judge reads the
    # summary's item 1 and gives its value, grounded in the source, not the job's answer
    other = "Tell me quickly please, for the files: What is the garden item 1?"
    wrong = QAPair(question=other, answers=["value 5f"], split="train", origin="miss")
    index.store.add_question("garden", wrong)
    r = retriever(index, model, rule=UNREACHABLE).retrieve(other)
    assert r.checks["answered_miss"] and r.checks["evidence"] and r.checks["agrees"] is False
    assert r.judge_answer == "value 1b" and all(r.checks[c] for c in GROUNDING_CHECKS)
    assert not r.hit and "agrees failed" in r.reason
    assert r.items and all(h.kind == "chunk" for h in r.items)  # the source chunks


def test_a_paraphrase_of_an_answered_miss_takes_its_route_when_the_answers_agree(
    filled, monkeypatch
):
    """PARAPHRASE_SIMILARITY: a query this close to an answered miss's question goes to
    its document too, and hits only when the judge's answer is the refine job's; one that
    is as close but asks something else goes the usual way (its judge call counted)."""
    from cos_integrations.summarize.questions import QAPair

    index, _, model = filled
    asked = "Tell me: What is the garden item 6?"
    pair = QAPair(question=asked, answers=["value 6g"], split="train", origin="miss")
    index.store.add_question("garden", pair)
    assert [row[1:] for row in index.store.answered_misses()] == [(asked, "garden", ["value 6g"])]
    paraphrase = "Tell me please: What is the garden item 6?"  # hashing cosine 0.88
    assert retrieval.PARAPHRASE_SIMILARITY == 0.95  # measured (tiered-5-para2)
    assert not retriever(index, model, rule=UNREACHABLE).retrieve(paraphrase).hit  # too far
    monkeypatch.setattr(retrieval, "PARAPHRASE_SIMILARITY", 0.85)
    near = UNREACHABLE
    r = retriever(index, model, rule=near).retrieve(paraphrase)
    assert r.hit and r.answer == "value 6g"
    assert r.checks["answered_miss"] and r.checks["paraphrase"] and r.checks["agrees"]
    assert r.items[0].metadata["cos_evidence"] is True
    # as close, another item: the judge reads item 6's sentence and does not give its answer
    calls = len(model.calls)
    other = retriever(index, model, rule=near).retrieve("Tell me: What is the garden item 5?")
    assert not other.hit and "paraphrase" not in other.checks
    assert other.reason.startswith("best similarity")  # the usual route decided
    assert other.usage.calls == len(model.calls) - calls == 1  # the paraphrase's judge call
    # another item the summary holds: a right answer, but not the job's, so not by this
    # route; the usual one (here reachable) hits with it, two judge calls in all
    reachable = near.model_copy(update={"threshold": 0.1})
    item1 = retriever(index, model, rule=reachable).retrieve("Tell me: What is the garden item 1?")
    assert item1.hit and item1.answer == "value 1b" and "paraphrase" not in item1.checks
    assert item1.usage.calls == 2
    calls = len(model.calls)
    # too far for the bar: the usual route, no judge call
    monkeypatch.setattr(retrieval, "PARAPHRASE_SIMILARITY", 0.9)
    assert not retriever(index, model, rule=near).retrieve(paraphrase).hit
    assert len(model.calls) == calls
    monkeypatch.setattr(retrieval, "PARAPHRASE_SIMILARITY", 0.85)
    # a later answered miss is read in as it comes (the retriever keeps its vectors)
    ret = retriever(index, model, rule=near)
    assert not ret.retrieve("Tell me please: What is the lease item 5?").hit
    late = QAPair(
        question="Tell me: What is the lease item 5?", answers=["value 5f"], origin="miss"
    )
    index.store.add_question("lease", late)
    assert len(index.store.answered_misses(after=index.store.answered_misses()[0][0])) == 1
    assert ret.retrieve("Tell me please: What is the lease item 5?").hit


def test_a_silent_source_sends_the_job_to_the_next_document(filled):
    """retarget: a job sent to a document whose source is silent goes on to the next
    document of the collection's chunk ranking for the query, in the same pass."""
    index, engine, model = filled
    q = "Tell me: What is the garden item 6?"  # not a bank question already
    assert index.store.enqueue("lease", q) is not None  # the fallback's top chunk was lease's
    only_its_own = Refiner(index, engine, retarget=1).run_once()
    assert [o.status for o in only_its_own] == ["not_in_source"]
    assert index.store.answered_miss(q) is None  # retarget=1: lease only
    index.store.enqueue("parking", q)
    first, second = Refiner(index, engine).run_once()  # the default: 3 documents
    assert (first.doc_id, first.status) == ("parking", "not_in_source")
    assert "queued for garden" in first.reason
    assert (second.doc_id, second.status, second.answer) == ("garden", "published", "value 6g")
    assert index.store.answered_miss(q) == ("garden", ["value 6g"])
    # asked nowhere in the sources: every document of the ranking is tried once, then it stops
    nowhere = "Tell me: What is the garden item 99?"
    index.store.enqueue("garden", nowhere)
    outcomes = Refiner(index, engine).run_once()
    assert sorted(o.doc_id for o in outcomes) == sorted(TOPICS)
    assert {o.status for o in outcomes} == {"not_in_source"}
    assert all(index.store.not_in_source(t, nowhere) for t in TOPICS)
    with pytest.raises(ValueError, match="retarget"):
        Refiner(index, engine, retarget=0)


def test_not_in_source_is_remembered(filled):
    index, engine, model = filled
    ret = FallbackRetriever(index, llm=model, k=1, rule=SUMMARY_ONLY)
    q = "What is the lease item 99?"
    first = ret.retrieve(q)
    assert not first.hit and first.items
    (outcome,) = Refiner(index, engine, retarget=1).run_once()  # lease's source only
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
    (outcome,) = Refiner(index, engine, teach="rewrite").run_once()
    assert outcome.status == "published" and model.counts["fact"] == 1
    current = index.store.current_summary("lease").text
    assert current.endswith("The lease item 7 is value 7h.")
    assert current.startswith(index.store.versions("lease")[0].text)


def test_rewrite_and_fact_that_do_not_answer_are_rejected(filled):
    index, engine, model = filled
    model.rewrite_adds = False
    model.script["fact"] = ["The weather is nice."] * 3
    retriever(index, model).retrieve("What is the lease item 7?")
    outcome, *others = Refiner(index, engine, teach="rewrite").run_once()
    assert outcome.status == "rejected" and "still does not answer" in outcome.reason
    assert {o.status for o in others} == {"not_in_source"}  # then tried down the ranking
    assert index.store.current_summary("lease").version == 1


def test_extract_appends_the_source_sentence_without_a_rewrite(filled):
    index, engine, model = filled
    model.rewrite_adds = False  # no rewrite could teach it: the source's sentence does
    retriever(index, model).retrieve("What is the lease item 7?")
    (outcome,) = Refiner(index, engine).run_once()
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
    (outcome,) = Refiner(index, engine, teach="both").run_once()
    assert outcome.status == "published" and model.counts["rewrite"] == 1
    assert "value 7h" in index.store.current_summary("lease").text


def test_extract_skips_a_sentence_the_summary_already_holds(filled):
    index, engine, model = filled
    summary = index.store.current_summary("lease").text
    assert "The lease item 0 is value 0a." in summary
    index.store.enqueue("lease", "What is the lease item 0?")
    (outcome,) = Refiner(index, engine).run_once()  # the default: extract only
    assert outcome.status == "rejected" and model.counts["rewrite"] == 0
    assert "The parking item 0 is value 0a." in index.store.current_summary("parking").text
    index.store.enqueue("parking", "What is the parking item 0?")
    Refiner(index, engine, teach="both").run_once()
    assert model.counts["rewrite"] == 1  # nothing to append: the rewrite was asked


def test_extract_only_rejects_what_no_source_sentence_teaches(filled):
    index, engine, model = filled
    retriever(index, model).retrieve("What is the lease item 7?")
    model.script["answer"] = [None, _unknown_answers]
    outcome, *others = Refiner(index, engine, teach="extract").run_once()
    assert outcome.status == "rejected" and outcome.reason.startswith(STILL_MISSES)
    assert (model.counts["rewrite"], model.counts["fact"]) == (0, 0)
    assert index.store.current_summary("lease").version == 1
    # it taught nothing, so the query went on down the ranking: silent everywhere else
    assert "queued for" in outcome.reason
    assert sorted(o.doc_id for o in others) == ["garden", "parking"]
    assert {o.status for o in others} == {"not_in_source"}
    assert index.store.answered_miss("What is the lease item 7?") == ("lease", ["value 7h"])


def test_a_source_answer_that_teaches_nothing_sends_the_job_to_the_next_document(
    filled, monkeypatch
):
    """Issue 26 item 5 (tiered-5-retry): a source that answers from a sibling passage's fact
    (here: lease's "item 6" for the garden's) teaches its summary nothing; the query goes on
    to the next document, and a repeat goes where a summary was taught, not to the first
    reader."""
    index, engine, model = filled
    q = "Tell me: What is the garden item 6?"
    index.store.enqueue("lease", q)  # the collection's top chunk was lease's
    # lease's reader quotes a sentence it has (its item 6) and answers with garden's value
    sibling = {"quote": "The lease item 6 is value 6g.", "answer": "value 6g"}
    model.script["source_answer"] = [json.dumps(sibling)]
    first, *rest = Refiner(index, engine).run_once()
    assert (first.doc_id, first.status) == ("lease", "rejected")
    assert first.reason.startswith(STILL_MISSES) and "queued for" in first.reason
    taught = [o for o in rest if o.status == "published"]
    assert [(o.doc_id, o.answer) for o in taught] == [("garden", "value 6g")]
    assert [row[2] for row in index.store.answered_misses()] == ["lease", "garden"]
    assert index.store.answered_miss(q) == ("garden", ["value 6g"])  # taught, though later
    ret = retriever(index, model, rule=UNREACHABLE)
    again = ret.retrieve(q)
    assert again.hit and again.items[0].doc_id == "garden" and again.answer == "value 6g"
    # two sources answered, no summary taught: the first reader (the chunk ranking's best)
    other = "Tell me: What is the parking item 5?"
    for doc_id in ("parking", "lease"):
        pair = QAPair(question=other, answers=[f"{doc_id} 5"], split="train", origin="miss")
        index.store.add_question(doc_id, pair)
    assert index.store.answered_miss(other) == ("parking", ["parking 5"])
    # a paraphrase of it takes the same route
    monkeypatch.setattr(retrieval, "PARAPHRASE_SIMILARITY", 0.85)
    para = retriever(index, model, rule=UNREACHABLE).retrieve(
        "Tell me please: What is the garden item 6?"
    )
    assert para.hit and para.checks["paraphrase"] and para.items[0].doc_id == "garden"


def test_teach_must_be_a_known_mode(filled):
    index, engine, _ = filled
    with pytest.raises(ValueError, match="teach must be one of"):
        Refiner(index, engine, teach="paraphrase")


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
    (outcome,) = Refiner(index, engine).run_once()
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
    refiner = Refiner(index, ChainOfSummaries(Down(), CoSConfig.fast()), max_attempts=2)
    assert [o.status for o in refiner.run_once(max_jobs=1)] == ["failed"]
    assert [o.status for o in refiner.run_once(max_jobs=1)] == ["dead"]
    assert refiner.run_once() == []
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
    with BackgroundRefiner(Refiner(index, engine), idle_poll=0.05) as bg:
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
    refiner = Refiner(index, engine)
    assert refiner.deepen_candidates() == ["parking", "lease"]  # misses first; garden: none
    before = len(model.calls)
    outcomes = refiner.deepen(strategy="cos-extract")
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
    assert index.store.questions("parking") and refiner.deepen_candidates() == []
    assert refiner.deepen() == []
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
    outcome = Refiner(index, engine).deepen()[0]
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
    outcomes = Refiner(index, engine, retarget=1).run_once()
    assert [o.status for o in outcomes] == ["rejected", "rejected", "rejected", "not_in_source"]
    assert "in_quote failed" in outcomes[0].reason and "quoted" in outcomes[1].reason
    assert "unreadable reply" in outcomes[2].reason
    assert [index.store.not_in_source("garden", q) for q in replies] == [False] * 3 + [True]
    assert all(index.store.answered_miss(q) is None for q in replies)
    # a quoted answer from the same source is taught as before: the quoted sentence
    index.store.enqueue("garden", "What is the garden item 3?")
    assert [(o.status, o.answer) for o in Refiner(index, engine).run_once()] == [
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
    (outcome,) = Refiner(index, engine).run_once()
    assert (outcome.status, outcome.answer) == ("published", "10"), outcome.reason
    summary = index.store.current_summary("season").text
    assert summary.endswith("In contrast, Brock Osweiler threw 10 touchdowns.")
    index.store.enqueue("season", "How many picks did Peyton Manning throw?")
    (picks,) = Refiner(index, engine).run_once()
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
