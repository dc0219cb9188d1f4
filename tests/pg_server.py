"""A real PostgreSQL server for the tests: Debian's binaries, a temporary data directory, a
free local port, run as a non-root user (``postgres`` when the tests run as root), stopped
afterwards. Password authentication (scram) for user ``cos`` / ``cos-test-pw``, so the
wrong-password path is real. No mocks of the database.

Skipped when the binaries are missing, unless COS_REQUIRE_POSTGRES=1 (set by .ci/run,
which installs the package), where that is an error.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

USER, PASSWORD = "cos", "cos-test-pw"


def find_bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def available() -> bool:
    return bool(find_bin("initdb") and find_bin("pg_ctl"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="cos-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.as_root = os.geteuid() == 0

    def _run(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        if self.as_root:  # initdb and postgres refuse to run as root
            cmd = ("runuser", "-u", "postgres", "--", *cmd)
        return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=120)

    def start(self) -> PostgresServer:
        pwfile = self.root / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if self.as_root:
            shutil.chown(self.root, "postgres")
            shutil.chown(pwfile, "postgres")
        self._run(
            find_bin("initdb"), "-D", str(self.data), "-U", USER, "--pwfile", str(pwfile),
            "-A", "scram-sha-256", "-E", "UTF8", "--no-sync",
        )  # fmt: skip
        opts = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
            "-c max_connections=200"
        )
        self._run(
            find_bin("pg_ctl"), "-D", str(self.data), "-o", opts, "-l",
            str(self.root / "log"), "-w", "-t", "60", "start",
        )  # fmt: skip
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        return self

    def url(self, db: str = "postgres", password: str | None = PASSWORD) -> str:
        auth = f"{USER}:{password}" if password is not None else USER
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{db}"

    def new_database(self) -> str:
        """A fresh, empty database; returns its URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        self._run(find_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop", check=False)
        shutil.rmtree(self.root, ignore_errors=True)
