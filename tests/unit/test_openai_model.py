"""OpenAIChatModel over real HTTP (a local OpenAI-compatible server), retries and errors."""

import asyncio
import logging

import pytest
from fakes import ScriptedFakeModel, facts, make_document
from openai_server import FakeOpenAIServer

from cos_integrations import ChainOfSummaries, CoSConfig, CoSModelError, OpenAIChatModel

MSG = [{"role": "user", "content": "hello"}]
KEY = "sk-secret-test-key-123"


def chat(model, **kw):
    return asyncio.run(model.chat(MSG, **kw))


def fast_model(url, **kw):
    return OpenAIChatModel("fake", base_url=url, api_key=KEY, backoff_base=0.01, **kw)


def test_chat_over_http_with_usage_and_cached_tokens():
    with FakeOpenAIServer() as srv:
        res = chat(fast_model(srv.base_url))
    assert res.usage.calls == 1 and res.usage.prompt_tokens == 100
    assert res.usage.cached_tokens == 40 and res.usage.completion_tokens == 10
    assert {k.lower(): v for k, v in srv.headers[0].items()}["authorization"] == f"Bearer {KEY}"


def test_llamacpp_cache_timings_are_read():
    with FakeOpenAIServer(cached_style="llamacpp") as srv:
        assert chat(fast_model(srv.base_url)).usage.cached_tokens == 60


def test_retries_429_with_retry_after_then_500_then_succeeds(caplog):
    faults = [{"status": 429, "retry_after": "0"}, {"status": 500}]
    with FakeOpenAIServer(faults=faults) as srv, caplog.at_level(logging.INFO):
        res = chat(fast_model(srv.base_url))
    assert len(srv.requests) == 3 and res.text
    assert any("HTTP 429" in r.message for r in caplog.records)
    assert all(KEY not in r.getMessage() for r in caplog.records)


def test_persistent_503_raises_typed_error_without_the_key():
    with FakeOpenAIServer(faults=[{"status": 503}] * 10) as srv:
        with pytest.raises(CoSModelError) as info:
            chat(fast_model(srv.base_url, max_retries=2))
    assert info.value.status == 503 and info.value.attempts == 3
    assert len(srv.requests) == 3 and KEY not in str(info.value)


def test_client_errors_are_not_retried():
    with FakeOpenAIServer(faults=[{"status": 401}]) as srv:
        with pytest.raises(CoSModelError) as info:
            chat(fast_model(srv.base_url))
    assert info.value.status == 401 and len(srv.requests) == 1


def test_timeout_is_retried_once_with_twice_the_time_then_reported():
    """A timeout is not retried blindly (it was five full waits): one retry with twice the
    time, then an error that says how long it waited and what to change."""
    faults = [{"sleep": 1.5}, {"sleep": 1.5}, {"sleep": 1.5}]
    with FakeOpenAIServer(faults=faults) as srv:
        with pytest.raises(CoSModelError) as info:
            chat(fast_model(srv.base_url, timeout=0.3, max_retries=4))
        assert len(srv.requests) == 2  # not max_retries + 1
    msg = str(info.value)
    assert info.value.status is None and "timed out after 1s" in msg and "COS_TIMEOUT" in msg
    # the doubled time is what saves a call that is merely slow
    with FakeOpenAIServer(faults=[{"sleep": 0.5}]) as srv:
        res = chat(fast_model(srv.base_url, timeout=0.3))
        assert res.text and len(srv.requests) == 2


def test_default_timeout_scales_with_the_prompt_and_the_tokens_asked(monkeypatch):
    monkeypatch.delenv("COS_TIMEOUT", raising=False)
    model = OpenAIChatModel("fake", base_url="http://127.0.0.1:9/v1")
    short = model.timeout_for(MSG, 64)
    long = model.timeout_for([{"role": "user", "content": "x" * 36_000}], 1024)
    assert short == pytest.approx(60 + 5 / 3.6 / 20 + 32)
    assert long == pytest.approx(60 + 10_000 / 20 + 512)
    monkeypatch.setenv("COS_TIMEOUT", "7")
    assert OpenAIChatModel("fake", base_url="http://127.0.0.1:9/v1").timeout_for(MSG, 64) == 7


