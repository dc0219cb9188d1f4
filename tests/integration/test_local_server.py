"""The embedded llama.cpp server: lifecycle, checksums, real HTTP, no orphans."""

import asyncio
import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest

from cos_integrations import ChainOfSummaries, CoSConfig
from cos_integrations.embedded.server import (
    MODELS,
    LocalModelError,
    LocalModelServer,
    ModelChecksumError,
    PackagedModel,
    resolve_model_path,
)

pytestmark = pytest.mark.integration

DOC = (
    "The rent for Flat 4B is 1,150 euros per month. Rent is due on the 5th day of each "
    "month. The deposit is 2,300 euros. A replacement key costs 25 euros."
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0): look at its state
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_server_is_healthy_on_loopback_and_answers_chat(smoke_server):
    assert smoke_server.base_url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(smoke_server.base_url[:-3] + "/health") as resp:
        assert resp.status == 200
    llm = smoke_server.chat_model()
    res = asyncio.run(llm.chat([{"role": "user", "content": "Say hello."}], max_tokens=8))
    assert res.usage.calls == 1 and res.usage.prompt_tokens > 0 and res.usage.completion_tokens > 0


def test_cos_over_real_http_reuses_the_document_prefix(smoke_server):
    cfg = CoSConfig.cos(
        iterations=1,
        train_questions=2,
        val_questions=1,
        max_output_tokens=96,
        max_summary_words=40,
        context_tokens=4096,
    )
    result = ChainOfSummaries(smoke_server.chat_model(), cfg).summarize(DOC, doc_id="lease")
    assert result.summary and result.usage.calls >= 2
    # thesis and question calls share the byte-identical document prefix: llama.cpp
    # reports those prompt tokens as cached
    assert result.usage.cached_tokens > 0
    assert result.usage.prompt_tokens > result.usage.cached_tokens


def test_stop_ends_the_process_and_is_idempotent():
    server = LocalModelServer("smoke", n_ctx=2048).start()
    pid = server.pid
    assert _alive(pid)
    server.stop()
    server.stop()
    assert not _alive(pid)
    with pytest.raises(LocalModelError, match="not running"):
        _ = server.base_url


