import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from fakes import ScriptedFakeModel

from cos_integrations import ChainOfSummaries, CoSConfig
from cos_integrations.embedded.embeddings import HashingEmbedder
from cos_integrations.serving.index import CoSIndex


@pytest.fixture
def fake_model():
    return ScriptedFakeModel(thesis_facts=2)


@pytest.fixture
def engine(fake_model):
    return ChainOfSummaries(fake_model, CoSConfig.fast())


@pytest.fixture
def index(tmp_path):
    idx = CoSIndex(tmp_path / "index", embedder=HashingEmbedder(256), config=CoSConfig.fast())
    yield idx
    idx.store.close()


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL server for the session (see tests/pg_server.py)."""
    import pg_server

    if not pg_server.available():
        if os.environ.get("COS_REQUIRE_POSTGRES") == "1":
            raise RuntimeError(
                "COS_REQUIRE_POSTGRES=1 but no initdb/pg_ctl: apt-get install postgresql"
            )
        pytest.skip("needs Debian's postgresql package (initdb, pg_ctl)")
    pytest.importorskip("psycopg")
    server = pg_server.PostgresServer().start()
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server):
    """A fresh empty database on the session's PostgreSQL server."""
    return postgres_server.new_database()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    """The store's URL on each backend: a SQLite file, a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.sqlite'}"
    return request.getfixturevalue("postgres_url")


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


@pytest.fixture(params=["sqlite", "postgresql+chroma-server"])
def stack(request, tmp_path):
    """An index on each stack: SQLite with Chroma on disk, PostgreSQL with a Chroma server;
    and the environment a process opening it needs (the store's password)."""
    if request.param == "sqlite":
        return request.getfixturevalue("index"), dict(os.environ)
    url = request.getfixturevalue("postgres_url")
    chroma = request.getfixturevalue("chroma_server")
    idx = CoSIndex(
        tmp_path / "pg-index",
        embedder=HashingEmbedder(256),
        config=CoSConfig.fast(),
        store_url=url,
        chroma_url=chroma,
    )
    assert "cos-test-pw" not in (idx.path / "manifest.json").read_text()
    # the workers find the store in the manifest; its password comes from the environment
    return idx, {**os.environ, "PGPASSWORD": urlsplit(url).password}
