"""Which HTML extractor keeps a documentation page's text and drops its chrome (issue 29).

On a real site that installs offline (Debian's python3-doc: the Python tutorial's pages),
each extractor's text is compared with the page's main content, taken the Sphinx way (the
``div.body[role=main]`` element without its permalink marks, read with BeautifulSoup, not
with the code under test):

- **boilerplate**: the share of an extractor's words that the main content does not hold
  (navigation, sidebars, footers, "previous/next" links), counted as a multiset of word
  tokens so that line breaks and spacing around inline code do not count;
- **lost**: the share of the main content's words missing from the extractor's text;
- **anchors**: whether the extractor keeps the headings' anchors (what a citation needs);
- **ms/page**: extraction time.

Extractors: ``sections`` (``cos_integrations.sections.split_html``: selectolax with the
generic rules, no Sphinx-specific selector), ``trafilatura`` (its main-content
extraction, tables included), ``bs4`` (BeautifulSoup, the same generic rules by hand) and
``html2text`` (the whole page, as ``cos ingest`` without ``--sections`` reads it).

    python benchmarks/extractors.py [/usr/share/doc/python3-doc/html/tutorial]
"""

from __future__ import annotations

import re
import sys
import time
from collections import Counter
from pathlib import Path


def words(text: str) -> Counter:
    return Counter(re.findall(r"\w+", text.lower()))


def truth(html: str) -> str:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    main = soup.select_one("div.body[role=main]")
    for junk in main.select("a.headerlink, script, style"):
        junk.decompose()
    return main.get_text("\n")


def ours(html: str) -> str:
    from cos_integrations.sections import split_html

    parts = []
    for s in split_html(html, min_words=0):
        parts += [s.path[-1] if s.path else "", s.body]
    return "\n".join(parts)


def trafilatura_text(html: str) -> str:
    import trafilatura

    return trafilatura.extract(html, include_tables=True, include_comments=False) or ""


GENERIC_CHROME = (
    "script, style, nav, footer, form, [role=navigation], [role=search], "
    "aside:not([class*=footnote]):not([class*=note])"
)


def bs4_text(html: str) -> str:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    root = soup.select_one("[role=main]") or soup.select_one("main") or soup.body
    for junk in root.select(GENERIC_CHROME + ", .headerlink, .sphinxsidebar, .related"):
        junk.decompose()
    return root.get_text("\n")


def html2text_text(html: str) -> str:
    import html2text

    conv = html2text.HTML2Text()
    conv.ignore_images = conv.ignore_links = True
    conv.body_width = 0
    return conv.handle(html)


EXTRACTORS = {
    "sections (selectolax)": (ours, True),
    "trafilatura": (trafilatura_text, False),
    "bs4 (same rules)": (bs4_text, False),
    "html2text (whole page)": (html2text_text, False),
}


def score(output: Counter, main: Counter) -> tuple[int, int]:
    """(words of the output not in the main content, words of the main content lost)"""
    return sum((output - main).values()), sum((main - output).values())


def main(root: Path) -> None:
    pages = sorted(root.glob("*.html"))
    mains = {p: words(truth(p.read_text())) for p in pages}
    print(f"{len(pages)} pages of {root}\n")
    print("| extractor | boilerplate | lost | pages losing > 2% | anchors | ms/page |")
    print("|---|---|---|---|---|---|")
    for name, (fn, anchors) in EXTRACTORS.items():
        extra = lost = out_words = main_words = bad = 0
        t0 = time.perf_counter()
        outputs = {p: fn(p.read_text()) for p in pages}
        ms = (time.perf_counter() - t0) * 1000 / len(pages)
        for p in pages:
            out = words(outputs[p])
            e, lo = score(out, mains[p])
            extra, lost = extra + e, lost + lo
            out_words += sum(out.values())
            main_words += sum(mains[p].values())
            bad += lo > 0.02 * sum(mains[p].values())
        print(
            f"| {name} | {extra / out_words:.1%} | {lost / main_words:.1%} | {bad} "
            f"| {'yes' if anchors else 'no'} | {ms:.0f} |"
        )
    from bs4 import BeautifulSoup

    from cos_integrations.loaders import load_paths
    from cos_integrations.sections import split_html

    docs, problems = load_paths([root], sections=True)
    print(f"\nsections (merged, 80-600 words): {len(docs)} on {len(pages)} pages, ", end="")
    print(f"{len(docs) / len(pages):.1f} a page; problems: {len(problems)}")
    headings = found = 0
    for p in pages:  # every h1-h3 of the main content is a section, or folded into one
        html = p.read_text()
        main = BeautifulSoup(html, "html.parser").select_one("div.body[role=main]")
        sections = split_html(html)
        kept = {a for s in sections for a in (s.anchor, *s.merged)}
        for h in main.select("h1, h2, h3"):
            headings += 1
            found += (h.find_parent("section") or {}).get("id") in kept
    print(f"headings kept as a section or folded into one: {found} of {headings}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "/usr/share/doc/python3-doc/html/tutorial"))
