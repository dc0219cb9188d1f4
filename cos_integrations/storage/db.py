"""The store's two database backends behind one small connection interface.

``sqlite:///PATH`` (or a plain path; the default, a file in the index directory) and
``postgresql://USER[:PASSWORD]@HOST[:PORT]/DB`` (psycopg 3, the ``postgres`` extra). The
store writes its SQL once, in the subset both engines share, with ``?`` placeholders; a
:class:`Backend` supplies the few pieces that differ: the DDL types, ``INSERT OR IGNORE``,
row locks (``FOR UPDATE``, ``SKIP LOCKED`` for the refine queue), the write transaction,
the cross-process lock that serialises vector writes, and two SQL expressions (the length
of a JSON list, an event's day). Every connection error names the URL without its password.

Examples:
    >>> backend = open_backend(":memory:")
    >>> backend.name, redact_url("postgresql://cos:s3cret@db:5432/cos")
    ('sqlite', 'postgresql://cos:***@db:5432/cos')
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = [
    "Backend",
    "SQLiteBackend",
    "PostgresBackend",
    "StoreError",
    "StorePart",
    "open_backend",
    "redact_url",
    "is_postgres_url",
]


class StoreError(RuntimeError):
    """The store cannot be opened or used (unreachable server, wrong password, no schema,
    a schema from a newer version): one line that names the URL without its password."""


def is_postgres_url(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://", "postgresql+psycopg://"))


def _with_password(url: str, password: str | None) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user, host = parts.netloc.rsplit("@", 1)
    name = user.split(":", 1)[0]
    auth = f"{name}:{password}" if password is not None else name
    return urlunsplit(parts._replace(netloc=f"{auth}@{host}"))


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (safe for logs and errors)."""
    return _with_password(url, "***")


def strip_password(url: str) -> str:
    """``url`` without its password at all (what a manifest may record)."""
    return _with_password(url, None)


class Row(tuple):
    """A result row readable by position and by column name, like ``sqlite3.Row``."""

    _names: dict[str, int]

    def __new__(cls, values: Sequence[Any], names: dict[str, int]) -> Row:
        row = super().__new__(cls, values)
        row._names = names
        return row

    def __getitem__(self, key):  # type: ignore[override]
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


class Backend:
    """What the store needs from a database; see the module docstring."""

    name = "base"
    url = ""
    for_update = ""  # row lock inside a write transaction
    skip_locked = ""  # the queue's lease: skip rows other workers hold

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        """Run one statement outside a transaction (reads, single-statement writes)."""
        raise NotImplementedError

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """A write transaction; yields an object with ``execute``."""
        raise NotImplementedError
        yield

    @contextmanager
    def lock(self) -> Iterator[Any]:
        """Hold a cross-process lock (and a transaction, yielded) for the duration."""
        raise NotImplementedError
        yield

    def ddl(self, script: str) -> list[str]:
        """The statements of a schema script, in this database's types."""
        return [s for s in script.split(";") if s.strip()]

    def json_len(self, expr: str) -> str:
        return f"json_array_length({expr})"

    def day(self, expr: str) -> str:
        """The local calendar day (YYYY-MM-DD) of a unix time."""
        return f"date({expr}, 'unixepoch', 'localtime')"

    def has_table(self, name: str) -> bool:
        raise NotImplementedError

    def reset_identity(self, table: str, column: str) -> None:
        """After rows were inserted with explicit ids: new rows continue after the largest
        (SQLite's AUTOINCREMENT does so by itself)."""

    def close(self) -> None:
        pass


class StorePart:
    """A part of the store (versions, refine queue, traffic log): its tables, reached through
    the store's backend. :class:`~cos_integrations.storage.store.SummaryStore` composes the
    parts and opens the backend.

    Examples:
        >>> class Counter(StorePart):
        ...     def documents(self) -> int:
        ...         return self._conn().execute("SELECT COUNT(*) FROM documents").fetchone()[0]
    """

    backend: Backend

    def _conn(self) -> Backend:
        """Reads: the backend runs each statement on this thread's connection."""
        return self.backend

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        """A write transaction (SQLite: BEGIN IMMEDIATE; PostgreSQL: with row locks)."""
        with self.backend.transaction() as tx:
            yield tx


