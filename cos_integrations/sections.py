"""Pages into sections: HTML and Markdown split at their headings (h1-h3 / ``#``-``###``).

A documentation site is read a section at a time, so a summary, a hit and a citation can
say *where* in a page an answer is. Each :class:`Section` keeps its heading path
("Data Structures › More on Lists › List Comprehensions") and its anchor
(``datastructures.html#list-comprehensions``): the heading's own ``id``, the ``id`` of the
``<section>`` it opens, its permalink (``a.headerlink``) or the ``<span id>`` just before
it; in Markdown, the GitHub-style slug of the heading text.

HTML goes through :func:`main_content` first: the page's main content element
(``[role=main]``, ``<main>``, ``<article>``, ...) with the chrome inside it removed
(navigation, sidebars, headers and footers, scripts, permalink marks, "previous/next"
links). Measured on the Python tutorial's 17 pages (``benchmarks/extractors.py``,
BENCHMARKS.md "Documentation sites"): selectolax with these rules, trafilatura and
BeautifulSoup were compared; selectolax is used because it is the one that keeps every
heading's anchor (trafilatura drops ids) at a fraction of BeautifulSoup's time.

Short sections merge with a neighbour of the same page (``min_words``, up to
``max_words``), so an index does not fill with one-line summaries.

Examples:
    >>> md = "# Guide\\n\\nIntro words here.\\n\\n## Install\\n\\nRun pip install x.\\n"
    >>> [(s.anchor, s.path) for s in split_markdown(md, min_words=0)]
    [('guide', ['Guide']), ('install', ['Guide', 'Install'])]
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from cos_integrations.text import count_words

__all__ = [
    "Section",
    "split_markdown",
    "split_html",
    "main_content",
    "merge_short",
    "slugify",
    "PATH_SEPARATOR",
    "MIN_SECTION_WORDS",
    "MAX_SECTION_WORDS",
]

PATH_SEPARATOR = " › "
# a section shorter than this merges with a neighbour, while the two stay under the max
MIN_SECTION_WORDS = 80
MAX_SECTION_WORDS = 600

_MAIN = (
    "[role=main]",
    "main",
    "article",
    "div.body",
    "div.document",
    "#content",
    "#main-content",
    "#main",
)
_CHROME = (
    "script",
    "style",
    "noscript",
    "template",
    "svg",
    "nav",
    "footer",
    "form",
    "button",
    "[role=navigation]",
    "[role=search]",
    "[role=contentinfo]",
    "[role=banner]",
    "[aria-hidden=true]",
    ".headerlink",
    ".section-number",
    ".sphinxsidebar",
    ".related",
    ".footer",
    ".breadcrumbs",
    ".breadcrumb",
    ".toc",
    ".prev-next-area",
    ".prev-next",
    ".pagination",
    ".skip-link",
    "a[rel=prev]",
    "a[rel=next]",
)
# an <aside> that is part of the text: footnotes and admonitions
_NOTES = ("footnote", "note", "admonition", "warning", "tip", "caution")
_BLOCK = {
    "p", "div", "section", "pre", "ul", "ol", "li", "dl", "dt", "dd", "table", "tr",
    "blockquote", "figure", "figcaption", "h4", "h5", "h6", "hr", "br", "details", "summary",
    "header", "caption", "thead", "tbody",
}  # fmt: skip
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3}


@dataclass
class Section:
    """One section of a page: its heading path, anchor, level and text (the heading path
    first, so a summary and a search both know what it is about).

    Examples:
        >>> s = Section(["Guide", "Install"], "install", 2, "Run pip install x.")
        >>> s.title, s.words
        ('Guide › Install', 4)
    """

    path: list[str]
    anchor: str
    level: int
    body: str
    parent_anchor: str | None = None
    merged: list[str] = field(default_factory=list)  # anchors folded into this one

    @property
    def title(self) -> str:
        return PATH_SEPARATOR.join(self.path)

    @property
    def text(self) -> str:
        """What is summarised and indexed: the heading path, then the body."""
        return f"{self.title}\n\n{self.body}".strip()

    @property
    def words(self) -> int:
        return count_words(self.body)

    def metadata(self) -> dict[str, Any]:
        return {
            "anchor": self.anchor,
            "heading_path": list(self.path),
            "parent_anchor": self.parent_anchor,
        }


def slugify(text: str) -> str:
    """GitHub's heading anchor: lowercase, punctuation dropped, spaces to hyphens.

    Examples:
        >>> slugify("5.1.3. List Comprehensions!")
        '513-list-comprehensions'
    """
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return re.sub(r"\s", "-", text)


def _unique(anchor: str, seen: dict[str, int]) -> str:
    n = seen.get(anchor, 0)
    seen[anchor] = n + 1
    return anchor if n == 0 else f"{anchor}-{n}"


def _sections(heads: Iterator[tuple[int, str, str, str]]) -> list[Section]:
    """``(level, title, anchor, body)`` in page order into sections with heading paths."""
    out: list[Section] = []
    stack: list[tuple[int, str, str]] = []  # (level, title, anchor)
    for level, title, anchor, body in heads:
        if level == 0:  # text before the first heading
            if body.strip():
                out.append(Section([], "", 0, body.strip()))
            continue
        while stack and stack[-1][0] >= level:
            stack.pop()
        parent = stack[-1][2] if stack else None
        stack.append((level, title, anchor))
        out.append(Section([t for _, t, _ in stack], anchor, level, body.strip(), parent))
    return out


_FENCE = re.compile(r"^\s*(```|~~~)")
_ATX = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_EXPLICIT = re.compile(r"\s*\{#([\w\-.:]+)\}\s*$")


def split_markdown(
    text: str, *, min_words: int = MIN_SECTION_WORDS, max_words: int = MAX_SECTION_WORDS
) -> list[Section]:
    """A Markdown page's sections at ``#``, ``##`` and ``###`` (and setext ``===``/``---``
    headings), fenced code kept whole; anchors are GitHub's slugs (``{#id}`` wins), the
    second "Usage" of a page ``usage-1``. Short sections are merged (:func:`merge_short`)."""
    lines = text.replace("\r\n", "\n").split("\n")
    seen: dict[str, int] = {}
    heads: list[tuple[int, str, str, str]] = []
    level, title, anchor, body = 0, "", "", []
    fenced = False

    def flush() -> None:
        heads.append((level, title, anchor, "\n".join(body)))

    i = 0
    while i < len(lines):
        line = lines[i]
        if _FENCE.match(line):
            fenced = not fenced
        found = None
        if not fenced:
            if m := _ATX.match(line):
                found = (len(m.group(1)), m.group(2))
            elif (
                i + 1 < len(lines)
                and line.strip()
                and re.fullmatch(r"\s*(=+|-+)\s*", lines[i + 1])
                and not line.lstrip().startswith(("-", "*", ">"))
                and (i == 0 or not lines[i - 1].strip())
            ):
                found = (1 if "=" in lines[i + 1] else 2, line.strip())
                i += 1
        if found and found[0] <= 3:
            flush()
            level, raw = found
            explicit = _EXPLICIT.search(raw)
            title = _EXPLICIT.sub("", raw).strip()
            anchor = _unique(explicit.group(1) if explicit else slugify(title), seen)
            body = []
        else:
            body.append(line)
        i += 1
    flush()
    return merge_short(_sections(iter(heads)), min_words=min_words, max_words=max_words)


def _parser(html: str) -> Any:
    try:
        from selectolax.lexbor import LexborHTMLParser as Parser
    except ImportError:  # pragma: no cover - older selectolax
        try:
            from selectolax.parser import HTMLParser as Parser
        except ImportError as exc:
            raise ValueError(
                "reading HTML needs selectolax: pip install 'cos-integrations[local]'"
            ) from exc
    return Parser(html)


def main_content(html: str) -> Any:
    """The page's main content node with its chrome removed (see the module docstring);
    the ``<body>`` when no main element is marked."""
    tree = _parser(html)
    node = None
    for selector in _MAIN:
        node = tree.css_first(selector)
        if node is not None and len((node.text() or "").split()) >= 5:
            break
        node = None
    node = node or tree.body or tree.root
    for selector in _CHROME:
        for junk in node.css(selector):
            junk.decompose()
    for header in node.css("header"):
        if not header.css_first("h1, h2, h3"):
            header.decompose()
    for aside in node.css("aside"):  # a sidebar, unless it is the page's own note
        kind = str(aside.attributes.get("class") or "") + str(aside.attributes.get("role") or "")
        if not any(word in kind for word in _NOTES):
            aside.decompose()
    return node


def _anchor_of(node: Any) -> str:
    """A heading's anchor: its id, its section's id, its permalink, the span before it."""
    if node.attributes.get("id"):
        return str(node.attributes["id"])
    parent = node.parent
    if parent is not None and parent.tag == "section" and parent.attributes.get("id"):
        first = next((c for c in parent.iter() if c.tag not in ("span",)), None)
        if first is not None and first.mem_id == node.mem_id:
            return str(parent.attributes["id"])
    link = node.css_first("a.headerlink, a[href^='#']")
    if link is not None and str(link.attributes.get("href", "")).startswith("#"):
        return str(link.attributes["href"])[1:]
    prev = node.prev
    while prev is not None and prev.tag == "-text" and not (prev.text_content or "").strip():
        prev = prev.prev
    if prev is not None and prev.tag in ("span", "a") and prev.attributes.get("id"):
        return str(prev.attributes["id"])
    return ""


def _walk(node: Any, out: list, *, pre: bool = False) -> None:
    """Text and heading markers of ``node``'s subtree, in page order."""
    for child in node.iter(include_text=True):
        tag = child.tag
        if tag == "-text":
            text = child.text_content or ""
            out.append(text if pre else re.sub(r"\s+", " ", text))
        elif tag in _HEADINGS:
            title = " ".join((child.text(deep=True) or "").split())
            out.append(("H", _HEADINGS[tag], title.rstrip("¶").strip(), _anchor_of(child)))
        elif tag == "pre":
            out.append("\n\n")
            _walk(child, out, pre=True)
            out.append("\n\n")
        elif tag in _BLOCK:
            out.append("\n\n" if tag != "li" else "\n- ")
            _walk(child, out, pre=pre)
            out.append("\n\n" if tag not in ("li", "br") else "\n")
        elif tag in ("img", "input"):
            continue
        else:
            _walk(child, out, pre=pre)


