"""Copy a store to another database (``cos migrate-store``): SQLite to PostgreSQL, or any
backend to any other.

Idempotent: every row keeps its key (ids included), so a second run copies nothing new; an
interrupted run is finished by running it again. Then it verifies: the row count of every
table and every document's current version must match the source, else
:class:`~cos_integrations.storage.db.StoreError` says what differs (e.g. the destination already
held another index's data). The source is only read.

Examples:
    >>> report = copy_store(SummaryStore("index/cos.sqlite"),            # doctest: +SKIP
    ...                     SummaryStore("postgresql://cos@db/cos"))
    >>> report.copied["documents"], report.verified                      # doctest: +SKIP
    (2000, True)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cos_integrations.storage.db import StoreError
from cos_integrations.storage.store import SummaryStore

__all__ = ["copy_store", "MigrationReport", "TABLES"]

# parents first; (table, key columns)
TABLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("documents", ("doc_id",)),
    ("summary_versions", ("doc_id", "version")),
    ("questions", ("id",)),
    ("refine_jobs", ("id",)),
    ("not_in_source", ("doc_id", "norm")),
    ("events", ("id",)),
    ("actions", ("id",)),
    ("answers", ("id",)),
    ("checks", ("id",)),
)
# integer ids to carry on
_IDENTITY = {"questions", "refine_jobs", "events", "actions", "answers", "checks"}


@dataclass
class MigrationReport:
    """Rows per table in the source, rows newly copied, and whether it verified."""

    source: dict[str, int] = field(default_factory=dict)
    copied: dict[str, int] = field(default_factory=dict)
    verified: bool = False


def copy_store(src: SummaryStore, dst: SummaryStore, *, batch: int = 500) -> MigrationReport:
    """Copy every row of ``src`` into ``dst`` (see the module docstring)."""
    if src.schema_version != dst.schema_version:
        raise StoreError(
            f"schema versions differ: {src.path} has {src.schema_version}, {dst.path} "
            f"{dst.schema_version}; upgrade the older one first"
        )
    report = MigrationReport()
    for table, keys in TABLES:
        rows = src.query(f"SELECT * FROM {table} ORDER BY {', '.join(keys)}")
        report.source[table] = len(rows)
        copied = 0
        for start in range(0, len(rows), batch):
            copied += dst.copy_rows(table, rows[start : start + batch])
        if rows and table in _IDENTITY:
            dst.backend.reset_identity(table, "id")
        report.copied[table] = copied
    _verify(src, dst, report)
    report.verified = True
    return report


def _verify(src: SummaryStore, dst: SummaryStore, report: MigrationReport) -> None:
    problems = []
    for table, _ in TABLES:
        n = int(dst.query(f"SELECT COUNT(*) FROM {table}")[0][0])
        if n != report.source[table]:
            problems.append(f"{table}: {report.source[table]} rows in the source, {n} there")
    sql = "SELECT doc_id, current_version FROM documents ORDER BY doc_id"
    if [tuple(r) for r in src.query(sql)] != [tuple(r) for r in dst.query(sql)]:
        problems.append("current versions differ")
    if problems:
        raise StoreError(
            f"{dst.path} does not match {src.path} after the copy ({'; '.join(problems)}): "
            "did it already hold another index?"
        )
