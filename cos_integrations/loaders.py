"""Read files into documents: ``.txt``, ``.md``, ``.html``/``.htm`` and ``.pdf``.

Every problem is reported per file and never stops the others: a missing path, an
unreadable or unsupported file, binary bytes, a PDF that is not one, empty text. Invalid
UTF-8 in a text file is decoded with replacement characters and reported as a warning.
Symlinks that leave the ingested folder are not followed unless asked.

Examples:
    >>> docs, problems = load_paths(["examples/docs"])     # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cos_integrations.sections import (
    MAX_SECTION_WORDS,
    MIN_SECTION_WORDS,
    PATH_SEPARATOR,
    main_content,
    split_html,
    split_markdown,
)

__all__ = [
    "SourceDocument",
    "LoadProblem",
    "load_paths",
    "load_file",
    "load_sections",
    "load_site",
    "SUPPORTED",
    "SECTIONED",
    "doc_id_for",
]

log = logging.getLogger(__name__)

SUPPORTED = {".txt", ".md", ".markdown", ".html", ".htm", ".pdf"}
# the file types load_paths(sections=True) splits at their headings
SECTIONED = {".md", ".markdown", ".html", ".htm"}
MAX_BYTES = 20 * 1024 * 1024


@dataclass
class SourceDocument:
    """A document to summarise: its id, text and where it came from."""

    doc_id: str
    text: str
    source: str = ""
    title: str = ""
    metadata: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def flat_metadata(self) -> dict[str, str]:
        """What a framework document carries: id, source, title and, for a page's section,
        its page, anchor, heading path (one string) and parent section, all strings.

        Examples:
            >>> SourceDocument("a.md#b", "text", "a.md#b", "A › B").flat_metadata()["title"]
            'A › B'
        """
        meta = {"doc_id": self.doc_id, "source": self.source, "title": self.title}
        if "page" in self.metadata:
            meta |= {
                "page": str(self.metadata["page"]),
                "anchor": str(self.metadata.get("anchor") or ""),
                "heading_path": PATH_SEPARATOR.join(self.metadata.get("heading_path") or []),
                "parent": str(self.metadata.get("parent") or ""),
            }
        return meta


@dataclass
class LoadProblem:
    """A file that was skipped, and why."""

    path: str
    reason: str
    error: bool = True  # False for deliberate skips (duplicates, outside symlinks)


def doc_id_for(path: Path, root: Path | None = None) -> str:
    """A readable id that survives moving the folder: ``ROOTNAME/relative/path``.

    Ingesting ``docs/`` gives ``docs/lease.md``; a single file gives its name. Very long
    paths are cut and suffixed with a hash of the whole path.
    """
    path = path.absolute()
    if root is not None and path.is_relative_to(root.absolute()):
        text = f"{root.name}/{path.relative_to(root.absolute()).as_posix()}"
    else:
        text = path.name
    if len(text) > 200:
        text = f"{text[:180]}#{hashlib.sha1(text.encode()).hexdigest()[:12]}"
    return text


def _check_size(path: Path) -> None:
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise ValueError(f"file is {size} bytes, over the {MAX_BYTES}-byte limit")


def _looks_binary(data: bytes) -> bool:
    head = data[:8192]
    if b"\x00" in head:
        return True
    ctrl = sum(1 for b in head if b < 9 or 13 < b < 32)
    return bool(head) and ctrl / len(head) > 0.1


def _title_of(text: str, fallback: str) -> str:
    for line in text.splitlines():
        line = line.strip().lstrip("#").strip()
        if line:
            return line[:120]
    return fallback


def load_file(path: Path, *, root: Path | None = None) -> SourceDocument:
    """Read one file; raises ``ValueError`` with the reason when it cannot be used."""
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED:
        raise ValueError(f"unsupported file type {suffix or '(none)'}")
    _check_size(path)
    warnings: list[str] = []
    if suffix == ".pdf":
        text = _pdf_text(path.read_bytes())
    else:
        text = _read_text(path, warnings)
        if suffix in (".html", ".htm"):
            text = _html_text(text)
    text = text.replace("\r\n", "\n").strip()
    if not text:
        raise ValueError("no text (empty or whitespace only)")
    return SourceDocument(
        doc_id=doc_id_for(path, root),
        text=text,
        source=str(path),
        title=_title_of(text, path.stem),
        metadata={"path": str(path), "file_type": suffix.lstrip(".")},
        warnings=warnings,
    )


def _read_text(path: Path, warnings: list[str]) -> str:
    """A text file's content (UTF-8; undecodable bytes replaced, with a warning)."""
    data = path.read_bytes()
    if data.startswith(b"%PDF-"):
        raise ValueError("a PDF file with a text extension; rename it to .pdf")
    if _looks_binary(data):
        raise ValueError("binary content in a text file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        warnings.append(f"invalid UTF-8 at byte {exc.start}; replaced undecodable bytes")
        return data.decode("utf-8", errors="replace")


def load_sections(
    path: Path,
    *,
    root: Path | None = None,
    min_words: int = MIN_SECTION_WORDS,
    max_words: int = MAX_SECTION_WORDS,
) -> list[SourceDocument]:
    """One document per section of a Markdown or HTML page (see
    :mod:`cos_integrations.sections`): id and source ``PAGE#anchor``, title the heading
    path, metadata the page, anchor, heading path and parent section. Raises
    ``ValueError`` with the reason when the page cannot be used.

    Examples:
        >>> docs = load_sections(Path("docs/guide.md"), root=Path("docs"))  # doctest: +SKIP
        >>> [d.doc_id for d in docs]  # doctest: +SKIP
        ['docs/guide.md#guide', 'docs/guide.md#install']
    """
    suffix = path.suffix.lower()
    if suffix not in SECTIONED:
        raise ValueError(f"sections need Markdown or HTML, not {suffix or '(none)'}")
    _check_size(path)
    warnings: list[str] = []
    raw = _read_text(path, warnings)
    split = split_html if suffix in (".html", ".htm") else split_markdown
    sections = split(raw, min_words=min_words, max_words=max_words)
    page = doc_id_for(path, root)
    docs = []
    for s in sections:
        if not s.body.strip():
            continue
        ref = f"#{s.anchor}" if s.anchor else ""
        parent = f"{page}#{s.parent_anchor}" if s.parent_anchor else page
        docs.append(
            SourceDocument(
                doc_id=f"{page}{ref}",
                text=s.text,
                source=f"{path}{ref}",
                title=s.title or path.stem,
                metadata={
                    "path": str(path),
                    "file_type": suffix.lstrip("."),
                    "page": page,
                    "page_source": str(path),
                    "anchor": s.anchor,
                    "heading_path": s.path,
                    "parent": parent,
                    "merged_anchors": s.merged,
                },
                warnings=list(warnings),
            )
        )
    if not docs:
        raise ValueError("no text (no section with a body)")
    return docs


def _optional(module: str, what: str):
    """Import a reader that only the ``local`` extra installs; a clear error without it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ValueError(
            f"reading {what} needs {module}: pip install 'cos-integrations[local]'"
        ) from exc


def _html_text(html: str) -> str:
    """A whole page's text: its main content (:func:`~cos_integrations.sections.main_content`:
    no navigation, sidebars, headers or footers), as Markdown-like text."""
    html2text = _optional("html2text", "HTML")

    conv = html2text.HTML2Text()
    conv.ignore_images = True
    conv.ignore_links = True
    conv.body_width = 0  # no hard wrapping
    return conv.handle(main_content(html).html or "")


def _pdf_text(data: bytes) -> str:
    import io

    pypdf = _optional("pypdf", "PDF")
    PdfReader, PdfReadError = pypdf.PdfReader, pypdf.errors.PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        return "\n\n".join((page.extract_text() or "") for page in reader.pages)
    except (PdfReadError, ValueError, KeyError) as exc:
        raise ValueError(f"unreadable PDF: {exc}") from exc


def load_paths(
    paths: list[str | os.PathLike],
    *,
    follow_symlinks: bool = False,
    sections: bool = True,
    min_words: int = MIN_SECTION_WORDS,
    max_words: int = MAX_SECTION_WORDS,
) -> tuple[list[SourceDocument], list[LoadProblem]]:
    """Load files and folders (recursively, in sorted order). Returns documents and problems.

    Duplicate files (same text) are loaded once; the others are reported. ``sections``
    (the default): Markdown and HTML pages become one document per section
    (:func:`load_sections`, short sections merged between ``min_words`` and
    ``max_words``), so a hit cites the section that holds its answer; ``False``: one
    document a page. Other files stay whole; HTML is read from its main content either way.
    """
    docs: list[SourceDocument] = []
    problems: list[LoadProblem] = []
    seen_hashes: dict[str, str] = {}
    for raw in paths:
        base = Path(raw)
        if not base.exists():
            problems.append(LoadProblem(str(base), "path does not exist"))
            continue
        if base.is_file():
            files, root = [base], base.parent
        else:
            root = base.absolute()
            files = sorted(p for p in base.rglob("*") if p.is_file() or p.is_symlink())
        for path in files:
            if path.name.startswith("."):
                continue
            if path.is_symlink() and not follow_symlinks:
                target = path.resolve()
                if not target.is_relative_to(root.resolve()):
                    problems.append(
                        LoadProblem(
                            str(path), "symlink leaves the ingested folder (not followed)", False
                        )
                    )
                    continue
            if base.is_dir() and path.suffix.lower() not in SUPPORTED:
                problems.append(LoadProblem(str(path), f"unsupported file type {path.suffix}"))
                continue
            where = root if base.is_dir() else None
            try:
                if sections and path.suffix.lower() in SECTIONED:
                    found = load_sections(
                        path, root=where, min_words=min_words, max_words=max_words
                    )
                else:
                    found = [load_file(path, root=where)]
            except (OSError, ValueError) as exc:
                problems.append(LoadProblem(str(path), str(exc)))
                continue
            text = "\n".join(d.text for d in found)
            digest = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()
            if digest in seen_hashes:
                problems.append(
                    LoadProblem(str(path), f"duplicate of {seen_hashes[digest]}", False)
                )
                continue
            seen_hashes[digest] = str(path)
            docs.extend(found)
    return docs, problems


def load_site(paths: list[str | os.PathLike], **options: Any) -> list[SourceDocument]:
    """Pages as section documents (``load_paths(..., sections=True, **options)``), with
    each file that cannot be read logged as a warning and left out: what both frameworks'
    ``section_documents`` build on.

    Examples:
        >>> [d.doc_id for d in load_site(["docs/"])]   # doctest: +SKIP
        ['docs/guide.md#guide', 'docs/guide.md#install']
    """
    found, problems = load_paths(paths, sections=True, **options)
    for p in problems:
        log.warning("skipping %s: %s", p.path, p.reason)
    return found