class SQLiteBackend(Backend):
    """One SQLite file (WAL, busy timeout), a connection per thread."""

    name = "sqlite"

    def __init__(self, path: str) -> None:
        self.path = path
        self.url = "sqlite:///" + path if path != ":memory:" else "sqlite://:memory:"
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._memory: sqlite3.Connection | None = None

    def _conn(self) -> sqlite3.Connection:
        if self.path == ":memory:":
            if self._memory is None:
                self._memory = sqlite3.connect(
                    ":memory:", check_same_thread=False, isolation_level=None
                )
                self._memory.row_factory = sqlite3.Row
            return self._memory
        held = getattr(self._local, "held", None)
        if held is not None:
            return held
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
                conn.row_factory = sqlite3.Row
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute("PRAGMA busy_timeout=30000")
            except sqlite3.Error as exc:
                raise StoreError(f"cannot open the store {self.path}: {exc}") from exc
            self._local.conn = conn
        return conn

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        return self._conn().execute(sql, tuple(args))

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """BEGIN IMMEDIATE: writers queue up instead of failing half-way."""
        held = getattr(self._local, "held", None)
        if held is not None:  # inside lock(): that transaction is ours already
            yield held
            return
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @contextmanager
    def lock(self) -> Iterator[Any]:
        """The database's write lock, on a connection of its own, across processes."""
        if self.path == ":memory:":
            yield self._conn()
            return
        conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
        conn.row_factory = sqlite3.Row
        try:
            conn.execute("PRAGMA busy_timeout=60000")
            conn.execute("BEGIN IMMEDIATE")
            self._local.held = conn
            try:
                yield conn
            finally:
                self._local.held = None
                conn.execute("COMMIT")
        finally:
            conn.close()

    def has_table(self, name: str) -> bool:
        sql = "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?"
        return self.execute(sql, (name,)).fetchone() is not None

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


_PLACEHOLDER = re.compile(r"\?")
_OR_IGNORE = re.compile(r"^\s*INSERT OR IGNORE INTO", re.I)


def _pg_sql(sql: str) -> str:
    """The store's SQL for PostgreSQL: ``%s`` placeholders, ``ON CONFLICT DO NOTHING``
    (before a ``RETURNING`` clause)."""
    out = _PLACEHOLDER.sub("%s", sql.replace("%", "%%"))
    if _OR_IGNORE.match(out):
        out = _OR_IGNORE.sub("INSERT INTO", out)
        head, sep, tail = out.partition(" RETURNING ")
        out = head + " ON CONFLICT DO NOTHING" + (sep + tail if sep else "")
    return out


class _PGResult:
    """A statement's result, read at once (the connection goes back to the pool): the
    part of a DB-API cursor the store reads, with :class:`Row` rows."""

    def __init__(self, cur: Any) -> None:
        names = [d.name for d in cur.description] if cur.description else []
        index = {n: i for i, n in enumerate(names)}
        self.rowcount = cur.rowcount
        self._rows = [Row(r, index) for r in cur.fetchall()] if cur.description else []

    def fetchone(self) -> Row | None:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[Row]:
        return list(self._rows)

    def __iter__(self):
        return iter(self._rows)


class _PGConn:
    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, sql: str, args: Sequence[Any] = ()) -> _PGResult:
        with self._conn.cursor() as cur:
            cur.execute(_pg_sql(sql), tuple(args))
            return _PGResult(cur)


