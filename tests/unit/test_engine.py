"""The CoS loop, driven by a fake model that reads the prompts it is sent."""

import asyncio
import logging

import pytest
from fakes import ScriptedFakeModel, facts, make_document

from cos_integrations import (
    ChainOfSummaries,
    CoSConfig,
    CoSModelError,
    CoSOutputError,
    CoSResult,
    QAPair,
)
from cos_integrations.summarize.engine import select_iteration
from cos_integrations.summarize.result import IterationRecord

DOC = make_document(15)


def run(coro):
    return asyncio.run(coro)


def test_paper_config_one_answer_call_per_round_and_best_summary():
    model = ScriptedFakeModel(thesis_facts=2)
    result = ChainOfSummaries(model, CoSConfig.paper()).summarize(DOC, doc_id="d1")
    counts = model.counts
    # 1 thesis + 1 question call + 1 evaluation of the thesis + 10 x (rewrite + evaluation)
    assert counts["thesis"] == 1 and counts["questions"] == 1
    assert counts["rewrite"] == len(result.iterations) - 1
    assert counts["answer"] == len(result.iterations)
    assert result.usage.calls == len(model.calls) <= 23
    # Every evaluation asks all 15 questions in one call.
    answer_prompts = [m for t, m in model.calls if t == "answer"]
    assert all(p[-1]["content"].count("What is the") == 15 for p in answer_prompts)
    # The chosen summary is the best on validation and answers more than the thesis.
    best = result.best
    assert best.val_score == max(i.val_score for i in result.iterations if i.val_score is not None)
    assert best.train_score > result.iterations[0].train_score
    assert len(facts(result.summary)) > 2
    assert [q.split for q in result.questions].count("val") == 5
    assert result.doc_id == "d1" and result.config_hash == CoSConfig.paper().config_hash()
    # usage by call type: what the fake model saw, each call counted once
    by = result.usage_by_task
    assert {t: u.calls for t, u in by.items()} == {
        "thesis": counts["thesis"],
        "questions": counts["questions"],
        "answers": counts["answer"],
        "rewrite": counts["rewrite"],
    }
    assert sum(u.prompt_tokens for u in by.values()) == result.usage.prompt_tokens


def test_rewrite_sees_source_summary_and_unanswered_question():
    model = ScriptedFakeModel(thesis_facts=1)
    cfg = CoSConfig.cos(iterations=1, questions_per_iteration=1, train_questions=3, val_questions=1)
    result = ChainOfSummaries(model, cfg).summarize(make_document(4))
    ((task, msgs),) = [(t, m) for t, m in model.calls if t == "rewrite"]
    asked = result.iterations[1].questions_used
    assert len(asked) == 1 and asked[0] in msgs[-1]["content"]
    assert result.iterations[0].summary in msgs[-1]["content"]
    # the asked question was unanswered by the thesis
    thesis_scores = {s.question: s.answered for s in result.iterations[0].scores}
    assert thesis_scores[asked[0]] is False


def test_rewrite_skipped_when_nothing_is_unanswered():
    model = ScriptedFakeModel(thesis_facts=100)  # the thesis already holds every fact
    result = ChainOfSummaries(model, CoSConfig.paper()).summarize(DOC)
    assert model.counts["rewrite"] == 0
    assert result.usage.calls == 3
    assert result.stop_reason == "all refinement questions answered"
    assert result.best_iteration == 0 and result.best.val_score == 1.0


