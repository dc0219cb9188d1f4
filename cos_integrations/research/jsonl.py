"""Run records kept as JSONL, read plain or gzip-compressed.

A run appends its records to a plain ``.jsonl`` file as they finish (a crash loses nothing);
``benchmarks/pack_results.py`` then compresses it to ``NAME.jsonl.gz`` for the repository.
Every reader takes the plain name and finds whichever exists, so the commands in
BENCHMARKS.md work the same on a fresh clone (compressed) and right after a run (plain).
When both exist the plain file is newer: it was unpacked from the archive to be resumed
and may have grown since.

Examples:
    >>> from pathlib import Path
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "run.docs.jsonl"
    >>> append_jsonl(path, {"doc_id": "a"})
    >>> pack(path).name, read_jsonl(path)
    ('run.docs.jsonl.gz', [{'doc_id': 'a'}])
"""

from __future__ import annotations

import gzip
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["append_jsonl", "existing", "lines", "pack", "read_jsonl", "remove", "unpack"]


def _archive(path: Path) -> Path:
    return path.with_name(path.name + ".gz")


def existing(path: str | Path) -> Path | None:
    """The file that holds ``path``'s records: the plain file, else its ``.gz``; None if
    neither exists. A name that already ends in ``.gz`` is taken as it is."""
    path = Path(path)
    if path.is_file():
        return path
    if path.suffix != ".gz" and _archive(path).is_file():
        return _archive(path)
    return None


def lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """The non-blank lines of the file ``path`` (``.gz`` read compressed) with their
    numbers; a line that is not UTF-8 raises ``ValueError`` naming the file and line."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        for number, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ValueError(
                    f"{path}, line {number}: not UTF-8 text (byte {exc.start + 1})"
                ) from None
            if line.strip():
                yield number, line


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Every record of ``path`` (plain or ``.gz``), blank lines skipped; [] when neither
    exists. A line that is not UTF-8 or not JSON raises ``ValueError`` naming the file and
    line."""
    found = existing(path)
    if found is None:
        return []
    records = []
    for number, line in lines(found):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{found}, line {number}: not JSON ({exc.msg})") from exc
    return records


def unpack(path: str | Path) -> Path:
    """Make ``path`` a plain file a run can append to: decompressed from its ``.gz`` when
    only that exists (the archive is kept until :func:`pack` replaces it)."""
    path = Path(path)
    archive = _archive(path)
    if not path.exists() and archive.is_file():
        with gzip.open(archive, "rb") as src, path.open("wb") as dst:
            shutil.copyfileobj(src, dst)
    return path


def remove(path: str | Path) -> None:
    """Remove ``path``'s records, plain and packed: a file rewritten from the start."""
    path = Path(path)
    path.unlink(missing_ok=True)
    _archive(path).unlink(missing_ok=True)


def append_jsonl(path: str | Path, record: dict[str, Any]) -> None:
    """Append one record to ``path``'s plain file (unpacked first if only the archive
    exists, so nothing recorded before is lost)."""
    with unpack(path).open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")


def pack(path: str | Path) -> Path:
    """Compress ``path`` to ``path.gz`` (reproducibly: no name or time in the header, so
    an unchanged file packs to the same bytes) and remove the plain file; returns the
    archive. A path with no plain file returns its archive as it is."""
    path = Path(path)
    archive = _archive(path)
    if not path.is_file():
        return archive
    tmp = archive.with_name(archive.name + ".tmp")
    with path.open("rb") as src, tmp.open("wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as dst:
            shutil.copyfileobj(src, dst)
    tmp.replace(archive)
    path.unlink()
    return archive
