"""The hit rule as one value: its defaults, validation, the index that records it, and
rules recorded by older versions."""

import asyncio
import warnings

import pytest
from fakes import ScriptedFakeModel, make_document
from pydantic import ValidationError

from cos_integrations import ChainOfSummaries, CoSConfig, CoSIndex, HitRule
from cos_integrations.defaults import CALIBRATION_QUANTILE, DEFAULT_THRESHOLD
from cos_integrations.loaders import SourceDocument
from cos_integrations.serving.retrieval import FallbackRetriever


def test_defaults_follow_from_the_judge():
    # left out, the judge is the model's where the retriever has one (HitRule.for_model)
    assert HitRule().for_model(True) == HitRule(judge="llm")
    assert HitRule().for_model(False) == HitRule(judge="score")
    score, llm = HitRule(), HitRule(judge="llm")
    grounded = ["answered", "quoted", "in_quote", "not_echo", "in_source"]
    assert (score.context, score.routes, score.required_checks()) == ("best+chunk", False, grounded)
    assert (llm.context, llm.routes) == ("focused", True)
    with pytest.raises(ValidationError):
        HitRule(judge="llm", hit_context="best")  # deprecated in 0.2, gone in 0.3
    assert score.calibration_quantile == CALIBRATION_QUANTILE
    assert all(f.description for f in HitRule.model_fields.values())
    assert len(HitRule.model_fields) <= 6  # issue 43: at most six levers


def test_a_rule_an_older_version_recorded_still_opens():
    """0.3 dropped the lexical checks of 0.1, the answered-miss route and hit_context="best":
    a rule recorded with them (an index's manifest) is read without them; a new rule given
    them is an error."""
    old = {"judge": "llm", "verify_route": False, "answered_misses": True, "threshold": 0.7}
    assert HitRule.from_record(old) == HitRule(judge="llm", threshold=0.7)
    assert HitRule.from_record({"hit_context": "best"}) == HitRule()
    for gone in ({"verify_route": False}, {"answered_misses": True}):
        with pytest.raises(ValidationError):
            HitRule(**gone)


def test_a_rule_is_frozen_validated_and_round_trips():
    rule = HitRule(judge="llm", threshold=0.82, focus_sentences=2)
    with pytest.raises(ValidationError):
        rule.threshold = 0.9  # type: ignore[misc]
    for bad in (
        {"hit_context": "everything"},
        {"judge": "maybe"},
        {"calibration_quantile": 1.5},
        {"focus_sentences": 0},
        {"no_such_lever": True},
    ):
        with pytest.raises(ValueError):
            HitRule(**bad)
    assert HitRule.model_validate_json(rule.model_dump_json()) == rule
    assert hash(rule) == hash(HitRule(judge="llm", threshold=0.82, focus_sentences=2))
    # options left out (None) keep the rule's value
    assert rule.with_options(threshold=None, judge=None) is rule
    assert rule.with_options(answer_similarity=None).answer_similarity == 0.98
    assert rule.with_options(answer_similarity=0.9).answer_similarity == 0.9


def test_check_reports_every_check_and_failed_names_the_required_ones():
    from cos_integrations.serving.hit_rule import GroundedReply

    rule = HitRule(judge="llm")
    ctx = "The Panthers lost. Kawann Short led the Panthers in sacks."
    q = "Who led the Panthers in sacks?"
    good = rule.check(GroundedReply("Kawann Short", "kawann short led"), q, ctx, sources=ctx)
    assert good == {
        "answered": True,
        "quoted": True,
        "in_quote": True,
        "not_echo": True,
        "in_source": True,
    }
    assert rule.failed(good) == []
    # the question's own words, quoted right: the echo check catches it
    echo = rule.check(GroundedReply("the Panthers", "The Panthers lost."), q, ctx, sources=ctx)
    assert rule.failed(echo) == ["not_echo"]
    # a quote the context does not hold, an answer its quote does not hold
    made_up = rule.check(GroundedReply("Kawann Short", "Short led the defense"), q, ctx)
    assert rule.failed(made_up) == ["quoted", "in_quote", "in_source"]
    elsewhere = rule.check(
        GroundedReply("Josh Norman", "Kawann Short led the Panthers"), q, ctx, sources=ctx
    )
    assert rule.failed(elsewhere) == ["in_quote", "in_source"]
    everything = ["answered", "quoted", "in_quote", "not_echo", "in_source"]
    assert rule.failed(rule.check(GroundedReply("I don't know", ""), q, ctx)) == everything
    # quoted right from a summary sentence the source does not bear out: not in_source
    summary = "Kawann Short led the Panthers in sacks and interceptions."
    source = "Kawann Short led the Panthers in sacks. Josh Norman had four interceptions."
    told = GroundedReply("Kawann Short", "Kawann Short led the Panthers in sacks and interceptions")
    assert rule.failed(rule.check(told, "Who led in interceptions?", summary, sources=source)) == [
        "in_source"
    ]