def test_worse_rewrite_is_recorded_but_never_returned_or_built_on():
    doc = make_document(6)
    # First rewrite throws facts away (validation drops), later rewrites behave.
    garbled = "Updated Summary: " + " ".join(f"The lease item {i} is lost." for i in range(6))
    model = ScriptedFakeModel(thesis_facts=3, script={"rewrite": [garbled]})
    cfg = CoSConfig.cos(
        iterations=3, questions_per_iteration=1, train_questions=3, val_questions=3, seed=3
    )
    result = ChainOfSummaries(model, cfg).summarize(doc)
    bad = result.iterations[1]
    assert bad.summary == garbled.removeprefix("Updated Summary: ") and bad.accepted is False
    assert bad.val_score < result.iterations[0].val_score
    assert "lost" not in result.summary
    # The next rewrite started from the thesis, not from the rejected text.
    second = [m for t, m in model.calls if t == "rewrite"][1]
    assert result.iterations[0].summary in second[-1]["content"]


def test_early_stop_after_patience_when_rewrites_do_not_help():
    model = ScriptedFakeModel(thesis_facts=1, rewrite_adds=False)
    cfg = CoSConfig.cos(
        iterations=10, questions_per_iteration=5, train_questions=4, val_questions=2, patience=2
    )
    result = ChainOfSummaries(model, cfg).summarize(make_document(6))
    assert model.counts["rewrite"] == 2
    assert result.stop_reason.startswith("no validation gain")
    assert result.best_iteration == 0  # ties go to the shorter/earlier summary


def test_ties_go_to_the_shorter_summary():
    def padded(messages):
        # Answers every question, but with padding: as good as the thesis, and longer.
        return f"Updated Summary: {_between_summary(messages)} Padding words here."

    model = ScriptedFakeModel(thesis_facts=1, script={"rewrite": [padded]})
    cfg = CoSConfig.cos(iterations=1, questions_per_iteration=1, train_questions=2, val_questions=1)
    # 3 facts, the thesis holds 1: a refinement question is unanswered. The padded rewrite
    # adds nothing, so it ties the thesis on validation and loses on length.
    result = ChainOfSummaries(model, cfg).summarize(make_document(3))
    (rewrite,) = [it for it in result.iterations if it.kind == "rewrite"]
    assert "Padding" in rewrite.summary and rewrite.accepted
    assert rewrite.val_score == result.iterations[0].val_score
    assert result.best_iteration == 0 and "Padding" not in result.summary

    its = [
        IterationRecord(index=0, kind="thesis", summary="a b c d", val_score=0.5),
        IterationRecord(index=1, kind="rewrite", summary="a b", val_score=0.5),
        IterationRecord(index=2, kind="rewrite", summary="a", val_score=0.4),
        IterationRecord(index=3, kind="rewrite", summary="z", val_score=0.9, accepted=False),
    ]
    assert select_iteration(its).index == 1
    # a validation tie goes to the better refinement score before the shorter summary
    its[0].train_score, its[1].train_score = 0.75, 0.25
    assert select_iteration(its).index == 0


def _between_summary(messages):
    content = messages[-1]["content"]
    return content.split("<summary>\n", 1)[1].split("\n</summary>", 1)[0]


@pytest.mark.parametrize("fmt", ["json", "prose-json", "lines"])
def test_question_formats_all_parse(fmt):
    model = ScriptedFakeModel(qa_format=fmt)
    result = ChainOfSummaries(model, CoSConfig.fast()).summarize(make_document(8))
    assert len(result.questions) == 7
    assert all(q.origin == "synthetic" for q in result.questions)


def test_structured_output_requested_for_questions_and_answers():
    model = ScriptedFakeModel()
    ChainOfSummaries(model, CoSConfig.fast()).summarize(make_document(8))
    schemas = {t: s for (t, _), s in zip(model.calls, model.json_schemas, strict=True)}
    assert schemas["questions"]["name"] == "qa_pairs"
    assert schemas["answer"]["name"] == "answers"
    assert schemas["thesis"] is None


