"""Pages into sections: anchors, heading paths, chrome removal, merging, and the loader."""

import os
from pathlib import Path

import pytest

from cos_integrations.loaders import load_paths, load_sections
from cos_integrations.sections import main_content, merge_short, split_html, split_markdown

SPHINX = """<html><head><title>5. Data Structures</title><script>var x = 1;</script></head>
<body>
<div class="related" role="navigation"><h3>Navigation</h3><a href="index.html">index</a>
<a href="modules.html" rel="next">next</a></div>
<div class="document"><div class="body" role="main">
<section id="data-structures">
<span id="tut-structures"></span><h1><span class="section-number">5. </span>Data Structures
<a class="headerlink" href="#data-structures" title="Permalink">¶</a></h1>
<p>This chapter describes some things you've learned about already in more detail.</p>
<section id="more-on-lists">
<h2><span class="section-number">5.1. </span>More on Lists<a class="headerlink"
 href="#more-on-lists">¶</a></h2>
<p>The list data type has some more methods.</p>
<pre>&gt;&gt;&gt; fruits = ['orange', 'apple']
&gt;&gt;&gt; fruits.count('apple')
1</pre>
<section id="list-comprehensions">
<h3><span class="section-number">5.1.3. </span>List Comprehensions<a class="headerlink"
 href="#list-comprehensions">¶</a></h3>
<p>List comprehensions provide a concise way to create lists.</p>
</section></section></section>
</div></div>
<div class="sphinxsidebar" role="navigation"><h3>Table of Contents</h3><ul><li>5.1</li></ul>
</div>
<div class="footer">© Copyright 2001-2023, Python Software Foundation.</div>
</body></html>"""


def test_html_sections_keep_anchor_heading_path_and_drop_the_chrome():
    sections = split_html(SPHINX, min_words=0)
    assert [s.anchor for s in sections] == [
        "data-structures",
        "more-on-lists",
        "list-comprehensions",
    ]
    assert sections[2].title == "Data Structures › More on Lists › List Comprehensions"
    assert sections[2].parent_anchor == "more-on-lists"
    assert sections[1].parent_anchor == "data-structures" and sections[0].parent_anchor is None
    text = "\n".join(s.text for s in sections)
    for chrome in ("Navigation", "Table of Contents", "Copyright", "var x", "¶", "next"):
        assert chrome not in text
    # code keeps its lines
    assert ">>> fruits = ['orange', 'apple']\n>>> fruits.count('apple')\n1" in sections[1].body
    assert "The list data type has some more methods." in sections[1].body


def test_generic_page_main_and_fallbacks():
    page = (
        "<body><header><a href='/'>Site</a></header><nav>Docs | Blog</nav>"
        "<main><h2>Install</h2><p>Run it.</p><h2>Install</h2><p>Again.</p>"
        "<aside>Related posts</aside></main><footer>Contact us</footer></body>"
    )
    sections = split_html(page, min_words=0)
    assert [s.anchor for s in sections] == ["install", "install-1"]  # slugs, made unique
    assert "Related posts" not in main_content(page).text()
    # no main element: the body, chrome removed; text before any heading is kept
    bare = split_html("<body><nav>x</nav><p>Only text here.</p></body>", min_words=0)
    assert [(s.anchor, s.body) for s in bare] == [("", "Only text here.")]


def test_markdown_sections_fences_setext_and_explicit_ids():
    md = (
        "Intro before any heading.\n\n"
        "Guide\n=====\n\nWelcome.\n\n"
        "## Install {#setup}\n\n```bash\n# not a heading\npip install x\n```\n\n"
        "### Check\n\nRun x --version.\n\n"
        "#### Deep\n\nstays in Check.\n\n"
        "## Install\n\nAnother one.\n"
    )
    sections = split_markdown(md, min_words=0)
    assert [s.anchor for s in sections] == ["", "guide", "setup", "check", "install"]
    assert "# not a heading\npip install x" in sections[2].body
    assert sections[3].path == ["Guide", "Install", "Check"] and "#### Deep" in sections[3].body
    assert sections[3].parent_anchor == "setup"


def test_short_sections_merge_within_the_page_and_keep_their_anchors():
    md = "# Title\n\nShort.\n\n## A\n\n" + "word " * 50 + "\n\n## B\n\nTiny.\n\n## C\n\n"
    md += "more " * 700
    sections = split_markdown(md, min_words=20, max_words=600)
    # the short title section takes A in, B folds into it too; C is too long to join
    assert [s.anchor for s in sections] == ["title", "c"]
    assert sections[0].merged == ["a", "b"] and "A\n\n" + "word" in sections[0].body
    assert sections[1].parent_anchor == "title"
    assert merge_short([], min_words=5) == []


def test_load_paths_sections_give_one_document_per_section(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "page.html").write_text(SPHINX)
    (site / "guide.md").write_text("# Guide\n\nRead me.\n\n## Setup\n\nDo it.\n")
    (site / "notes.txt").write_text("Plain text stays whole.")
    docs, problems = load_paths([site], sections=True, min_words=0)
    assert not problems
    ids = [d.doc_id for d in docs]
    assert ids == [
        "site/guide.md#guide",
        "site/guide.md#setup",
        "site/notes.txt",
        "site/page.html#data-structures",
        "site/page.html#more-on-lists",
        "site/page.html#list-comprehensions",
    ]
    lc = docs[-1]
    assert lc.source.endswith("page.html#list-comprehensions")
    assert lc.metadata["page"] == "site/page.html"
    assert lc.metadata["parent"] == "site/page.html#more-on-lists"
    assert lc.title.startswith("Data Structures › More on Lists")
    assert lc.text.startswith(lc.title)
    with pytest.raises(ValueError, match="Markdown or HTML"):
        load_sections(site / "notes.txt")
    (site / "empty.md").write_text("# Only a title\n")
    _, problems = load_paths([site / "empty.md"], sections=True)
    assert problems and "no section with a body" in problems[0].reason


def test_the_python_tutorial_when_installed():
    root = Path("/usr/share/doc/python3-doc/html/tutorial")
    if not root.is_dir():
        if os.environ.get("COS_REQUIRE_PYDOC") == "1":
            pytest.fail("COS_REQUIRE_PYDOC=1 but no python3-doc: apt-get install python3-doc")
        pytest.skip("Debian's python3-doc is not installed")
    docs, problems = load_paths([root], sections=True)
    assert not problems and len(docs) > 60
    assert any(d.doc_id.endswith("datastructures.html#list-comprehensions") for d in docs)
    text = "\n".join(d.text for d in docs)
    for chrome in ("Table of Contents", "Previous topic", "Report a Bug", "¶"):
        assert chrome not in text


def test_pages_are_sections_by_default_and_a_whole_page_is_its_main_content(tmp_path):
    """Issue 44: ``load_paths`` splits pages into sections unless asked not to, and a page
    read whole is read from its main content: no navigation, sidebar or footer text in any
    index."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "page.html").write_text(SPHINX)
    default, _ = load_paths([site], min_words=0)
    assert [d.doc_id for d in default] == [
        d.doc_id for d in load_paths([site], sections=True, min_words=0)[0]
    ]
    whole, problems = load_paths([site], sections=False)
    assert not problems and [d.doc_id for d in whole] == ["site/page.html"]
    for chrome in ("Navigation", "Table of Contents", "Copyright", "var x"):
        assert chrome in SPHINX and chrome not in whole[0].text
    sectioned = "\n".join(d.text for d in default)
    for word in ("List Comprehensions", "More on Lists"):
        assert word in whole[0].text and word in sectioned
