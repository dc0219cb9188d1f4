"""The evaluation harness on the fake model: methods, the reference baseline, resume."""

import asyncio
import json
import warnings

import pytest
from fakes import ScriptedFakeModel, facts, make_document

from cos_integrations import ChainOfSummaries, CoSConfig
from cos_integrations.research.evaluation import DatasetError, load_dataset, plot, run_eval
from cos_integrations.research.jsonl import pack, read_jsonl
from cos_integrations.research.reference import reference_summarize
from cos_integrations.serving.hit_rule import HitRule

DOC = make_document(15)


def write_dataset(path, n=3):
    with path.open("w") as fh:
        for i in range(n):
            text = make_document(15, topic=f"topic{i}")
            qas = [
                {
                    "question": f"What is the topic{i} item {j}?",
                    "answers": [f"value {j}{chr(97 + j)}"],
                }
                for j in range(10, 14)
            ]
            fh.write(json.dumps({"doc_id": f"d{i}", "title": f"T{i}", "text": text, "qas": qas}))
            fh.write("\n")
    return path


def test_calls_per_document_paper_config_against_the_authors_scheme():
    ours = ScriptedFakeModel(thesis_facts=2)
    r = ChainOfSummaries(ours, CoSConfig.paper()).summarize(DOC)
    theirs = ScriptedFakeModel(thesis_facts=2)
    ref = asyncio.run(reference_summarize(theirs, DOC, CoSConfig.paper()))
    assert len(theirs.calls) == ref.usage.calls == 177  # 1 + 1 + 11 x 15 + 10
    assert len(ours.calls) == r.usage.calls <= 23
    print(f"calls per document: ours {r.usage.calls}, authors' scheme {ref.usage.calls}")
    # the reference keeps the last iteration and judges by exact match
    assert ref.best_iteration == 10 and len(ref.iterations) == 11


