"""The `cos` CLI on a temp index, over real HTTP to the embedded smoke model."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

DOCS = {
    "lease.txt": "The rent is 1,150 euros per month. Rent is due on the 5th day of each month.",
    "garden.md": "# Garden rules\n\nThe garden gate is locked at 22:00. Barbecues are allowed.",
}


def cos(*args, env=None, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "cos_integrations.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        timeout=900,
    )


@pytest.fixture
def folder(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    for name, text in DOCS.items():
        (d / name).write_text(text)
    return d


SMALL = [
    "--preset",
    "cos-fast",
    "--strategy",
    "zero-shot",
    "--local-model",
    "smoke",
    "--embedder",
    "hashing",
]


def test_help_on_every_command():
    for command in ([], ["ingest"], ["query"], ["refine"], ["serve-local"]):
        out = cos(*command, "--help")
        assert out.returncode == 0 and "Usage" in out.stdout


def test_ingest_query_and_reingest_without_model_calls(folder, tmp_path):
    index = tmp_path / "index"
    first = cos("ingest", str(folder), "--index", str(index), *SMALL)
    assert first.returncode == 0, first.stderr + first.stdout
    assert "model: embedded smoke" in first.stdout and "summarized" in first.stdout
    manifest = json.loads((index / "manifest.json").read_text())
    assert manifest["embedding"]["name"] == "hashing-bow-256"
    assert manifest["collections"] == {"summaries": "cos_summaries", "chunks": "cos_chunks"}
    again = cos("ingest", str(folder), "--index", str(index), *SMALL)
    assert again.returncode == 0
    assert "2 unchanged, 0 to summarise" in again.stdout
    assert "model:" not in again.stdout  # no model server was even started
    # without --preset a re-ingest keeps the config the index was built with: a changed
    # default (now "tiered") must not re-summarise every document
    plain = cos("ingest", str(folder), "--index", str(index), "--local-model", "smoke")
    assert plain.returncode == 0, plain.stderr + plain.stdout
    said = " ".join(plain.stdout.split())  # rich wraps long lines
    assert "2 unchanged, 0 to summarise (preset as recorded in the index" in said
    assert "model:" not in plain.stdout
    hit = cos(
        "query",
        "When is rent due?",
        "--index",
        str(index),
        "--threshold",
        "0.0",
        "--judge",
        "score",
    )
    assert hit.returncode == 0 and "HIT" in hit.stdout and "lease.txt" in hit.stdout
    miss = cos(
        "query",
        "When is rent due?",
        "--index",
        str(index),
        "--threshold",
        "0.999",
        "--judge",
        "score",
    )
    assert "MISS" in miss.stdout and "queued refine job" in miss.stdout
    assert "[chunk]" in miss.stdout


def test_bad_paths_are_reported_per_file_and_the_rest_ingested(folder, tmp_path):
    (folder / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (folder / "empty.txt").write_text("   \n")
    index = tmp_path / "index"
    out = cos("ingest", str(folder), str(tmp_path / "missing"), "--index", str(index), *SMALL)
    assert out.returncode == 1
    assert "path does not exist" in out.stderr and "unsupported file type .png" in out.stderr
    assert "no text" in out.stderr
    assert out.stdout.count("summarized:") == 2


def test_query_on_a_missing_index_is_a_clear_error(tmp_path):
    out = cos("query", "x", "--index", str(tmp_path / "none"))
    assert out.returncode == 2 and "not a CoS index" in out.stderr


def test_ingest_and_query_against_a_chroma_server(folder, tmp_path, chroma_server):
    index = tmp_path / "index"
    out = cos("ingest", str(folder), "--index", str(index), "--chroma-url", chroma_server, *SMALL)
    assert out.returncode == 0, out.stderr + out.stdout
    assert not (index / "chroma.sqlite3").exists()  # vectors live in the server
    from urllib.parse import urlparse

    import chromadb

    url = urlparse(chroma_server)
    client = chromadb.HttpClient(host=url.hostname, port=url.port)
    assert client.get_collection("cos_summaries").count() == 2
    hit = cos(
        "query", "garden gate", "--index", str(index), "--threshold", "0.0", "--judge", "score"
    )
    assert "HIT" in hit.stdout and "garden.md" in hit.stdout


def test_eval_on_the_embedded_model_resumes_across_server_restarts(tmp_path):
    """Each run starts a fresh server on a new port; the second run must still resume."""
    data = tmp_path / "d.jsonl"
    row = {
        "doc_id": "lease",
        "title": "Lease",
        "text": DOCS["lease.txt"],
        "qas": [{"question": "When is rent due?", "answers": ["the 5th day of each month"]}],
    }
    data.write_text(json.dumps(row) + "\n")
    out = tmp_path / "r.json"
    args = ["eval", "--data", str(data), "--methods", "zero-shot,content", "--out", str(out)]
    args += ["--local-model", "smoke", "--context-tokens", "4096", "--max-summary-words", "30"]
    first = cos(*args)
    assert first.returncode == 0, first.stderr + first.stdout
    saved = json.loads(out.read_text())
    assert saved["model"].endswith("(embedded)") and "127.0.0.1" not in saved["model"]
    # one summary call, two when the summary describes the document and is asked again
    assert saved["methods"]["zero-shot"]["calls_per_doc"] in (1, 2)
    second = cos(*args)
    assert second.returncode == 0, second.stderr + second.stdout
    assert "lease zero-shot" in first.stdout and "lease zero-shot" not in second.stdout
    assert json.loads(out.read_text())["methods"] == saved["methods"]