def _tidy(text: str) -> str:
    lines = [ln.rstrip() for ln in text.split("\n")]
    text = "\n".join(lines)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def split_html(
    html: str, *, min_words: int = MIN_SECTION_WORDS, max_words: int = MAX_SECTION_WORDS
) -> list[Section]:
    """An HTML page's sections at ``<h1>``-``<h3>`` of its main content (chrome removed,
    :func:`main_content`), with their anchors; short sections merged (:func:`merge_short`).

    Examples:
        >>> html = ('<nav>Home | Next</nav><main><h1 id="guide">Guide</h1><p>Intro.</p>'
        ...         '<h2 id="install">Install</h2><p>Run <code>pip</code>.</p></main>')
        >>> [(s.anchor, s.body) for s in split_html(html, min_words=0)]
        [('guide', 'Intro.'), ('install', 'Run pip.')]
    """
    items: list = []
    _walk(main_content(html), items)
    seen: dict[str, int] = {}
    heads: list[tuple[int, str, str, str]] = []
    level, title, anchor, parts = 0, "", "", []
    for item in [*items, ("H", 0, "", "")]:
        if isinstance(item, tuple):
            heads.append((level, title, anchor, _tidy("".join(parts))))
            _, level, title, anchor = item
            anchor = _unique(anchor or slugify(title), seen) if level else ""
            parts = []
        else:
            parts.append(item)
    return merge_short(_sections(iter(heads)), min_words=min_words, max_words=max_words)