def test_load_dataset_validates_with_line_numbers(tmp_path):
    good = write_dataset(tmp_path / "d.jsonl")
    assert [d.doc_id for d in load_dataset(good, limit=2)] == ["d0", "d1"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(good.read_text() + '{"doc_id": "x", "text": "t", "qas": []}\n')
    with pytest.raises(DatasetError, match="line 4: qas"):
        load_dataset(bad)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"doc_id": \n')
    with pytest.raises(DatasetError, match="line 1"):
        load_dataset(broken)


def test_load_dataset_refuses_what_it_would_lose(tmp_path):
    """A second line with the same doc_id would replace the first in the index, and bytes
    that are not UTF-8 or a path that is not a file must be a DatasetError naming them, not
    a traceback (cos eval prints it as an error line)."""
    good = write_dataset(tmp_path / "d.jsonl")
    lines = good.read_text().splitlines()
    dup = tmp_path / "dup.jsonl"
    dup.write_text("\n".join([*lines, lines[0]]) + "\n")
    with pytest.raises(DatasetError, match="line 4: doc_id 'd0' is line 1's too"):
        load_dataset(dup)
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(good.read_bytes() + b"\xff\xfe\n")
    with pytest.raises(DatasetError, match="line 4: not UTF-8 text"):
        load_dataset(binary)
    with pytest.raises(DatasetError, match="no such file"):
        load_dataset(tmp_path / "missing.jsonl")
    with pytest.raises(DatasetError, match="is a directory"):
        load_dataset(tmp_path)


def test_run_eval_all_methods_and_resume(tmp_path):
    docs = load_dataset(write_dataset(tmp_path / "d.jsonl"))
    out = tmp_path / "results.json"
    model = ScriptedFakeModel(thesis_facts=2)
    cfg = CoSConfig.cos(
        iterations=3,
        questions_per_iteration=2,
        train_questions=6,
        val_questions=3,
        max_summary_words=200,
    )
    methods = ["cos", "zero-shot", "density", "reference", "content", "fallback", "rag"]
    methods.append("right-doc")
    result = asyncio.run(
        run_eval(
            model,
            docs,
            methods=methods,
            config=cfg,
            out=out,
            model_name="fake",
            dataset="d.jsonl",
            refine_from_traffic=True,
        )
    )
    saved = json.loads(out.read_text())
    assert saved == json.loads(json.dumps(result))
    assert set(saved) == {
        "model",
        "dataset",
        "docs",
        "distractors",
        "config",
        "retrieval",
        "methods",
        "errors",
    }
    assert saved["errors"] == []
    m = saved["methods"]
    assert set(m) == set(methods)
    for name in ("cos", "zero-shot", "density", "reference", "content"):
        for key in (
            "heldout_f1",
            "heldout_em",
            "summary_tokens",
            "source_tokens",
            "calls_per_doc",
            "prompt_tokens_per_doc",
            "completion_tokens_per_doc",
            "cached_tokens_per_doc",
            "seconds_per_doc",
        ):
            assert key in m[name], (name, key)
    # the held-out facts (items 10-13) are only in the full text: content answers them all
    assert m["content"]["heldout_f1"] == 1.0 and m["content"]["calls_per_doc"] == 0
    assert m["zero-shot"]["calls_per_doc"] == 1 and m["zero-shot"]["heldout_f1"] == 0.0
    assert m["reference"]["calls_per_doc"] > m["cos"]["calls_per_doc"]
    assert "oracle_heldout_f1" in m["cos"] and "heldout_f1_per_iteration" in m["cos"]
    assert m["cos"]["oracle_heldout_f1"] >= m["cos"]["heldout_f1"]
    fb = m["fallback"]
    assert {"heldout_f1", "hit_rate", "context_tokens", "test_before", "test_after"} <= set(fb)
    # asking the traffic half and refining teaches the summaries: hit rate does not drop
    assert fb["test_after"]["hit_rate"] >= fb["test_before"]["hit_rate"]
    calls = len(model.calls)
    # packed for the repository (records.jsonl.gz only): the resume reads the archive
    partial = tmp_path / "results.json.docs.jsonl"
    assert pack(partial).is_file() and not partial.exists()
    asyncio.run(
        run_eval(
            model,
            docs,
            methods=["cos", "zero-shot"],
            config=cfg,
            out=out,
            model_name="fake",
            dataset="d.jsonl",
        )
    )
    assert len(model.calls) == calls  # resumed: nothing recomputed
    plot(saved, tmp_path / "fig.png")
    assert (tmp_path / "fig.png").stat().st_size > 1000
    # a run without iterations (zero-shot only) plots without a warning
    only_zero_shot = {**saved, "methods": {"zero-shot": saved["methods"]["zero-shot"]}}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plot(only_zero_shot, tmp_path / "zs.png")
    assert facts(DOC)


class FailsOn(ScriptedFakeModel):
    """Raises for prompts that mention ``marker`` (one document's calls fail)."""

    def __init__(self, marker, **kw):
        super().__init__(**kw)
        self.marker = marker

    async def chat(self, messages, **kw):
        if self.marker and any(self.marker in m["content"] for m in messages):
            raise RuntimeError("context size exceeded")
        return await super().chat(messages, **kw)


def test_a_failing_document_is_reported_and_retried_on_rerun(tmp_path):
    docs = load_dataset(write_dataset(tmp_path / "d.jsonl"))
    out = tmp_path / "r.json"
    cfg = CoSConfig.cos(iterations=1, train_questions=4, val_questions=2)
    model = FailsOn("topic1", thesis_facts=2)
    first = asyncio.run(
        run_eval(
            model, docs, methods=["zero-shot"], config=cfg, out=out, model_name="f", dataset="d"
        )
    )
    assert [(e["doc_id"], e["method"]) for e in first["errors"]] == [("d1", "zero-shot")]
    assert "context size exceeded" in first["errors"][0]["error"]
    assert first["methods"]["zero-shot"]["docs"] == 2
    model.marker = None
    before = len(model.calls)
    second = asyncio.run(
        run_eval(
            model, docs, methods=["zero-shot"], config=cfg, out=out, model_name="f", dataset="d"
        )
    )
    assert second["errors"] == [] and second["methods"]["zero-shot"]["docs"] == 3
    assert len(model.calls) - before == 2  # only d1 redone: its summary + its answers


def test_cos_eval_command_over_http(tmp_path):
    """`cos eval` end to end against an OpenAI-compatible HTTP server (scripted answers)."""
    from openai_server import FakeOpenAIServer
    from typer.testing import CliRunner

    from cos_integrations.cli import app

    data = write_dataset(tmp_path / "d.jsonl", n=2)
    out = tmp_path / "r.json"
    with FakeOpenAIServer(ScriptedFakeModel(thesis_facts=2)) as server:
        args = ["eval", "--data", str(data), "--methods", "zero-shot,content", "--out", str(out)]
        args += ["--base-url", server.base_url, "--model", "fake", "--context-tokens", "4096"]
        res = CliRunner().invoke(app, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    saved = json.loads(out.read_text())
    assert saved["docs"] == 2 and saved["config"]["context_tokens"] == 4096
    assert saved["methods"]["content"]["heldout_f1"] == 1.0
    assert "zero-shot" in res.output and "wrote" in res.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    res = CliRunner().invoke(app, ["eval", "--data", str(bad), "--out", str(out)])
    assert res.exit_code == 2 and "line 1" in res.output
    # a bad --answer-cache or --summaries-from is refused before a model is started or
    # asked (the endpoint here does not exist: reaching it would be another error)
    binary = tmp_path / "cache.jsonl"
    binary.write_bytes(b'{"key": "a", "answer": "b"}\n\xff\n')
    cases = (("--answer-cache", binary, "line 2: not UTF-8"), ("--summaries-from", bad, "line 1"))
    for flag, path, said in cases:
        args = ["eval", "--data", str(data), "--out", str(out), flag, str(path)]
        args += ["--base-url", "http://127.0.0.1:9/v1", "--model", "fake"]
        res = CliRunner().invoke(app, args)
        words = " ".join(res.output.split())  # the error line may wrap
        assert res.exit_code == 2 and f"error: {flag}:" in words and said in words, words


def test_cos_eval_defaults_are_the_shipped_product_beside_chunk_rag(tmp_path):
    """`cos eval --data` alone measures what ships against what a user would pick instead:
    fallback, rag and rag-ordered, the shipped ingest's config and summaries, the measured
    hit rule, k = 2, the first half of each document's questions calibrating the threshold;
    a summariser option given is set over the preset, not instead of it."""
    from openai_server import FakeOpenAIServer
    from typer.testing import CliRunner

    from cos_integrations.cli import app
    from cos_integrations.defaults import DEFAULT_K

    data = write_dataset(tmp_path / "d.jsonl", n=2)
    out = tmp_path / "r.json"
    with FakeOpenAIServer(ScriptedFakeModel(thesis_facts=2)) as server:
        args = ["eval", "--data", str(data), "--out", str(out), "--base-url", server.base_url]
        res = CliRunner().invoke(app, [*args, "--model", "fake"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    # the bar counts the rows asked for (2 documents x 3 methods), not the index's summaries
    assert "6/6" in res.output and "8/6" not in res.output, res.output
    # the printed table has a column a method, a row a measure: whole at 80 characters
    table = res.output[res.output.index("retrieval, per question") :]
    assert all(name in table for name in ("rag-ordered", "fallback", "hit rate", "prompt tok/q"))
    saved = json.loads(out.read_text())
    assert set(saved["methods"]) == {"fallback", "rag", "rag-ordered"}
    assert saved["config"] == CoSConfig.shipped().model_dump(mode="json")
    retrieval = saved["retrieval"]
    assert retrieval["summary_method"] == CoSConfig.shipped().strategy == "zero-shot"
    assert retrieval["test_half"] and retrieval["k"] == DEFAULT_K
    assert retrieval["rule"]["judge"] == "llm"
    # each document's first half is not asked (it calibrates), the second half is
    records = [json.loads(line) for line in out.with_name("r.json.docs.jsonl").open()]
    asked = {r["doc_id"]: r["questions"] for r in records if r["method"] == "rag"}
    for doc in load_dataset(data):
        half = doc.qas[len(doc.qas) // 2 :]
        assert [q["question"] for q in asked[doc.doc_id]] == [q.question for q in half]


def test_cos_eval_options_are_set_over_the_preset():
    from cos_integrations.cli.evaluate import _config

    assert _config("paper", iterations=2, max_summary_words=None).model_dump() == (
        CoSConfig.paper(iterations=2).model_dump()
    )
    assert _config(None, train_questions=3) == CoSConfig.shipped(train_questions=3)
    with pytest.raises(ValueError):
        _config(None, iterations=999)


def test_cos_eval_with_distractors_over_http(tmp_path):
    """`cos eval --distractors`: the distractors' summaries print as indexed (no F1), the
    table counts the questioned documents, and a --distractors file that repeats a --data
    document is refused (exit 2)."""
    from openai_server import FakeOpenAIServer
    from typer.testing import CliRunner

    from cos_integrations.cli import app

    data = write_dataset(tmp_path / "d.jsonl", n=2)
    extra = tmp_path / "x.jsonl"
    extra.write_text(
        json.dumps({"doc_id": "x0", "title": "X0", "text": make_document(8, topic="other")}) + "\n"
    )
    out = tmp_path / "r.json"
    base = ["eval", "--data", str(data), "--methods", "rag", "--summary-method", "zero-shot"]
    base += ["--test-half", "--out", str(out), "--model", "fake", "--context-tokens", "4096"]
    with FakeOpenAIServer(ScriptedFakeModel(thesis_facts=2)) as server:
        args = [*base, "--base-url", server.base_url, "--distractors", str(extra)]
        res = CliRunner().invoke(app, args, catch_exceptions=False)
        assert res.exit_code == 0, res.output
        assert "x0 zero-shot: indexed" in res.output
        saved = json.loads(out.read_text())
        assert saved["docs"] == 2 and saved["distractors"] == 1
        clash = tmp_path / "c.jsonl"
        clash.write_text(data.read_text().splitlines()[0] + "\n")
        args = [*base, "--base-url", server.base_url, "--distractors", str(clash)]
        res = CliRunner().invoke(app, args)
    assert res.exit_code == 2 and "repeats" in res.output


def test_refine_from_traffic_learns_only_from_the_traffic_half(tmp_path):
    docs = load_dataset(write_dataset(tmp_path / "d.jsonl", n=2))
    model = ScriptedFakeModel(thesis_facts=2)
    cfg = CoSConfig.cos(iterations=1, questions_per_iteration=2, train_questions=4, val_questions=2)
    result = asyncio.run(
        run_eval(
            model,
            docs,
            methods=["fallback"],
            config=cfg,
            out=tmp_path / "r.json",
            model_name="fake",
            dataset="d",
            refine_from_traffic=True,
        )
    )
    fb = result["methods"]["fallback"]
    learning = [
        m[-1]["content"] for task, m in model.calls if task in ("source_answer", "rewrite", "fact")
    ]
    traffic = [q.question for d in docs for q in d.qas[: len(d.qas) // 2]]
    test = [q.question for d in docs for q in d.qas[len(d.qas) // 2 :]]
    assert any(q in p for q in traffic for p in learning)  # the traffic misses were learned
    assert not any(q in p for q in test for p in learning)  # the test half never leaked
    assert fb["test_after"]["hit_rate"] >= fb["test_before"]["hit_rate"]


def test_rag_fallback_and_right_doc_side_by_side_over_one_index(tmp_path):
    from cos_integrations.research.evaluation import RetrievalEvalOptions, retrieval_table

    docs = load_dataset(write_dataset(tmp_path / "d.jsonl", n=3))
    model = ScriptedFakeModel(thesis_facts=2)  # summaries hold items 0-1; questions ask 10-13
    cfg = CoSConfig.cos(iterations=0, train_questions=2, val_questions=1)
    cache = tmp_path / "answers.jsonl"
    opts = RetrievalEvalOptions(
        summary_method="zero-shot",
        test_half=True,
        rule=HitRule(judge="llm", threshold=0.0, hit_context="summaries"),
    )
    kw = dict(config=cfg, model_name="fake", dataset="d", answer_cache=cache)
    result = asyncio.run(
        run_eval(
            model,
            docs,
            methods=["rag", "fallback", "right-doc"],
            out=tmp_path / "r.json",
            retrieval=opts,
            **kw,
        )
    )
    m = result["methods"]
    n_test = sum(len(d.qas) - len(d.qas) // 2 for d in docs)
    assert m["rag"]["questions"] == m["fallback"]["questions"] == n_test == 6
    # the index holds all 3 documents: rag has to find the right one, and does
    assert m["rag"]["heldout_f1"] == 1.0 and m["right-doc"]["heldout_f1"] == 1.0
    assert m["rag"]["calls_per_question"] == 1.0
    fb = m["fallback"]
    # the summaries lack the asked facts: every question misses and is answered from chunks
    assert fb["hit_rate"] == 0.0 and fb["miss_f1"] == 1.0 and "hit_f1" not in fb
    assert fb["calls_per_question"] == 2.0  # the judge, then the miss's answer
    assert fb["context_tokens"] > m["rag"]["context_tokens"]  # the judge's context counts
    recs = [json.loads(line) for line in (tmp_path / "r.json.docs.jsonl").read_text().splitlines()]
    row = next(r for r in recs if r["method"] == "fallback")["questions"][0]
    # the judge's grounded reply: the summaries do not say, so no answer and no quote
    assert row["judge_answer"] is None and row["checks"]["answered"] is False
    rag_row = next(r for r in recs if r["method"] == "rag")["questions"][0]
    assert row["docs"] == rag_row["docs"]  # the miss path retrieved rag's chunks
    # one call per distinct prompt: the misses reused rag's answers (the zero-shot method
    # answers its document's questions in one call each: len(docs) more)
    answer_calls = sum(1 for task, _ in model.calls if task == "answer")
    assert answer_calls == 2 * n_test + len(docs)
    assert sum(1 for task, _ in model.calls if task == "grounded") == n_test  # the judge
    assert [r[0] for r in retrieval_table(m)] == ["rag", "fallback", "right-doc"]
    # another hit rule over the same (recorded, then packed) summaries: only the judge's
    # new prompts are asked
    pack(tmp_path / "r.json.docs.jsonl")
    before = len(model.calls)
    again = asyncio.run(
        run_eval(
            model,
            docs,
            methods=["rag", "fallback"],
            out=tmp_path / "best.json",
            retrieval=opts.model_copy(
                update={
                    "rule": opts.rule.model_copy(update={"hit_context": "best"}),
                    "summaries_from": str(tmp_path / "r.json.docs.jsonl"),
                }
            ),
            **kw,
        )
    )
    assert again["methods"]["rag"]["heldout_f1"] == 1.0
    new_calls = model.calls[before:]
    assert len(new_calls) == n_test and all(t == "grounded" for t, _ in new_calls)


def test_records_of_before_an_option_existed_still_resume(tmp_path):
    """The options added later for refinement from traffic (refine_retarget,
    refine_check_names) are left out of a run's signature while they cannot
    have changed it: records written before they existed are reused, not recomputed; a
    refine-from-traffic run that sets one starts afresh, a run without refinement does not."""
    from cos_integrations.research.evaluation import RetrievalEvalOptions

    docs = load_dataset(write_dataset(tmp_path / "d.jsonl", n=2))
    model = ScriptedFakeModel(thesis_facts=2)
    # what every run did before the options existed
    before = HitRule(judge="llm")
    opts = RetrievalEvalOptions(summary_method="zero-shot", rule=before, refine_retarget=1)
    kw = dict(config=CoSConfig.cos(iterations=0, train_questions=2, val_questions=1))
    kw |= dict(model_name="fake", dataset="d", methods=["fallback"])

    def run(out, retrieval, traffic):
        asyncio.run(
            run_eval(model, docs, retrieval=retrieval, out=out, refine_from_traffic=traffic, **kw)
        )

    for out, traffic in ((tmp_path / "plain.json", False), (tmp_path / "traffic.json", True)):
        run(out, opts, traffic)
        records = out.with_name(out.name + ".docs.jsonl")
        old = []
        for line in records.read_text().splitlines():  # as written before the options existed
            rec = json.loads(line)
            if "retrieval" in rec["signature"]:
                rec["signature"]["retrieval"].pop("refine_retarget", None)
                rec["signature"]["retrieval"].pop("refine_check_names", None)
            old.append(json.dumps(rec))
        records.write_text("\n".join(old) + "\n")
        calls = len(model.calls)
        run(out, opts, traffic)
        assert len(model.calls) == calls  # resumed
        run(out, RetrievalEvalOptions(summary_method="zero-shot"), traffic)  # today's defaults
        assert (len(model.calls) > calls) == traffic  # refinement's runs start afresh


def test_summaries_from_a_recorded_run_must_cover_every_document(tmp_path):
    from cos_integrations.research.evaluation import RetrievalEvalOptions

    docs = load_dataset(write_dataset(tmp_path / "d.jsonl", n=2))
    recorded = tmp_path / "old.docs.jsonl"
    recorded.write_text(json.dumps({"doc_id": "d0", "method": "zero-shot", "summary": "x"}) + "\n")
    opts = RetrievalEvalOptions(summaries_from=str(recorded))  # the shipped ingest's summaries
    with pytest.raises(ValueError, match="no 'zero-shot' summary for \\['d1'\\]"):
        asyncio.run(
            run_eval(
                ScriptedFakeModel(),
                docs,
                methods=["rag"],
                config=CoSConfig.cos(),
                out=tmp_path / "r.json",
                model_name="f",
                dataset="d",
                retrieval=opts,
            )
        )


@pytest.mark.parametrize(("hit_context", "f1"), [(None, 1.0), ("summaries", 0.0)])
def test_score_judge_hits_are_answered_from_the_best_summary_and_its_chunk(
    tmp_path, hit_context, f1
):
    """The similarity alone decides; a hit is answered from the best summary and its
    document's best chunk, which holds the asked fact (default), or from the summaries,
    which lack it (hit_context="summaries", the default before 0.2)."""
    from cos_integrations.research.evaluation import RetrievalEvalOptions

    docs = load_dataset(write_dataset(tmp_path / "d.jsonl", n=2))
    model = ScriptedFakeModel(thesis_facts=2)
    rule = HitRule(judge="score", threshold=-1.0, hit_context=hit_context)
    opts = RetrievalEvalOptions(summary_method="zero-shot", rule=rule)
    result = asyncio.run(
        run_eval(
            model,
            docs,
            methods=["fallback"],
            config=CoSConfig.cos(iterations=0, train_questions=2, val_questions=1),
            out=tmp_path / "r.json",
            model_name="fake",
            dataset="d",
            retrieval=opts,
        )
    )
    fb = result["methods"]["fallback"]
    # every query hits on similarity alone; one call answers it from what the hit returns
    assert fb["hit_rate"] == 1.0 and fb["calls_per_question"] == 1.0
    assert fb["heldout_f1"] == f1 and fb["wrong_hits"] == 1.0 - f1


def test_each_summary_strategy_gets_its_own_index_and_row_with_ingest_costs(tmp_path):
    from cos_integrations.research.evaluation import (
        RetrievalEvalOptions,
        ablation_table,
        retrieval_table,
    )

    path = tmp_path / "d.jsonl"
    with path.open("w") as fh:
        for i in range(2):
            # traffic half: facts no thesis holds; test half: facts 0-1, which every
            # thesis of 2 facts holds (hits)
            qas = [
                {
                    "question": f"What is the topic{i} item {j}?",
                    "answers": [f"value {j}{chr(97 + j)}"],
                }
                for j in (10, 11, 0, 1)
            ]
            text = make_document(15, topic=f"topic{i}")
            fh.write(json.dumps({"doc_id": f"d{i}", "text": text, "qas": qas}) + "\n")
    docs = load_dataset(path)
    model = ScriptedFakeModel(thesis_facts=2)
    cfg = CoSConfig.cos(iterations=1, questions_per_iteration=2, train_questions=4, val_questions=2)
    opts = RetrievalEvalOptions(
        summary_method="zero-shot,cos-extract",
        test_half=True,
        hit_ablation=True,
        rule=HitRule(judge="llm", threshold=0.0),
        max_error=None,  # the hit rule alone: its hits are ablated
    )
    result = asyncio.run(
        run_eval(
            model,
            docs,
            methods=["rag", "fallback"],
            config=cfg,
            out=tmp_path / "r.json",
            model_name="fake",
            dataset="d",
            retrieval=opts,
        )
    )
    m = result["methods"]
    assert [r[0] for r in retrieval_table(m)] == [
        "rag",
        "fallback[zero-shot]",
        "fallback[cos-extract]",
    ]
    assert "fallback" not in m and m["rag"]["docs"] == 2  # rag once, over the same chunks
    zs, cx = m["fallback[zero-shot]"], m["fallback[cos-extract]"]
    assert zs["questions"] == cx["questions"] == 4
    # ingest costs come from each strategy's own summaries
    assert zs["ingest"]["calls_per_doc"] == 1.0
    assert cx["ingest"]["calls_per_doc"] > 2.0 and cx["ingest"]["thesis_kept"] == 0.0
    assert cx["ingest"]["summary_tokens"] > zs["ingest"]["summary_tokens"]
    # one index per strategy, each holding its own strategy's summaries
    indexes = sorted(p.name for p in tmp_path.glob("r.json.index-*"))
    assert len(indexes) == 2 and indexes[0].endswith("-cos-extract")
    # the test questions hit (one may be routed to the other topic's chunk); the ablation
    # answered each hit, and only the hits, from each part alone
    assert zs["hit_rate"] >= 0.5 and zs["ablation"]["hits"] == round(zs["hit_rate"] * 4)
    a = zs["ablation"]
    assert a["both"]["f1"] == a["summary"]["f1"] == a["whole-chunk"]["f1"] == 1.0
    assert 0 < a["summary"]["context_tokens"] < a["whole-chunk"]["context_tokens"]
    assert [r[0] for r in ablation_table(m)] == ["fallback[zero-shot]", "fallback[cos-extract]"]


@pytest.mark.parametrize("paraphrases", [True, False])
def test_tiered_refine_from_traffic_deepens_and_asks_the_traffic_again(tmp_path, paraphrases):
    from cos_integrations.research.evaluation import RetrievalEvalOptions

    docs = load_dataset(write_dataset(tmp_path / "d.jsonl", n=2))
    model = ScriptedFakeModel(thesis_facts=2)
    cfg = CoSConfig.tiered(iterations=1, questions_per_iteration=2, train_questions=4)
    opts = RetrievalEvalOptions(
        summary_method="zero-shot",
        deepen="cos-extract",
        repeat_traffic=True,
        paraphrase_traffic=paraphrases,
        rule=HitRule(judge="llm", hit_context="summaries", threshold=0.0),
    )
    result = asyncio.run(
        run_eval(
            model,
            docs,
            methods=["fallback"],
            config=cfg,
            out=tmp_path / "r.json",
            model_name="fake",
            dataset="d",
            refine_from_traffic=True,
            retrieval=opts,
        )
    )
    fb = result["methods"]["fallback"]
    # both documents got traffic, and were deepened once each (a bank, then rounds)
    assert sum(fb["deepen_outcomes"].values()) == 2
    assert sum(1 for t, _ in model.calls if t == "questions") == 2
    assert fb["deepen_calls_per_doc"] > 0
    # every traffic question missed (the thesis holds items 0-1, traffic asks 10-11) and its
    # answer is in the source; refinement taught it, asked again it hits (one of the four
    # is routed to the other topic's chunk and its job taught nothing: 3)
    rep = fb["repeat"]
    assert rep["missed_in_source"] == 4 and rep["hit_again"] >= 3
    assert rep["f1_of_new_hits"] == 1.0
    if not paraphrases:  # the same questions again only: no paraphrase written or asked
        assert "paraphrase" not in fb and not any(t == "paraphrase" for t, _ in model.calls)
        return
    para = fb["paraphrase"]
    # the paraphrases were model-written (the fake's) and asked through the retriever
    # (a paraphrase close enough to its question's verified answer is served it, else it
    # goes the usual way)
    rows = [
        r for rec in read_jsonl(tmp_path / "r.json.docs.jsonl") for r in rec.get("paraphrases", [])
    ]
    assert any(r["question"] == "Could you tell me this: What is the topic0 item 10?" for r in rows)
    assert para["missed_in_source"] == 4 and para["hit_again"] >= 3


def test_distractors_are_indexed_summarised_and_never_asked(tmp_path):
    """A collection of real size: distractors are summarised by the same strategy and put
    in the same index, no question is asked about them, no answer call is spent on them,
    and the figures are over the questioned documents only."""
    from cos_integrations.research.evaluation import RetrievalEvalOptions

    docs = load_dataset(write_dataset(tmp_path / "d.jsonl", n=2))
    extra = tmp_path / "x.jsonl"
    with extra.open("w") as fh:
        for i in range(3):
            line = {
                "doc_id": f"x{i}",
                "title": f"X{i}",
                "text": make_document(8, topic=f"other{i}"),
            }
            fh.write(json.dumps(line) + "\n")
    distractors = load_dataset(extra, questions=False)
    with pytest.raises(DatasetError, match="no question"):
        load_dataset(extra)
    model = ScriptedFakeModel(thesis_facts=2)
    result = asyncio.run(
        run_eval(
            model,
            docs,
            methods=["rag", "fallback"],
            config=CoSConfig.cos(iterations=0, train_questions=2, val_questions=1),
            out=tmp_path / "r.json",
            model_name="fake",
            dataset="d",
            retrieval=RetrievalEvalOptions(summary_method="zero-shot", test_half=True),
            distractors=distractors,
        )
    )
    assert result["docs"] == 2 and result["distractors"] == 3
    assert result["methods"]["rag"]["questions"] == 4  # the test half of 2 x 4
    theses = [m for task, m in model.calls if task == "thesis"]
    assert len(theses) == 5  # every document summarised, distractors included
    records = [json.loads(x) for x in (tmp_path / "r.json.docs.jsonl").read_text().splitlines()]
    x = [r for r in records if r["doc_id"].startswith("x")]
    assert {r["method"] for r in x} == {"zero-shot"} and all(r["heldout_f1"] is None for r in x)
    # no held-out answering call read a distractor's summary alone
    alone = {r["summary"] for r in x}
    contents = [m[0]["content"] for task, m in model.calls if task == "answer"]
    assert contents and not any(any(a in c and "[" not in c for a in alone) for c in contents)
    from cos_integrations.serving.index import CoSIndex

    (index_dir,) = [p for p in tmp_path.iterdir() if ".index-" in p.name]
    assert CoSIndex(index_dir, create=False).summaries.count() == 5
