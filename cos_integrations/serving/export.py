"""Publish summaries as ``llms.txt`` (https://llmstxt.org), ``llms-full.txt`` and per-page files.

``llms.txt``: an H1 title, a blockquote summary, a details paragraph, then ``## Section``
lists of ``- [title](url): summary`` entries. The file is written so that the format's
reference parser (the ``llms-txt`` package's ``parse_llms_file``) reads back exactly what
was written: every field is one line, a link title never holds ``]`` (it is written as
``)``), a summary never holds ``](`` (written ``] (``) and a URL never holds a space or a
parenthesis (percent-encoded), so no document can inject a link, a heading or a list
item. :func:`parse_llms_txt` reads the same grammar without that package. Entries are
grouped by page: the sections of one page under its title; :func:`collect_entries`
builds them from an index, in document-id order, so a re-export after a re-ingest
changes only the entries whose sources changed.

Examples:
    >>> entries = [Entry("Lease", "https://x.example/lease", "Rent is due on the 5th.", "Docs")]
    >>> text = render_llms_txt("Flat 4B", entries, description="House documents")
    >>> parse_llms_txt(text)[1] == entries
    True
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

from cos_integrations.sections import PATH_SEPARATOR
from cos_integrations.text import count_words, split_sentences

if TYPE_CHECKING:
    from cos_integrations.serving.index import CoSIndex

__all__ = [
    "Entry",
    "render_llms_txt",
    "render_llms_full",
    "parse_llms_txt",
    "write_pages",
    "collect_entries",
    "page_summary",
]


@dataclass
class Entry:
    """One link of ``llms.txt``: a document (or a page's section) and its summary, under
    ``section`` (its page's title, or its folder)."""

    title: str
    url: str
    summary: str
    section: str = "Docs"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _title(text: str) -> str:
    """One line with no ``]``: it would end a link's title."""
    return _one_line(text).replace("]", ")")


def _text(text: str) -> str:
    """A summary on one line that cannot hold a Markdown link (``](`` loses its meaning)."""
    return _one_line(text).replace("](", "] (")


def _url(url: str) -> str:
    # spaces, parentheses and angle brackets would end or break the link target
    return quote(_one_line(url), safe=":/?#[]@!$&'*+,;=%-._~")


def _details(text: str, count: int) -> str:
    return _one_line(text) or (
        f"Summaries of {count} documents, one line each, with a link to its source."
    )


def render_llms_txt(
    title: str, entries: list[Entry], *, description: str = "", details: str = ""
) -> str:
    """``llms.txt`` (see the module docstring); ``details`` defaults to one line that says
    what the file holds (the reference parser needs a line after the header block)."""
    lines = [f"# {_one_line(title)}", ""]
    if description:
        lines += [f"> {_one_line(description)}", ""]
    lines += [_details(details, len(entries)), ""]
    sections: dict[str, list[Entry]] = {}
    for e in entries:
        sections.setdefault(_one_line(e.section) or "Docs", []).append(e)
    for section, items in sections.items():
        lines += [f"## {section}", ""]
        for e in items:
            lines.append(f"- [{_title(e.title)}]({_url(e.url)}): {_text(e.summary)}")
        lines.append("")
    return "\n".join(lines)


def render_llms_full(
    title: str, entries: list[Entry], *, description: str = "", details: str = ""
) -> str:
    """Every summary in full: one ``##`` heading per page (section) with the page's summary
    built from its entries' (:func:`page_summary`), one ``###`` per entry."""
    lines = [f"# {_one_line(title)}", ""]
    if description:
        lines += [f"> {_one_line(description)}", ""]
    lines += [_details(details, len(entries)), ""]
    pages: dict[str, list[Entry]] = {}
    for e in entries:
        pages.setdefault(_one_line(e.section) or "Docs", []).append(e)
    for page, items in pages.items():
        lines += [f"## {page}", ""]
        if len(items) > 1:
            lines += [_text(page_summary([e.summary for e in items])), ""]
        for e in items:
            lines += [f"### {_one_line(e.title)}", "", f"Source: <{_url(e.url)}>", ""]
            lines += [_text(e.summary), ""]
    return "\n".join(lines)


_ENTRY = re.compile(r"^-\s*\[(?P<title>[^\]]+)\]\((?P<url>[^)]+)\)(?::\s*(?P<desc>.*))?$")


def parse_llms_txt(text: str) -> tuple[str, list[Entry], str]:
    """``(title, entries, description)`` from an llms.txt file (the reference parser's
    grammar: H1, optional ``>`` line, details, ``##`` sections of ``- [t](url): desc``)."""
    title, description, section = "", "", ""
    entries: list[Entry] = []
    in_header = True
    for line in text.splitlines():
        if line.startswith("## "):
            section, in_header = line[3:].strip(), False
        elif in_header and line.startswith("# ") and not title:
            title = line[2:].strip()
        elif in_header and line.startswith(">") and not description:
            description = line[1:].strip()
        elif not in_header and (m := _ENTRY.match(line.strip())):
            entries.append(Entry(m["title"], unquote(m["url"]), (m["desc"] or "").strip(), section))
    return title, entries, description


def page_summary(summaries: list[str], *, max_words: int = 120) -> str:
    """A page's summary built from its sections' (no model call): the first sentence of
    each, in page order, while they fit in ``max_words``.

    Examples:
        >>> page_summary(["Lists have methods. More here.", "Sets hold unique items."])
        'Lists have methods. Sets hold unique items.'
    """
    kept: list[str] = []
    words = 0
    for s in summaries:
        first = next(iter(split_sentences(s)), "").strip()
        n = count_words(first)
        if not first or (kept and words + n > max_words):
            continue
        kept.append(first)
        words += n
    return _one_line(" ".join(kept))


def collect_entries(index: CoSIndex, *, base_url: str | None = None) -> list[Entry]:
    """One entry per current summary of ``index`` (retired documents left out), in
    document-id order (stable across re-exports; a page's sections by anchor): a page's
    sections (``PAGE#anchor``) under the page's title, with the heading path below it as
    the entry's title; other documents under their top folder.
    ``base_url`` prefixes the document id (else the link is the source path)."""
    entries = []
    for doc in index.store.documents():
        if doc.status == "retired":
            continue
        cur = index.store.current_summary(doc.doc_id)
        if cur is None:
            continue
        url = f"{base_url.rstrip('/')}/{doc.doc_id}" if base_url else (doc.source or doc.doc_id)
        title = doc.title or doc.doc_id
        if "#" in doc.doc_id:  # a section: grouped under its page
            page, *rest = title.split(PATH_SEPARATOR)
            section, title = page, PATH_SEPARATOR.join(rest) or page
        else:
            section = doc.doc_id.split("/", 1)[0] if "/" in doc.doc_id else "Docs"
        entries.append(Entry(title, url, cur.text, section))
    return entries


def write_pages(directory: Path, entries: list[Entry]) -> list[Path]:
    """One markdown file per document, named from its title (collision-safe)."""
    directory.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    used: set[str] = set()
    for e in entries:
        stem = re.sub(r"[^a-z0-9]+", "-", f"{e.section} {e.title}".lower()).strip("-")[:60]
        stem = stem or "page"
        name, n = stem, 1
        while name in used:
            n += 1
            name = f"{stem}-{n}"
        used.add(name)
        path = directory / f"{name}.md"
        path.write_text(
            f"# {_one_line(e.title)}\n\nSource: <{_url(e.url)}>\n\n{_text(e.summary)}\n"
        )
        written.append(path)
    return written
