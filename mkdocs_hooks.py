"""MkDocs hook: the docstrings' Sphinx roles (``:class:`~a.B```, ``:meth:`B.c```) as
cross-references of the API reference.

The docstrings use reStructuredText roles (they read well in ``help()`` and in editors);
mkdocstrings renders Markdown, where a role would show as the literal ``:meth:`` in front
of the code. Each role becomes an optional ``mkdocs-autorefs`` reference: a link where the
name is documented on the site, the name in code type otherwise (``~`` keeps its last
part, ``Title <target>`` shows the title).
"""

from __future__ import annotations

import html
import re

ROLE = re.compile(r":(?:py:)?(?:meth|class|func|attr|data|mod|exc|obj|const):<code>([^<]*)</code>")


def _reference(match: re.Match) -> str:
    text = html.unescape(match.group(1)).strip()
    titled = re.fullmatch(r"(.+?)\s*<([^>]+)>", text)
    if titled:
        title, target = titled.group(1), titled.group(2)
    else:
        target = text.lstrip("~")
        title = target.rsplit(".", 1)[-1] if text.startswith("~") else target
    target = target.lstrip("~").rstrip("()")
    code = f"<code>{html.escape(title)}</code>"
    return f'<autoref optional identifier="{html.escape(target)}">{code}</autoref>'


def on_page_content(html_text: str, **kwargs) -> str:
    """Every role in the page's HTML, as a reference (see the module docstring)."""
    return ROLE.sub(_reference, html_text)
