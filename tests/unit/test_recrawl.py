"""Re-crawling a site: unchanged sections cost nothing, changed ones are summarised again,
removed ones are retired (vectors gone, history kept), and a page that comes back returns."""

import asyncio

from fakes import ScriptedFakeModel

from cos_integrations import ChainOfSummaries, CoSConfig
from cos_integrations.loaders import load_paths

PAGE = (
    "# {t}\n\nThe {t} item 0 is value 0a. The {t} item 1 is value 1b.\n\n"
    "## More\n\nThe {t} item 2 is value 2c.\n"
)


def crawl(index, site, model):
    docs, problems = load_paths([site], sections=True, min_words=0)
    assert not problems
    report = asyncio.run(index.aingest(docs, ChainOfSummaries(model, CoSConfig.fast(iterations=0))))
    gone = index.retire_missing([f"{site.name}/"], [d.doc_id for d in docs])
    return report, gone


def test_recrawl_skips_resummarises_retires_and_restores(index, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    for t in ("lease", "garden", "parking"):
        (site / f"{t}.md").write_text(PAGE.format(t=t))
    model = ScriptedFakeModel(thesis_facts=2)
    report, gone = crawl(index, site, model)
    assert len(report.summarized) == 6 and not gone
    assert index.summaries.count() == 6

    calls = len(model.calls)
    report, gone = crawl(index, site, model)  # nothing changed: no model call at all
    assert len(report.unchanged) == 6 and not report.summarized and not gone
    assert len(model.calls) == calls

    (site / "garden.md").write_text(PAGE.format(t="garden").replace("value 2c", "value 9z"))
    (site / "bikes.md").write_text(PAGE.format(t="bikes"))
    (site / "parking.md").unlink()
    report, gone = crawl(index, site, model)
    assert sorted(report.summarized) == [
        "site/bikes.md#bikes",
        "site/bikes.md#more",
        "site/garden.md#more",
    ]
    assert sorted(gone) == ["site/parking.md#more", "site/parking.md#parking"]
    # retired: no vectors, history kept, never a search result
    assert (
        index.summaries.count() == 6
        and index.chunks.get(where={"doc_id": "site/parking.md#more"})["ids"] == []
    )
    old = index.store.get_document("site/parking.md#more")
    assert old.status == "retired" and index.store.current_summary(old.doc_id) is not None
    assert index.repair() == []  # a retired document is not "behind": nothing to re-add
    hits = index.search_summaries("parking item 2", 6)
    assert all(not h.doc_id.startswith("site/parking.md") for h in hits)

    calls = len(model.calls)
    (site / "parking.md").write_text(PAGE.format(t="parking"))  # the page comes back as it was
    report, gone = crawl(index, site, model)
    assert len(model.calls) == calls and not gone  # its summaries are reused
    assert index.store.get_document("site/parking.md#more").status == "summarized"
    assert index.summaries.count() == 8


def test_export_groups_sections_by_page_and_a_reexport_changes_only_what_changed(index, tmp_path):
    from llms_txt import parse_llms_file

    from cos_integrations.serving.export import collect_entries, render_llms_full, render_llms_txt

    site = tmp_path / "site"
    site.mkdir()
    for t in ("lease", "garden"):
        (site / f"{t}.md").write_text(PAGE.format(t=t))
    model = ScriptedFakeModel(thesis_facts=2)
    crawl(index, site, model)
    entries = collect_entries(index, base_url="https://example.org")
    before = render_llms_txt("Site", entries, description="House rules")
    ref = parse_llms_file(before)
    assert list(ref.sections) == ["garden", "lease"]  # one group per page, its sections in it
    assert [x.title for x in ref.sections["lease"]] == ["lease", "More"]
    assert ref.sections["lease"][1].url == "https://example.org/site/lease.md#more"
    full = render_llms_full("Site", entries)
    assert full.splitlines().count("## garden") == 1 and full.count("### ") == 4

    (site / "garden.md").write_text(PAGE.format(t="garden").replace("value 2c", "value 9z"))
    crawl(index, site, model)
    after = render_llms_txt("Site", collect_entries(index, base_url="https://example.org"))
    changed = set(before.splitlines()) ^ set(after.splitlines())
    changed -= {"> House rules", ""}
    assert changed and all("garden.md#more" in line for line in changed)


def test_answers_cite_the_section_hit_or_miss_and_the_summary_version(index, tmp_path):
    from cos_integrations import HitRule
    from cos_integrations.serving.retrieval import FallbackRetriever

    site = tmp_path / "site"
    site.mkdir()
    for t in ("lease", "garden"):
        (site / f"{t}.md").write_text(PAGE.format(t=t))
    crawl(index, site, ScriptedFakeModel(thesis_facts=2))
    hit = FallbackRetriever(index, rule=HitRule(threshold=0.0)).retrieve("garden item 2 More")
    assert hit.hit and hit.citations
    first = hit.citations[0]
    assert first.doc_id.startswith("site/") and "#" in first.source
    assert first.source.endswith(first.doc_id.split("/", 1)[1])  # path#anchor
    assert first.summary_version == 1 and str(first).endswith("(hit, summary v1)")
    assert len({c.doc_id for c in hit.citations}) == len(hit.citations)
    miss = FallbackRetriever(index, rule=HitRule(threshold=1.01)).retrieve("garden item 2")
    assert not miss.hit and miss.citations
    assert all(not c.hit and c.summary_version is None for c in miss.citations)
    assert str(miss.citations[0]).endswith("(miss, source text)")
    assert "site/garden.md#more" in {c.doc_id for c in miss.citations}