@pytest.fixture
def filled(tmp_path):
    from cos_integrations.embedded.embeddings import HashingEmbedder

    index = CoSIndex(tmp_path / "ix", embedder=HashingEmbedder(256))
    model = ScriptedFakeModel(thesis_facts=2)
    engine = ChainOfSummaries(model, CoSConfig.fast(iterations=0))
    docs = [
        SourceDocument(doc_id=t, text=make_document(8, topic=t), source=f"{t}.txt")
        for t in ("lease", "garden", "parking")
    ]
    asyncio.run(index.aingest(docs, engine))
    yield index, model
    index.store.close()


def test_the_index_records_its_rule_and_retrievers_without_one_use_it(filled):
    index, model = filled
    # a new index records the rule it was made with (the default; its judge follows the
    # retriever's model)
    assert index.hit_rule == HitRule()
    assert HitRule.model_validate(index.manifest["hit_rule"]) == HitRule()
    q = "What is the garden item 1?"
    assert FallbackRetriever(index, rule=HitRule(threshold=0.0)).retrieve(q).hit
    index.set_hit_rule(HitRule(threshold=0.999))
    assert index.manifest["hit_rule"]["threshold"] == 0.999
    reopened = CoSIndex(index.path)
    try:
        assert reopened.hit_rule == HitRule(threshold=0.999)
        plain = FallbackRetriever(reopened)  # no model: the recorded rule, similarity-judged
        assert plain.rule == reopened.hit_rule.for_model(False) and plain.threshold == 0.999
        assert not plain.retrieve(q).hit  # the recorded rule decides
        # a rule given to the retriever wins over the index's
        assert FallbackRetriever(reopened, rule=HitRule(threshold=0.0)).retrieve(q).hit
    finally:
        reopened.store.close()


def test_a_new_calibration_quantile_recalibrates_the_index(filled):
    from cos_integrations.summarize.questions import QAPair

    index, _ = filled
    for t in ("lease", "garden"):
        for i in range(6):  # questions people asked: what calibration reads by default
            pair = QAPair(question=f"Tell me the {t} item {i}.", answers=["x"], origin="human")
            index.store.add_question(t, pair)
    low = index.calibrate_threshold()
    assert low is not None and index.manifest["threshold"]["quantile"] == CALIBRATION_QUANTILE
    index.set_hit_rule(HitRule(calibration_quantile=0.9))  # recalibrates
    assert index.manifest["threshold"]["quantile"] == 0.9
    assert index.threshold >= low
    assert index.calibrate_threshold() == index.threshold  # the rule's quantile by default
    assert index.calibrate_threshold(quantile=0.0) <= low  # an explicit one still wins


