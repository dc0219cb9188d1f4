"""Publish summaries as ``llms.txt`` (https://llmstxt.org), ``llms-full.txt`` and per-page files.

``llms.txt``: an H1 title, a blockquote description, then ``## Section`` lists of
``- [title](url): summary`` entries. Titles, URLs and summaries are escaped so that a
document cannot inject links, headings or list items into the file; :func:`parse_llms_txt`
reads the format back (the round-trip test uses it).

Example:
    >>> entries = [Entry("Lease", "https://x.example/lease", "Rent is due on the 5th.", "Docs")]
    >>> text = render_llms_txt("Flat 4B", entries, description="House documents")
    >>> parse_llms_txt(text)[1] == entries
    True
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

__all__ = ["Entry", "render_llms_txt", "render_llms_full", "parse_llms_txt", "write_pages"]


@dataclass
class Entry:
    title: str
    url: str
    summary: str
    section: str = "Docs"


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|<>])")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _escape(text: str) -> str:
    """Markdown-escape and flatten to one line: no heading, list or link can start."""
    return _MD_SPECIAL.sub(r"\\\1", _one_line(text))


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def _url(url: str) -> str:
    # Spaces, parentheses and angle brackets would end or break the link target.
    return quote(_one_line(url), safe=":/?#[]@!$&'*+,;=%-._~")


def render_llms_txt(title: str, entries: list[Entry], *, description: str = "") -> str:
    lines = [f"# {_escape(title)}", ""]
    if description:
        lines += [f"> {_escape(description)}", ""]
    sections: dict[str, list[Entry]] = {}
    for e in entries:
        sections.setdefault(e.section, []).append(e)
    for section, items in sections.items():
        lines += [f"## {_escape(section)}", ""]
        for e in items:
            lines.append(f"- [{_escape(e.title)}]({_url(e.url)}): {_escape(e.summary)}")
        lines.append("")
    return "\n".join(lines)


def render_llms_full(title: str, entries: list[Entry], *, description: str = "") -> str:
    """Every summary in full, one ``##`` heading per document (the body stays escaped)."""
    lines = [f"# {_escape(title)}", ""]
    if description:
        lines += [f"> {_escape(description)}", ""]
    for e in entries:
        lines += [
            f"## {_escape(e.title)}",
            "",
            f"Source: <{_url(e.url)}>",
            "",
            _escape(e.summary),
            "",
        ]
    return "\n".join(lines)


_ENTRY = re.compile(r"^- \[((?:\\.|[^\]\\])*)\]\(([^)\s]*)\): (.*)$")


def parse_llms_txt(text: str) -> tuple[str, list[Entry], str]:
    """``(title, entries, description)`` from an llms.txt file."""
    title, description, section = "", "", ""
    entries: list[Entry] = []
    for line in text.splitlines():
        if line.startswith("# ") and not title:
            title = _unescape(line[2:])
        elif line.startswith("> ") and not description:
            description = _unescape(line[2:])
        elif line.startswith("## "):
            section = _unescape(line[3:])
        elif m := _ENTRY.match(line):
            from urllib.parse import unquote

            entries.append(
                Entry(_unescape(m.group(1)), unquote(m.group(2)), _unescape(m.group(3)), section)
            )
    return title, entries, description


def write_pages(directory: Path, entries: list[Entry]) -> list[Path]:
    """One markdown file per document, named from its title (collision-safe)."""
    directory.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    used: set[str] = set()
    for e in entries:
        stem = re.sub(r"[^a-z0-9]+", "-", e.title.lower()).strip("-")[:60] or "page"
        name, n = stem, 1
        while name in used:
            n += 1
            name = f"{stem}-{n}"
        used.add(name)
        path = directory / f"{name}.md"
        path.write_text(
            f"# {_escape(e.title)}\n\nSource: <{_url(e.url)}>\n\n{_escape(e.summary)}\n"
        )
        written.append(path)
    return written