class PostgresBackend(Backend):
    """PostgreSQL through psycopg 3 and its connection pool (``COS_PG_POOL`` connections
    at most, default 10, per process): reads and single-statement writes in autocommit,
    explicit transactions for the rest, row locks for compare-and-swap, ``SKIP LOCKED``
    for the queue and an advisory lock for vector writes."""

    name = "postgresql"
    for_update = " FOR UPDATE"
    skip_locked = " FOR UPDATE SKIP LOCKED"
    LOCK_KEY = 0x636F73  # "cos": the advisory lock that serialises vector writes

    def __init__(self, url: str) -> None:
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError as exc:
            raise StoreError(
                f"{redact_url(url)}: PostgreSQL needs psycopg 3 and psycopg-pool: "
                "pip install 'cos-integrations[postgres]'"
            ) from exc
        self._psycopg = psycopg
        self.url = url.replace("postgresql+psycopg://", "postgresql://", 1)
        self._local = threading.local()
        self._connect().close()  # fail now, with the server's own reason, if it cannot
        self._pool_class = ConnectionPool
        self._pool: Any = None
        self._pool_lock = threading.Lock()

    def _get_pool(self) -> Any:
        """The pool, opened on first use (and again after :meth:`close`, as SQLite's
        connections are)."""
        with self._pool_lock:
            if self._pool is None:
                self._pool = self._pool_class(
                    self.url,
                    min_size=1,
                    max_size=max(1, int(os.environ.get("COS_PG_POOL", "10"))),
                    kwargs={"autocommit": True, "connect_timeout": 10},
                    timeout=60,
                    open=True,
                    name="cos-store",
                )
            return self._pool

    def _connect(self) -> Any:
        try:
            return self._psycopg.connect(self.url, autocommit=True, connect_timeout=10)
        except self._psycopg.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            why = _redact_text(first, self.url)
            raise StoreError(f"cannot connect to the store {redact_url(self.url)}: {why}") from None

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        """This thread's transaction's connection if it is in one, else one from the pool."""
        held = getattr(self._local, "held", None)
        if held is not None:
            yield held
            return
        try:
            with self._get_pool().connection() as conn:
                yield conn
        except self._psycopg.OperationalError as exc:
            raise StoreError(f"the store {redact_url(self.url)} failed: {exc}") from exc

    def execute(self, sql: str, args: Sequence[Any] = ()) -> _PGResult:
        with self._connection() as conn:
            return _PGConn(conn).execute(sql, args)

    @contextmanager
    def transaction(self) -> Iterator[_PGConn]:
        held = getattr(self._local, "held", None)
        if held is not None:  # nested, or inside lock(): that transaction is ours already
            yield _PGConn(held)
            return
        with self._connection() as conn, conn.transaction():
            self._local.held = conn
            try:
                yield _PGConn(conn)
            finally:
                self._local.held = None

    @contextmanager
    def lock(self) -> Iterator[_PGConn]:
        with self.transaction() as tx:
            tx.execute("SELECT pg_advisory_xact_lock(?)", (self.LOCK_KEY,))
            yield tx

    def ddl(self, script: str) -> list[str]:
        script = re.sub(
            r"INTEGER PRIMARY KEY AUTOINCREMENT",
            "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
            script,
        )
        script = re.sub(r"\bREAL\b", "DOUBLE PRECISION", script)
        return super().ddl(script)

    def json_len(self, expr: str) -> str:
        return f"json_array_length(({expr})::json)"

    def reset_identity(self, table: str, column: str) -> None:
        self.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'),"
            f" GREATEST((SELECT MAX({column}) FROM {table}), 1))"
        )

    def day(self, expr: str) -> str:
        return f"to_char(to_timestamp({expr}), 'YYYY-MM-DD')"

    def has_table(self, name: str) -> bool:
        sql = (
            "SELECT 1 FROM information_schema.tables"
            " WHERE table_schema=current_schema() AND table_name=?"
        )
        return self.execute(sql, (name,)).fetchone() is not None

    def close(self) -> None:
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


def _redact_text(text: str, url: str) -> str:
    password = urlsplit(url).password
    return text.replace(password, "***") if password else text


def open_backend(url_or_path: str | Path) -> Backend:
    """The backend for a store URL (``sqlite:///PATH``, ``postgresql://...``) or a path."""
    text = str(url_or_path)
    if is_postgres_url(text):
        return PostgresBackend(text)
    if text.startswith("sqlite:///"):
        text = text[len("sqlite:///") :]
    elif text.startswith("sqlite://"):
        text = text[len("sqlite://") :] or ":memory:"
    elif "://" in text:
        raise StoreError(
            f"unsupported store URL {redact_url(text)}: use sqlite:///PATH or postgresql://..."
        )
    return SQLiteBackend(text)