def test_unparseable_answers_recorded_as_failed_with_raw_output(caplog):
    garbage = "I refuse to answer in any format."
    # thesis evaluation fine, then every answer call for round 1 is garbage (1 + 1 retry)
    model = ScriptedFakeModel(thesis_facts=1, script={"answer": [None, garbage, garbage]})
    cfg = CoSConfig.cos(iterations=1, questions_per_iteration=1, train_questions=3, val_questions=2)
    with caplog.at_level(logging.WARNING):
        result = ChainOfSummaries(model, cfg).summarize(make_document(6), doc_id="x")
    failed = result.iterations[1]
    assert failed.failed and failed.raw_output == garbage and not failed.accepted
    assert result.best_iteration == 0
    assert any("unparseable answers" in r.message for r in caplog.records)
    assert any("unparseable" in w for w in result.warnings)


@pytest.mark.parametrize("bad", ["", "   ", '```json\n{"pairs": [\n```', "Q: only a question?"])
def test_unparseable_questions_return_the_thesis(bad):
    model = ScriptedFakeModel(script={"questions": [bad, bad]})
    result = ChainOfSummaries(model, CoSConfig.fast()).summarize(make_document(8))
    assert result.summary == result.iterations[0].summary
    assert result.stop_reason == "no questions"
    assert model.counts["questions"] == 2  # one retry


def test_question_retry_asks_only_for_the_missing_ones():
    one = '{"pairs": [{"question": "What is the lease item 0?", "answer": "value 0a"}]}'
    model = ScriptedFakeModel(script={"questions": [one]})
    result = ChainOfSummaries(model, CoSConfig.fast()).summarize(make_document(8))
    second = [m for t, m in model.calls if t == "questions"][1][-1]["content"]
    assert "Generate 6 " in second and "What is the lease item 0?" in second
    assert len(result.questions) == 7


def test_empty_thesis_raises_typed_error_after_retry():
    model = ScriptedFakeModel(script={"thesis": ["", "  "]})
    with pytest.raises(CoSOutputError, match="empty summary"):
        ChainOfSummaries(model).summarize(DOC, doc_id="doc-7")


def test_bad_input():
    cos = ChainOfSummaries(ScriptedFakeModel())
    with pytest.raises(ValueError, match="doc-9"):
        cos.summarize("   \n", doc_id="doc-9")
    with pytest.raises(TypeError, match="bytes"):
        cos.summarize(b"bytes")  # type: ignore[arg-type]


def test_model_error_carries_document_id():
    class Broken:
        async def chat(self, messages, **kw):
            raise CoSModelError("model x failed: HTTP 503", status=503, attempts=5)

    with pytest.raises(CoSModelError) as info:
        ChainOfSummaries(Broken()).summarize(DOC, doc_id="doc-3")
    assert info.value.doc_id == "doc-3" and info.value.status == 503
    assert "doc-3" in str(info.value)


def test_foreign_exception_becomes_model_error():
    class Raises:
        async def chat(self, messages, **kw):
            raise RuntimeError("socket closed")

    with pytest.raises(CoSModelError, match="socket closed"):
        ChainOfSummaries(Raises()).summarize(DOC, doc_id="d")


def test_human_questions_replace_synthetic():
    human = [
        QAPair(question=f"What is the lease item {i}?", answers=[f"value {i}{chr(97 + i)}"])
        for i in range(5)
    ]
    model = ScriptedFakeModel(thesis_facts=1)
    result = ChainOfSummaries(model, CoSConfig.fast()).summarize(make_document(8), questions=human)
    assert model.counts["questions"] == 0
    assert {q.origin for q in result.questions} == {"human"}
    assert len(result.questions) == 5 and any(q.split == "val" for q in result.questions)


def test_human_questions_alongside_synthetic():
    human = [QAPair(question="What is the lease item 7?", answers=["value 7h"], split="val")]
    model = ScriptedFakeModel()
    cfg = CoSConfig.fast(human_questions="add")
    result = ChainOfSummaries(model, cfg).summarize(make_document(8), questions=human)
    origins = [q.origin for q in result.questions]
    assert origins.count("human") == 1 and origins.count("synthetic") >= 6
    # the human question is not asked twice
    assert sum(q.question == "What is the lease item 7?" for q in result.questions) == 1