def merge_short(
    sections: list[Section],
    *,
    min_words: int = MIN_SECTION_WORDS,
    max_words: int = MAX_SECTION_WORDS,
) -> list[Section]:
    """Fold each section under ``min_words`` into the one before it (its heading becomes a
    line of that one's body) while the two stay within ``max_words``; a short first section
    (a page title over a line of text) takes the next one in instead. Anchors of the
    folded sections are kept in :attr:`Section.merged`, so a citation of either resolves.

    Examples:
        >>> a = Section(["A"], "a", 1, "one two three")
        >>> b = Section(["A", "B"], "b", 2, "four five")
        >>> [(s.anchor, s.merged, s.body) for s in merge_short([a, b], min_words=4)]
        [('a', ['b'], 'one two three\\n\\nB\\n\\nfour five')]
    """
    out: list[Section] = []
    for s in sections:
        prev = out[-1] if out else None
        if prev is not None and (
            (s.words < min_words or prev.words < min_words) and prev.words + s.words <= max_words
        ):
            heading = s.path[-1] if s.path else ""
            prev.body = "\n\n".join(x for x in (prev.body, heading, s.body) if x)
            prev.merged += [a for a in (s.anchor, *s.merged) if a]
            if not prev.path:  # text before the first heading takes the heading's place
                prev.path, prev.anchor, prev.level = s.path, s.anchor, s.level
                prev.parent_anchor = s.parent_anchor
                prev.merged = [a for a in prev.merged if a != s.anchor]
            continue
        out.append(s)
    folded = {a: s.anchor for s in out for a in s.merged}
    for s in out:  # a parent folded into another section: point at where it went
        if s.parent_anchor in folded:
            s.parent_anchor = folded[s.parent_anchor]
        if s.parent_anchor == s.anchor:
            s.parent_anchor = None
    return out