def test_no_orphan_when_the_parent_is_killed(tmp_path):
    script = textwrap.dedent(
        """
        import sys, time
        from cos_integrations.embedded.server import LocalModelServer
        s = LocalModelServer("smoke", n_ctx=2048).start()
        print(s.pid, flush=True)
        time.sleep(600)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child_pid = int(parent.stdout.readline())
    assert _alive(child_pid)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 20
    while _alive(child_pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(child_pid), "the model server outlived its parent"


def test_port_in_use_is_a_clear_error_naming_model_and_log(smoke_server):
    busy = int(smoke_server.base_url.rsplit(":", 1)[1].split("/")[0])
    server = LocalModelServer("smoke", n_ctx=2048, port=busy, startup_timeout=60)
    with pytest.raises(LocalModelError) as info:
        server.start()
    message = str(info.value)
    assert "smoke" in message and "log file" in message and str(server.log_path) in message
    assert server.pid is None


def _fake_model_package(tmp_path, monkeypatch, data: bytes, sha: str) -> str:
    pkg = tmp_path / "site" / "cos_test_model_part1"
    (pkg / "data").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "data" / "part01.bin").write_bytes(data)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setitem(
        MODELS,
        "testmodel",
        PackagedModel(
            name="testmodel",
            label="test",
            sha256=sha,
            packages=("cos_test_model_part1",),
            requirement="pip install nothing",
        ),
    )
    monkeypatch.setenv("COS_CACHE_DIR", str(tmp_path / "cache"))
    return "testmodel"


def test_checksum_mismatch_is_a_clear_error_and_leaves_no_file(tmp_path, monkeypatch):
    name = _fake_model_package(tmp_path, monkeypatch, b"GGUF not really", "0" * 64)
    with pytest.raises(ModelChecksumError, match="expected 0000"):
        resolve_model_path(name)
    assert not list((tmp_path / "cache" / "models").glob("*.gguf"))


def test_assembled_once_then_corruption_detected_and_rebuilt(tmp_path, monkeypatch):
    data = b"GGUF" + bytes(range(256)) * 100
    name = _fake_model_package(tmp_path, monkeypatch, data, hashlib.sha256(data).hexdigest())
    path = resolve_model_path(name)
    assert path.read_bytes() == data
    stamp = path.stat().st_mtime_ns
    assert resolve_model_path(name).stat().st_mtime_ns == stamp  # cached, not rebuilt
    path.write_bytes(data[:100])  # a partial file
    rebuilt = resolve_model_path(name)
    assert rebuilt.read_bytes() == data


def test_missing_package_names_the_install_command(monkeypatch):
    monkeypatch.setitem(
        MODELS,
        "ghost",
        PackagedModel(
            name="ghost",
            label="g",
            sha256="0" * 64,
            packages=("no_such_pkg_part1",),
            requirement="pip install 'cos-integrations[models-ghost]'",
        ),
    )
    with pytest.raises(LocalModelError, match=r"models-ghost"):
        resolve_model_path("ghost")


def test_unknown_model_name_or_path():
    with pytest.raises(LocalModelError, match="unknown local model"):
        resolve_model_path("no-such-model")


def test_serve_local_is_reused_by_others_and_a_second_one_refused(tmp_path):
    serve = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cos_integrations.cli",
            "serve-local",
            "--local-model",
            "smoke",
            "--n-ctx",
            "2048",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        line = ""
        deadline = time.monotonic() + 120
        while "serving" not in line and time.monotonic() < deadline:
            line = serve.stdout.readline()
        assert "serving" in line, line
        with LocalModelServer("smoke", n_ctx=2048) as other:
            assert other.reused and other.pid is None
            assert other.base_url in line
            llm = other.chat_model()
            assert asyncio.run(llm.chat([{"role": "user", "content": "hi"}], max_tokens=4)).text
        # stopping the reusing side left the shared server up
        again = LocalModelServer("smoke", n_ctx=2048).start()
        assert again.reused
        again.stop()
        second = subprocess.run(
            [sys.executable, "-m", "cos_integrations.cli", "serve-local", "--local-model", "smoke"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert second.returncode == 1 and "already served at" in second.stderr
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=30)
    fresh = LocalModelServer("smoke", n_ctx=2048)
    fresh.model_path = resolve_model_path("smoke")
    assert fresh.running_shared() is None  # the record went with the server


def test_fault_proxy_in_front_of_the_real_server(smoke_server, tmp_path):
    from openai_server import FakeOpenAIServer

    from cos_integrations import OpenAIChatModel
    from cos_integrations.embedded.embeddings import HashingEmbedder
    from cos_integrations.loaders import SourceDocument
    from cos_integrations.serving.index import CoSIndex

    docs = [SourceDocument(doc_id=f"d{i}", text=f"{DOC} Note {i}.") for i in range(6)]
    with FakeOpenAIServer(
        upstream=smoke_server.base_url,
        fault_rate=0.5,
        seed=1,
        fault_kinds=("429", "503", "reset", "truncated", "empty"),
    ) as proxy:
        llm = OpenAIChatModel(
            "smoke", base_url=proxy.base_url, api_key="sk-test", backoff_base=0.01, max_retries=4
        )
        index = CoSIndex(tmp_path / "ix", embedder=HashingEmbedder())
        cfg = CoSConfig(
            strategy="zero-shot", max_output_tokens=64, max_summary_words=30, context_tokens=4096
        )
        report = asyncio.run(index.aingest(docs, ChainOfSummaries(llm, cfg)))
        injected, completed = list(proxy.injected), proxy.completed
    assert injected  # faults really happened in front of llama.cpp
    assert set(report.summarized) | set(report.failed) == {d.doc_id for d in docs}
    assert index.summaries.count() == len(report.summarized)
    assert report.usage.calls == completed


SHARER = textwrap.dedent(
    """
    import sys
    from cos_integrations.embedded.server import LocalModelServer
    s = LocalModelServer("smoke", n_ctx=2048, share=True).start()
    print(s.pid or "reused", s.base_url, flush=True)
    sys.stdin.readline()   # hold the server until the test says so (or is killed)
    s.stop()
    print("stopped", flush=True)
    """
)


def _sharer(env):
    proc = subprocess.Popen(
        [sys.executable, "-c", SHARER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    first = proc.stdout.readline().split()
    assert len(first) == 2, first
    return proc, first[0], first[1]


def test_two_processes_share_one_server_until_the_last_one_stops(tmp_path, monkeypatch):
    """One server per machine: a second process attaches instead of starting its own, the
    server outlives its starter while another process uses it, and stops with the last."""
    env = {**os.environ, "COS_CACHE_DIR": str(tmp_path)}
    monkeypatch.setenv("COS_CACHE_DIR", str(tmp_path))
    starter, pid, url = _sharer(env)
    pid = int(pid)
    ours = LocalModelServer("smoke", n_ctx=2048, share=True).start()
    try:
        assert ours.reused and ours.base_url == url and ours.pid is None
        # a larger context (or another model) waits rather than running beside it
        with pytest.raises(LocalModelError, match="another local model server runs"):
            LocalModelServer("smoke", n_ctx=4096, share=True, wait=1).start()
        starter.stdin.write("\n")
        starter.stdin.flush()
        assert starter.stdout.readline().strip() == "stopped"
        starter.wait(timeout=30)
        assert _alive(pid), "the server stopped while another process still used it"
        llm = ours.chat_model()
        assert asyncio.run(llm.chat([{"role": "user", "content": "hi"}], max_tokens=4)).text
    finally:
        ours.stop()
    deadline = time.monotonic() + 20
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(pid), "the last user stopped, the server did not"
    assert not list((tmp_path / "servers").glob("*.json"))  # its record went with it
    assert not list((tmp_path / "servers").glob("*.users"))  # and its user registry


def test_a_shared_server_stops_when_its_only_user_is_killed(tmp_path):
    env = {**os.environ, "COS_CACHE_DIR": str(tmp_path)}
    starter, pid, _ = _sharer(env)
    pid = int(pid)
    assert _alive(pid)
    starter.send_signal(signal.SIGKILL)
    starter.wait()
    deadline = time.monotonic() + 20
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(pid), "a shared server outlived its only user"


def test_slots_serve_requests_side_by_side(tmp_path):
    """With slots=2 the child runs two llama.cpp slots (each with the full per-slot context)
    and answers two requests at once; slots=0 is refused."""
    with pytest.raises(ValueError, match="slots"):
        LocalModelServer("smoke", slots=0)
    with LocalModelServer("smoke", n_ctx=2048, slots=2, share=False, reuse=False) as server:
        with urllib.request.urlopen(server.address + "/slots", timeout=10) as r:
            import json

            slots = json.loads(r.read())
        assert len(slots) == 2 and all(s["n_ctx"] == 2048 for s in slots)
        llm = server.chat_model()

        async def two():
            msgs = [{"role": "user", "content": f"Say the number {i}."} for i in (1, 2)]
            return await asyncio.gather(*(llm.chat([m], max_tokens=8) for m in msgs))

        a, b = asyncio.run(two())
        assert a.usage.completion_tokens > 0 and b.usage.completion_tokens > 0


def test_the_engine_counts_tokens_with_the_servers_tokenizer(smoke_server):
    from cos_integrations.embedded.server import ServerTokenizer
    from cos_integrations.text import estimate_tokens

    llm = smoke_server.chat_model()
    engine = ChainOfSummaries(llm, CoSConfig.fast())
    assert isinstance(engine.count_tokens, ServerTokenizer)
    n = engine.count_tokens(DOC)
    assert 0 < n and n != estimate_tokens(DOC)  # the model's own count, not the estimate
    assert engine.count_tokens(DOC) == n and engine.count_tokens("") == 0
    # a server that is gone: the estimate, not an error
    dead = ServerTokenizer("http://127.0.0.1:9", timeout=2)
    assert dead(DOC) == estimate_tokens(DOC)


def test_prompt_lookup_speculation_drafts_from_the_context():
    """draft=N turns on llama.cpp's ngram-simple speculation: copying text from the prompt
    is checked in batches (the server reports drafted and accepted tokens); off by
    default, and a negative draft is refused."""
    import json

    with pytest.raises(ValueError, match="draft"):
        LocalModelServer("smoke", draft=-1)
    text = "The rent for Flat 4B is 1,150 euros per month and is due on the 5th day of each month."
    body = {
        "messages": [{"role": "user", "content": f"Repeat exactly: {text}\n{text}"}],
        "max_tokens": 48,
        "temperature": 0.0,
    }
    drafted = {}
    for draft in (0, 8):
        with LocalModelServer(
            "smoke", n_ctx=2048, draft=draft, draft_ngram=3, share=False, reuse=False
        ) as server:
            req = urllib.request.Request(
                server.address + "/v1/chat/completions",
                json.dumps(body).encode(),
                {"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(req, timeout=120) as r:
                out = json.loads(r.read())
            assert out["choices"][0]["message"]["content"]
            drafted[draft] = out.get("timings", {}).get("draft_n", 0)
    assert drafted[0] == 0 and drafted[8] > 0