def test_connection_refused_is_a_model_error():
    with FakeOpenAIServer() as srv:
        url = srv.base_url
    with pytest.raises(CoSModelError, match="connection error"):
        chat(fast_model(url, max_retries=1))


def test_server_without_structured_output_falls_back_once():
    with FakeOpenAIServer(faults=[{"reject_response_format": True}]) as srv:
        model = fast_model(srv.base_url)
        res = chat(model, json_schema={"name": "x", "schema": {"type": "object"}})
        chat(model, json_schema={"name": "x", "schema": {"type": "object"}})
    assert res.text and model.structured_output is False
    assert "response_format" in srv.requests[0]
    assert "response_format" not in srv.requests[1] and "response_format" not in srv.requests[2]


def test_a_request_refused_with_and_without_the_schema_keeps_structured_output():
    """A prompt over the context is a 400 too: asked again without the schema and refused
    again, the request was the cause, and later calls still send the schema (it was
    switched off for good, the grounded judge losing its JSON for the rest of the run)."""
    schema = {"name": "x", "schema": {"type": "object"}}
    too_long = {"status": 400}
    with FakeOpenAIServer(faults=[too_long, too_long]) as srv:
        model = fast_model(srv.base_url)
        with pytest.raises(CoSModelError) as info:
            chat(model, json_schema=schema)
        assert info.value.status == 400 and model.structured_output is True
        assert chat(model, json_schema=schema).text
    assert ["response_format" in r for r in srv.requests] == [True, False, True]


def test_key_never_in_repr():
    model = OpenAIChatModel("m", base_url="http://127.0.0.1:1/v1", api_key=KEY)
    assert KEY not in repr(model) and KEY not in str(vars(model).get("model"))


def test_settings_from_environment(monkeypatch):
    monkeypatch.setenv("COS_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("COS_MODEL", "env-model")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = OpenAIChatModel()
    assert (model.model, model.base_url) == ("env-model", "http://127.0.0.1:9/v1")
    explicit = OpenAIChatModel("arg-model", base_url="http://127.0.0.1:8/v1")
    assert (explicit.model, explicit.base_url) == ("arg-model", "http://127.0.0.1:8/v1")


def test_no_endpoint_configured_is_a_clear_error(monkeypatch):
    for var in ("COS_BASE_URL", "OPENAI_API_KEY", "COS_MODEL"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ValueError, match="COS_BASE_URL or OPENAI_API_KEY"):
        OpenAIChatModel()


def test_full_chain_of_summaries_over_http():
    fake = ScriptedFakeModel(thesis_facts=1)
    with FakeOpenAIServer(fake) as srv:
        cos = ChainOfSummaries(fast_model(srv.base_url), CoSConfig.fast())
        result = cos.summarize(make_document(8), doc_id="http-doc")
    assert result.usage.calls == len(srv.requests) == len(fake.calls)
    assert result.best.train_score > result.iterations[0].train_score
    assert len(facts(result.summary)) > 1
    assert any("response_format" in r for r in srv.requests)


async def test_one_client_per_event_loop_and_concurrent_calls():
    with FakeOpenAIServer() as srv:
        model = fast_model(srv.base_url)
        results = await asyncio.gather(*(model.chat(MSG) for _ in range(5)))
        assert all(r.text for r in results)
        # a sync call from another loop (a helper thread) must not reuse this loop's client
        cos = ChainOfSummaries(model, CoSConfig(strategy="zero-shot"))
        assert cos.summarize(make_document(3)).summary


def test_truncated_json_body_is_retried():
    with FakeOpenAIServer(faults=[{"kind": "truncated"}, {"kind": "reset"}]) as srv:
        res = chat(fast_model(srv.base_url))
    assert res.text and len(srv.requests) == 3