def test_the_retriever_takes_a_rule_not_its_fields(filled):
    index, model = filled
    for gone in ({"threshold": 0.5}, {"hit_context": "summaries"}, {"no_such": 1}):
        with pytest.raises(TypeError):
            FallbackRetriever(index, **gone)
    with pytest.raises(ValueError, match="needs llm"):
        FallbackRetriever(index, rule=HitRule(judge="llm"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert FallbackRetriever(index, rule=HitRule(threshold=0.5)).threshold == 0.5


def test_default_threshold_is_the_rules_fallback(filled):
    index, _ = filled
    assert FallbackRetriever(index).threshold == index.threshold == DEFAULT_THRESHOLD


def test_each_step_of_aretrieve_on_its_own(filled):
    """route -> build the hit context -> judge: each step decides its part of a Decision."""
    from cos_integrations.serving.retrieval import Decision

    index, model = filled
    q = "What is the garden item 1?"
    emb = index.embedder.embed_query(q)
    cands = index.search_summaries(q, 2, embedding=emb)
    ret = FallbackRetriever(index, llm=model, rule=HitRule(judge="llm", threshold=0.0))
    rule = ret.rule
    # route: over the threshold, and the top chunk agrees on the document
    routed = asyncio.run(ret._route(q, cands, emb, 2, rule))
    assert routed.reason == "" and routed.checks["routed"] is True
    assert routed.top and routed.top[0].doc_id == cands[0].doc_id
    # under the threshold: a miss before any search
    high = FallbackRetriever(index, llm=model, rule=HitRule(judge="llm", threshold=0.999))
    under = asyncio.run(high._route(q, cands, emb, 2, high.rule))
    assert under.reason.startswith("best similarity") and under.top is None
    # the hit context: focused sentences of the best summary and its chunk
    asyncio.run(ret._build_context(q, routed, cands, emb, rule, 2))
    assert routed.context and all(h.metadata.get("cos_focused") for h in routed.context)
    assert [h.kind for h in routed.full] == ["summary", "chunk"] and not routed.hit
    # the judge: the model's answer and the rule's checks decide
    asyncio.run(ret._judge(q, routed, model, rule))
    assert routed.hit and routed.judge_answer == "value 1b" and routed.checks["quoted"]
    assert routed.quote == "The garden item 1 is value 1b."
    # a similarity-only rule: the context decides, no model call; it is the best summary
    # and its document's best chunks, k in all ("summaries": those over the threshold)
    before = len(model.calls)
    scored = Decision()
    rule = HitRule(threshold=0.0, judge="score")
    asyncio.run(ret._build_context(q, scored, cands, emb, rule, 2))
    assert scored.hit and [(h.kind, h.doc_id) for h in scored.context] == [
        ("summary", "garden"),
        ("chunk", "garden"),
    ]
    wide = Decision()
    asyncio.run(ret._build_context(q, wide, cands, emb, HitRule(judge="score"), 3))
    assert [h.kind for h in wide.context] == ["summary", "chunk", "chunk"]
    assert len({h.id for h in wide.context}) == 3
    summaries = Decision()
    rule = HitRule(threshold=0.0, judge="score", hit_context="summaries")
    asyncio.run(ret._build_context(q, summaries, cands, emb, rule, 2))
    assert summaries.hit and summaries.context == [c for c in cands if c.score >= 0.0]
    assert len(model.calls) == before


def test_the_routing_check_can_be_switched_off_to_measure_it(filled):
    """route_check=False (an ablation): no chunk search, no "routed" check, the threshold
    alone decides whether the judge is asked; on by default."""
    index, model = filled
    q = "What is the garden item 1?"
    emb = index.embedder.embed_query(q)
    cands = index.search_summaries(q, 2, embedding=emb)
    rule = HitRule(judge="llm", threshold=0.0)
    assert FallbackRetriever(index, llm=model, rule=rule).route_check is True
    off = FallbackRetriever(index, llm=model, rule=rule, route_check=False, max_error=None)
    routed = asyncio.run(off._route(q, cands, emb, 2, off.rule))
    assert routed.reason == "" and routed.top is None and "routed" not in routed.checks
    # the best chunk is then searched for the hit context, in the best summary's document
    asyncio.run(off._build_context(q, routed, cands, emb, off.rule, 2))
    assert [h.kind for h in routed.full] == ["summary", "chunk"]
    assert routed.full[1].doc_id == cands[0].doc_id
    assert off.retrieve(q).hit


def test_the_cli_levers_reach_every_rule_field_they_name():
    """`cos query` and `cos eval` change the rule through rule_levers: each option given
    changes its field, each left out keeps the rule's value."""
    from cos_integrations.cli.common import rule_levers

    rule = HitRule(judge="llm")
    levers = rule_levers(None, 0.9, None, 0.95, 2)
    changed = rule.with_options(**levers)
    assert changed.answer_similarity == 0.95 and changed.threshold == 0.9
    assert changed.judge == "llm" and changed.focus_sentences == 2
    assert set(levers) <= set(HitRule.model_fields)
    kept = rule.with_options(**rule_levers(None, None, None))
    assert kept == rule and kept.answer_similarity == 0.98  # the default


def test_numbers_ground_and_agree_as_written():
    """Digits compare with digits: "4" is not grounded by "four" (SQuAD's gold is "four",
    so such a hit would score 0) and does not agree with it; the same digits agree."""
    from cos_integrations.serving.hit_rule import answers_agree, is_grounded

    source = "Josh Norman had four interceptions, two of which were returned."
    assert is_grounded("four", source) and not is_grounded("4", source)
    assert answers_agree("4", ["4 interceptions"]) and not answers_agree("4", ["four"])
    assert answers_agree("Kawann Short", ["Short"])
    assert not answers_agree("17 interceptions", ["4 interceptions"])
    assert not answers_agree("value 1b", ["value 6g"])
    assert not answers_agree("I don't know", ["I don't know"])


def test_an_initial_does_not_end_a_sentence():
    """ "Running back C. J. Anderson was the team's leading rusher": split at the initials,
    no sentence held the answer "C. J. Anderson" (a refine job's evidence was lost)."""
    from cos_integrations.serving.hit_rule import supporting_sentence

    text = "Running back C. J. Anderson was the team's leading rusher. Mr. Ware sacked."
    sentence = supporting_sentence("C. J. Anderson", "Who was the leading rusher?", text)
    assert sentence == "Running back C. J. Anderson was the team's leading rusher."


def test_every_retriever_and_command_searches_the_measured_k_by_default():
    """One default everywhere: the core retriever, both frameworks' retrievers, `cos query`
    and `cos eval` all use DEFAULT_K, the k of the measured figures (they had 4, 4, 4, 3
    and 2)."""
    import inspect

    import click
    import typer

    from cos_integrations.cli import app
    from cos_integrations.defaults import DEFAULT_K
    from cos_integrations.research.evaluation import RetrievalEvalOptions
    from langchain_ext import CoSFallbackRetriever as LangChainRetriever
    from llamaindex_ext import CoSFallbackRetriever as LlamaIndexRetriever

    core = inspect.signature(FallbackRetriever).parameters["k"].default
    llama = inspect.signature(LlamaIndexRetriever).parameters["similarity_top_k"].default
    lang = LangChainRetriever.model_fields["k"].default
    group = typer.main.get_command(app)
    ctx = click.Context(group)
    cli = {
        name: next(p.default for p in group.get_command(ctx, name).params if p.name == "k")
        for name in ("query", "eval")
    }
    evaluation = RetrievalEvalOptions.model_fields["k"].default
    assert DEFAULT_K == 2
    assert (core, llama, lang, cli["query"], cli["eval"], evaluation) == (DEFAULT_K,) * 6