def test_focus_steers_question_generation():
    model = ScriptedFakeModel()
    ChainOfSummaries(model, CoSConfig.fast(focus=["deadlines", "money"])).summarize(DOC)
    prompt = next(m for t, m in model.calls if t == "questions")[-1]["content"]
    assert "Focus on: deadlines, money." in prompt


def test_document_first_and_byte_identical_across_calls():
    model = ScriptedFakeModel(thesis_facts=1)
    result = ChainOfSummaries(model, CoSConfig.fast()).summarize(DOC)
    source_calls = [m for t, m in model.calls if t in ("thesis", "questions", "rewrite")]
    assert len(source_calls) >= 3
    firsts = {m[0]["content"] for m in source_calls}
    assert len(firsts) == 1 and DOC in firsts.pop()
    assert all(DOC not in m[-1]["content"] for m in source_calls)
    assert result.usage.cached_tokens > 0


def test_usage_is_the_sum_of_call_usages():
    model = ScriptedFakeModel(thesis_facts=1)
    result = ChainOfSummaries(model, CoSConfig.fast()).summarize(DOC)
    prompt = sum(sum(len(x["content"]) for x in m) // 4 for _, m in model.calls)
    assert result.usage.calls == len(model.calls)
    assert result.usage.prompt_tokens == prompt
    assert result.usage.completion_tokens > 0
    assert result.source_tokens > result.summary_tokens > 0


def test_zero_shot_and_mini_are_one_call():
    for strategy in ("zero-shot", "mini"):
        model = ScriptedFakeModel()
        result = ChainOfSummaries(model, CoSConfig(strategy=strategy)).summarize(DOC)
        assert result.usage.calls == 1 and result.strategy == strategy
        assert facts(result.summary)
    assert (
        len(
            facts(
                ChainOfSummaries(ScriptedFakeModel(), CoSConfig(strategy="mini"))
                .summarize(DOC)
                .summary
            )
        )
        == 6
    )


def test_density_keeps_length_adds_entities_and_lists_them():
    model = ScriptedFakeModel()
    result = ChainOfSummaries(model, CoSConfig(strategy="density", density_rounds=4)).summarize(DOC)
    assert model.counts["density"] == 4
    assert result.iterations[0].missing_entities == []
    assert all(len(it.missing_entities) == 2 for it in result.iterations[1:])
    lengths = {len(facts(it.summary)) for it in result.iterations}
    assert lengths == {3}  # fixed budget
    assert result.best_iteration == 3
    first, last = facts(result.iterations[0].summary), facts(result.summary)
    assert set(first) != set(last)


def test_cos_draft_uses_chain_of_draft_rule_and_parses_after_separator():
    model = ScriptedFakeModel(thesis_facts=1)
    result = ChainOfSummaries(model, CoSConfig.fast(strategy="cos-draft")).summarize(DOC)
    rewrite = next(m for t, m in model.calls if t == "rewrite")[-1]["content"]
    assert "5 words at most" in rewrite and "####" in rewrite
    assert result.strategy == "cos-draft"
    assert all("copy from doc" not in it.summary for it in result.iterations)
    assert result.best.train_score > result.iterations[0].train_score


def test_long_document_split_into_sections_then_merged():
    doc = "\n\n".join(make_document(30, topic=f"part{i}") for i in range(6))
    model = ScriptedFakeModel(thesis_facts=1)
    cfg = CoSConfig.fast(context_tokens=1600, max_output_tokens=300)
    result = ChainOfSummaries(model, cfg).summarize(doc, doc_id="long")
    assert len(result.sections) >= 2
    assert model.counts["merge"] >= 1
    # questions come from every section, and the merged summary covers first and last part
    for section in result.sections:
        section_facts = {
            f"What is the {k}?" for k in facts(" ".join(it.summary for it in section.iterations))
        }
        assert section.questions and {q.question for q in section.questions} & section_facts
        assert {q.question for q in section.questions} <= {q.question for q in result.questions}
    first_topic = result.sections[0].questions[0].question.split()[3]
    last_topic = result.sections[-1].questions[0].question.split()[3]
    assert first_topic != last_topic
    assert any(k.startswith(first_topic) for k in facts(result.summary))
    assert any(k.startswith(last_topic) for k in facts(result.summary))
    # no call carried more than the budget of source text
    assert all(len(m[0]["content"]) / 3.6 < 1600 for _, m in model.calls)
    assert result.usage.calls == len(model.calls)


def test_summarize_many_bounded_concurrency_in_order():
    class Slow(ScriptedFakeModel):
        inflight = peak = 0

        async def chat(self, messages, **kw):
            Slow.inflight += 1
            Slow.peak = max(Slow.peak, Slow.inflight)
            await asyncio.sleep(0.005)
            try:
                return await super().chat(messages, **kw)
            finally:
                Slow.inflight -= 1

    docs = [make_document(5, prefix=f"d{i} ") for i in range(6)]
    cos = ChainOfSummaries(Slow(), CoSConfig(strategy="zero-shot"))
    seen = []
    results = run(
        cos.asummarize_many(
            docs,
            concurrency=2,
            doc_ids=[f"id{i}" for i in range(6)],
            on_result=lambda i, r: seen.append(i),
        )
    )
    assert [r.doc_id for r in results] == [f"id{i}" for i in range(6)]
    assert all(f"d{i} value" in r.summary for i, r in enumerate(results))
    assert Slow.peak == 2 and sorted(seen) == list(range(6))


def test_summarize_many_return_exceptions_keeps_others():
    cos = ChainOfSummaries(ScriptedFakeModel(), CoSConfig(strategy="zero-shot"))
    results = run(cos.asummarize_many([DOC, "  ", DOC], return_exceptions=True))
    assert isinstance(results[1], ValueError)
    assert isinstance(results[0], CoSResult) and isinstance(results[2], CoSResult)


async def test_sync_api_works_inside_a_running_loop():
    cos = ChainOfSummaries(ScriptedFakeModel(), CoSConfig(strategy="zero-shot"))
    assert cos.summarize(DOC).summary


def test_result_json_round_trip():
    result = ChainOfSummaries(ScriptedFakeModel(thesis_facts=1), CoSConfig.fast()).summarize(DOC)
    again = CoSResult.model_validate_json(result.model_dump_json())
    assert again == result and again.best.val_score == result.val_score


def test_unchanged_rewrite_is_not_evaluated_again():
    def same(messages):
        return f"Updated Summary: {_between_summary(messages)}"

    model = ScriptedFakeModel(thesis_facts=1, script={"rewrite": [same]})
    cfg = CoSConfig.cos(iterations=1, questions_per_iteration=1, train_questions=2, val_questions=1)
    result = ChainOfSummaries(model, cfg).summarize(make_document(3))
    assert model.counts["rewrite"] == 1 and model.counts["answer"] == 1
    unchanged = result.iterations[1]
    assert unchanged.summary == result.iterations[0].summary and not unchanged.accepted
    assert unchanged.val_score == result.iterations[0].val_score
    assert result.best_iteration == 0


def test_rewrite_that_drops_the_summary_is_appended_not_replacing():
    def only_new(messages):
        doc = facts(messages[0]["content"])
        asked = messages[-1]["content"].split("Questions to address:\n", 1)[1]
        key = next(k for k in doc if f"What is the {k}?" in asked)
        return f"Updated Summary: The {key} is {doc[key]}."

    model = ScriptedFakeModel(thesis_facts=4, script={"rewrite": [only_new]})
    cfg = CoSConfig.cos(iterations=1, questions_per_iteration=1, train_questions=5, val_questions=2)
    result = ChainOfSummaries(model, cfg).summarize(make_document(8))
    rewrite = result.iterations[1]
    assert rewrite.summary.startswith(result.iterations[0].summary)
    assert len(facts(rewrite.summary)) == 5


def test_rewrite_asks_for_new_sentences_and_a_whole_rewrite_replaces():
    """v4: the prompt asks only for the sentences to add (the fake then writes just those,
    and they are appended); a model that re-writes the whole summary anyway, opening as
    the summary does, replaces it instead of doubling it."""
    model = ScriptedFakeModel(thesis_facts=2)
    cfg = CoSConfig.cos(iterations=1, questions_per_iteration=1, train_questions=5, val_questions=2)
    result = ChainOfSummaries(model, cfg).summarize(make_document(8))
    prompt = next(m for t, m in model.calls if t == "rewrite")[-1]["content"]
    assert "write only the new sentences" in prompt
    thesis, rewrite = result.iterations[0].summary, result.iterations[1].summary
    assert rewrite.startswith(thesis) and len(facts(rewrite)) == 3

    def whole(messages):  # the summary re-copied, one fact re-worded, one fact added
        summary = messages[-1]["content"].split("<summary>\n", 1)[1].split("\n</summary>")[0]
        return f"New sentences: {summary.replace('value 1b', 'value 1B')} The lease item 7 is x."

    model = ScriptedFakeModel(thesis_facts=2, script={"rewrite": [whole]})
    result = ChainOfSummaries(model, cfg).summarize(make_document(8))
    rewrite = result.iterations[1].summary
    assert rewrite.count("The lease item 0 is") == 1 and "value 1B" in rewrite


META = "The document provides a comprehensive overview of the lease and its items."


def test_summary_that_describes_the_document_is_asked_for_its_facts():
    model = ScriptedFakeModel(thesis_facts=3, script={"thesis": [META]})
    result = ChainOfSummaries(model, CoSConfig.fast(strategy="zero-shot")).summarize(DOC)
    assert model.counts["restate"] == 1
    thesis_msgs = next(m for t, m in model.calls if t == "thesis")
    restate_msgs = next(m for t, m in model.calls if t == "restate")
    # the same conversation: the document-first prefix is reused, the bad reply is shown
    assert restate_msgs[: len(thesis_msgs)] == thesis_msgs
    assert restate_msgs[len(thesis_msgs)] == {"role": "assistant", "content": META}
    assert result.summary.startswith("The lease item 0 is value 0a.")
    assert result.usage.calls == 2 and not result.warnings


def test_summary_of_facts_is_not_asked_again_and_stubborn_description_is_kept_with_warning():
    model = ScriptedFakeModel()
    ChainOfSummaries(model, CoSConfig.fast(strategy="zero-shot")).summarize(DOC)
    assert model.counts["restate"] == 0
    stubborn = ScriptedFakeModel(script={"thesis": [META], "restate": [META]})
    result = ChainOfSummaries(stubborn, CoSConfig.fast(strategy="zero-shot")).summarize(DOC)
    assert result.summary == META and stubborn.counts["restate"] == 1
    assert any("describes the document" in w for w in result.warnings)


def test_merged_summary_that_describes_the_document_is_restated():
    doc = "\n\n".join(make_document(30, topic=f"part{i}") for i in range(6))
    model = ScriptedFakeModel(thesis_facts=1, script={"merge": [META]})
    cfg = CoSConfig.fast(strategy="zero-shot", context_tokens=1600, max_output_tokens=300)
    result = ChainOfSummaries(model, cfg).summarize(doc)
    assert model.counts["restate"] == 1
    assert not result.summary.startswith("The document") and facts(result.summary)


def test_cos_extract_appends_source_sentences_without_a_rewrite_call():
    model = ScriptedFakeModel(thesis_facts=2)
    cfg = CoSConfig(strategy="cos-extract", iterations=3, questions_per_iteration=2)
    result = ChainOfSummaries(model, cfg).summarize(DOC, doc_id="d1")
    counts = model.counts
    assert counts["rewrite"] == 0  # synthesis is the source's own sentences
    # one evaluation a round (the thesis's included), nothing else after the bank
    assert counts["answer"] == len(result.iterations)
    assert result.usage.calls == 2 + counts["answer"]
    assert result.strategy == "cos-extract"
    thesis = result.iterations[0].summary
    assert result.summary.startswith(thesis) and result.best_iteration > 0
    added = result.summary[len(thesis) :].strip()
    # every appended sentence is verbatim from the document, and answers a failed question
    for sentence in added.split(". "):
        assert sentence.rstrip(".") + "." in DOC
    assert 2 < len(facts(result.summary)) <= 2 + 2 * result.best_iteration
    assert result.best.train_score > result.iterations[0].train_score


def test_extract_answers_adds_only_what_the_source_states():
    from cos_integrations.summarize.engine import extract_answers

    src = "The rent is 900 euros. The deposit is two months."
    have = "The rent is 900 euros."
    asked = [QAPair(question="What is the deposit?", answers=["two months"])]
    assert extract_answers(src, have, asked) == f"{have} The deposit is two months."
    # already in the summary, or an answer no sentence holds: nothing to add
    again = [QAPair(question="What is the rent?", answers=["900 euros"])]
    assert extract_answers(src, have, again) == ""
    wrong = [QAPair(question="What is the deposit?", answers=["three weeks"])]
    assert extract_answers(src, have, wrong) == ""


def test_call_until_is_the_one_parse_retry_policy():
    """A reply that does not parse is asked again up to parse_retries more times; the value
    of the first that parses is returned with its reply, else None with the last reply."""
    from cos_integrations.model import ChatResult
    from cos_integrations.summarize.engine import ModelRun
    from cos_integrations.summarize.questions import ParseError
    from cos_integrations.usage import Usage

    class Replies:
        def __init__(self, *texts):
            self.texts, self.calls = list(texts), 0

        async def chat(self, messages, **kw):
            self.calls += 1
            return ChatResult(self.texts.pop(0), Usage(calls=1))

    def parse(reply):
        if reply == "bad":
            raise ParseError("no")
        return reply.strip()

    msgs = [{"role": "user", "content": "x"}]
    llm = Replies("bad", "  ", "ok")
    run = ModelRun(llm, CoSConfig(parse_retries=2), "d")
    assert asyncio.run(run.call_until(msgs, parse)) == ("ok", "ok")
    assert llm.calls == 3 and run.usage.calls == 3
    llm = Replies("bad", "bad", "ok")
    run = ModelRun(llm, CoSConfig(parse_retries=1), "d")
    assert asyncio.run(run.call_until(msgs, parse)) == (None, "bad") and llm.calls == 2


def test_the_default_config_is_what_ships_and_presets_are_named_for_what_they_do():
    from cos_integrations.summarize.config import PRESETS

    # CoSConfig() is what cos ingest, the transforms and a new index summarise with
    assert CoSConfig() == CoSConfig.shipped() == CoSConfig.tiered() == CoSConfig.preset("tiered")
    assert (CoSConfig().strategy, CoSConfig().max_summary_words) == ("zero-shot", 120)
    assert sorted(PRESETS) == ["cos", "cos-fast", "paper", "tiered"]
    for name in ("cos", "cos-fast", "paper"):
        assert CoSConfig.preset(name).strategy == "cos"  # the loop at ingest, as named
    assert CoSConfig.preset("cos-fast").iterations < CoSConfig.preset("cos").iterations
    # the names of before 0.2 went in 0.3 (they are "cos" and "cos-fast")
    for name in ("default", "fast", "fastest"):
        with pytest.raises(ValueError, match="unknown preset"):
            CoSConfig.preset(name)
