"""A real documentation site through the `cos` CLI on the embedded smoke model: two pages of
the Python tutorial (Debian's python3-doc) ingested as sections, a cited answer, an
llms.txt the reference parser reads, and a re-crawl that edits, adds and deletes pages."""

import os
import shutil
from pathlib import Path

import pytest
from test_cli import SMALL, cos

pytestmark = pytest.mark.integration

TUTORIAL = Path("/usr/share/doc/python3-doc/html/tutorial")


@pytest.fixture
def site(tmp_path):
    if not TUTORIAL.is_dir():
        if os.environ.get("COS_REQUIRE_PYDOC") == "1":
            pytest.fail("COS_REQUIRE_PYDOC=1 but no python3-doc: apt-get install python3-doc")
        pytest.skip("Debian's python3-doc is not installed")
    root = tmp_path / "tutorial"
    root.mkdir()
    for page in ("venv", "interactive"):
        shutil.copy(TUTORIAL / f"{page}.html", root)
    return root


def test_a_tutorial_ingested_as_sections_answers_with_citations(site, tmp_path):
    from llms_txt import parse_llms_file

    index = str(tmp_path / "index")
    first = cos("ingest", str(site), "--sections", "--index", index, *SMALL)
    assert first.returncode == 0, first.stderr + first.stdout
    said = " ".join(first.stdout.split())
    assert "5 documents found, 0 unchanged, 5 to summarise" in said
    q = "How do you create a virtual environment?"
    out = cos("query", q, "--index", index, "--threshold", "0.0", "--judge", "score")
    assert out.returncode == 0 and "HIT" in out.stdout
    cites = [line for line in out.stdout.splitlines() if "cites:" in line]
    assert cites and all("tutorial/venv.html#" in c or "interactive.html#" in c for c in cites)
    # the source chunks, ranked by the embedding, cite the section that answers (a hit
    # routes by the smoke model's summaries, which say little)
    out = cos("query", q, "--index", index, "--threshold", "1.01", "--judge", "score")
    assert out.returncode == 0 and "MISS" in out.stdout
    cites = [line for line in out.stdout.splitlines() if "cites:" in line]
    assert any("venv.html#creating-virtual-environments" in c for c in cites)
    llms = tmp_path / "llms.txt"
    export = cos("export", "llms-txt", "--title", "Tutorial", "--index", index, "--out", str(llms))
    assert export.returncode == 0, export.stderr
    ref = parse_llms_file(llms.read_text())
    assert ref.title == "Tutorial" and ref.info
    assert set(ref.sections) == {
        "Virtual Environments and Packages",
        "Interactive Input Editing and History Substitution",
    }
    links = [x for group in ref.sections.values() for x in group]
    assert len(links) == 5 and all("#" in x.url and x.desc for x in links)

    same = cos("ingest", str(site), "--sections", "--index", index, *SMALL)
    assert "5 unchanged, 0 to summarise" in " ".join(same.stdout.split())
    assert "model:" not in same.stdout  # nothing changed: no model started

    page = site / "venv.html"
    page.write_text(page.read_text().replace("pip", "the installer"))
    (site / "interactive.html").unlink()
    shutil.copy(TUTORIAL / "whatnow.html", site)
    again = cos("ingest", str(site), "--sections", "--index", index, *SMALL)
    assert again.returncode == 0, again.stderr + again.stdout
    said = " ".join(again.stdout.split())
    assert "retired: tutorial/interactive.html#" in said
    assert "tutorial/whatnow.html#" in said  # the added page was summarised
    # the two untouched sections of venv.html were reused; its pip section and the new
    # page's section were summarised
    assert "4 documents found, 2 unchanged, 2 to summarise" in said
