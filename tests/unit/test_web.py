"""The review page through FastAPI's test client over a real store and Chroma index (the
prompt-reading fake model built the summaries): every page, every action, the CSRF, token
and read-only refusals, escaping of hostile text and the compare-and-swap refusal."""

import asyncio
import re

import pytest
from fakes import ScriptedFakeModel, make_document

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from cos_integrations import ChainOfSummaries, CoSConfig  # noqa: E402
from cos_integrations.loaders import SourceDocument  # noqa: E402
from cos_integrations.serving import oversight  # noqa: E402
from cos_integrations.web import app as web_app  # noqa: E402
from cos_integrations.web import create_app  # noqa: E402

HOSTILE = '<script>alert("x")</script> <img src=x onerror=alert(1)>'


@pytest.fixture
def filled(index):
    model = ScriptedFakeModel(thesis_facts=2)
    engine = ChainOfSummaries(model, CoSConfig.fast(iterations=0))
    docs = [
        SourceDocument(doc_id=f"docs/{t}.md", text=make_document(6, topic=t), title=t.title())
        for t in ("lease", "garden")
    ]
    docs.append(
        SourceDocument(
            doc_id="docs/evil.md",
            text=make_document(4, topic="evil") + " " + HOSTILE,
            title=HOSTILE,
        )
    )
    asyncio.run(index.aingest(docs, engine))
    return index


def client(index, **kw):
    return TestClient(create_app(index, user="tester", **kw), follow_redirects=False)


def csrf_of(html: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', html)
    assert m, "no CSRF field in the page"
    return m.group(1)


def page(c, url):
    r = c.get(url)
    assert r.status_code == 200, r.text[:500]
    return r.text


def test_overview_lists_documents_stats_plots_and_the_queue(filled):
    filled.store.record_event("hit", "docs/lease.md", "q1", context_tokens=10)
    filled.store.record_event("miss", "docs/garden.md", "q2", context_tokens=50)
    filled.store.enqueue("docs/garden.md", "q2")
    c = client(filled)
    html = page(c, "/")
    for doc_id in ("docs/lease.md", "docs/garden.md", "docs/evil.md"):
        assert doc_id in html
    assert "<svg" in html and "hit rate per day" in html and "polyline" in html
    assert re.search(r"<b>50%</b> answered without the source", html)  # 1 hit of 2 queries
    assert 'id="queue"' in html and "<td>1</td>" in html  # one pending job
    # most missed first; filters narrow the list
    missed = page(c, "/?sort=missed")
    assert missed.index("docs/garden.md") < missed.index("docs/lease.md")
    only = page(c, "/?filter=missed")
    assert "docs/garden.md" in only and "docs/lease.md" not in only
    assert c.get("/?sort=DROP TABLE").status_code == 400
    assert "Content-Security-Policy" in c.get("/").headers


def test_overview_paginates(filled, monkeypatch):
    monkeypatch.setattr(web_app, "PAGE_SIZE", 2)
    c = client(filled)
    first, second = page(c, "/"), page(c, "/?page=2")
    assert "page 1 of 2" in first and 'id="next"' in first
    assert "docs/evil.md" in first and "docs/lease.md" not in first  # sorted by id
    assert "docs/lease.md" in second and "docs/evil.md" not in second


def test_document_page_shows_summary_source_bank_versions_and_highlights(filled):
    doc = filled.store.get_document("docs/lease.md")
    # a human version that states a number and a name the source does not have
    oversight.pin_summary(
        filled,
        "docs/lease.md",
        "The lease item 1 is value 1b. Rent is 950 euros, paid to Mallory.",
        expected_version=doc.current_version,
        user="ana",
    )
    html = page(filled and client(filled), "/doc/docs%2Flease.md")
    assert 'id="summary"' in html and 'id="source"' in html
    assert '<mark class="number"' in html and ">950</mark>" in html
    assert '<mark class="name"' in html and ">Mallory</mark>" in html
    assert "lease item 5 is value 5f" in html  # the source beside it
    assert 'id="bank"' in html and ("pass" in html or "fail" in html)
    assert "v2 (current)" in html and "human" in html
    # the word diff between the two versions
    assert 'id="diff"' in html and "<ins>" in html and "<del>" in html
    assert "ana" in html and "pin" in html  # the audit log
    assert "has not checked this summary" in html and 'id="answers"' in html
    assert client(filled).get("/doc/nope").status_code == 404
    # issue 57 item 3: the router's checks and the verified answers, per document
    filled.store.record_check("docs/lease.md", "Q?", 0.9, "value 1b", "value 9z", False)
    source = filled.store.get_document("docs/lease.md").text.split(". ")[5] + "."
    filled.store.put_answer("docs/lease.md", "What is item 5?", "value 5f", source, "miss")
    html = page(client(filled), "/doc/docs%2Flease.md")
    assert "checked this summary's answers against the source chunks 1 times; 1 disagreed" in html
    assert "What is item 5?" in html and "value 5f" in html


def test_bank_marks_questions_pass_or_fail_for_the_current_version(filled):
    from cos_integrations.summarize.questions import QAPair

    store = filled.store
    store.add_question(
        "docs/lease.md",
        QAPair(
            question="Owner asks: which value has lease item 0?",
            answers=["value 0a"],
            origin="human",
        ),
    )
    store.add_question(
        "docs/lease.md",
        QAPair(
            question="Owner asks: which value has lease item 5?",
            answers=["value 5f"],
            origin="miss",
        ),
    )
    view = oversight.document_view(filled, "docs/lease.md")
    by_q = {q.question: q for q in view.bank}
    assert by_q[
        "Owner asks: which value has lease item 0?"
    ].passed  # the thesis holds items 0 and 1
    assert not by_q["Owner asks: which value has lease item 5?"].passed
    html = page(client(filled), "/doc/docs%2Flease.md")
    assert "Owner asks: which value has lease item 5?" in html and "miss" in html


def test_hostile_text_is_escaped_everywhere(filled):
    filled.store.record_event("miss", "docs/evil.md", HOSTILE)
    filled.store.enqueue("docs/evil.md", HOSTILE)
    doc = filled.store.get_document("docs/evil.md")
    oversight.pin_summary(
        filled,
        "docs/evil.md",
        "Summary " + HOSTILE,
        expected_version=doc.current_version,
        user=HOSTILE,
    )
    c = client(filled)
    for url in ("/", "/doc/docs%2Fevil.md", "/misses"):
        html = page(c, url)
        assert "<script>" not in html and "<img src=x" not in html, url
        assert "&lt;script&gt;" in html, url


def test_pin_through_the_form_publishes_pins_syncs_and_logs(filled):
    c = client(filled)
    html = page(c, "/doc/docs%2Fgarden.md")
    token = csrf_of(html)
    r = c.post(
        "/actions/pin",
        data={
            "csrf": token,
            "doc_id": "docs/garden.md",
            "expected_version": "1",
            "text": "The garden item 3 is value 3d.",
            "reason": "owner's fix",
        },
        headers={"X-Cos-User": "lead@example.org"},
    )
    assert r.status_code == 303 and r.headers["location"] == "/doc/docs%2Fgarden.md"
    after = page(c, r.headers["location"])
    assert 'id="flash"' in after and "pinned" in after  # confirmed on the next page
    assert "flash" not in page(c, "/doc/docs%2Fgarden.md").split("<main>")[1][:40]  # once
    doc = filled.store.get_document("docs/garden.md")
    cur = filled.store.current_summary("docs/garden.md")
    assert doc.pinned and cur.version == 2 and cur.created_by == "human"
    assert cur.text == "The garden item 3 is value 3d."
    vec = filled.summaries.get(where={"doc_id": "docs/garden.md"})
    assert vec["documents"] == [cur.text]  # re-indexed
    (act,) = filled.store.actions("docs/garden.md")
    assert (act.user, act.action, act.version, act.detail) == (
        "lead@example.org",
        "pin",
        2,
        "owner's fix",
    )
    assert "lead@example.org" in after


def test_a_stale_form_is_refused_and_changes_nothing(filled):
    c = client(filled)
    token = csrf_of(page(c, "/doc/docs%2Fgarden.md"))  # the owner sees v1
    # meanwhile someone else publishes v2
    oversight.pin_summary(
        filled, "docs/garden.md", "Someone else's text.", expected_version=1, user="other"
    )
    r = c.post(
        "/actions/pin",
        data={"csrf": token, "doc_id": "docs/garden.md", "expected_version": "1", "text": "Mine."},
    )
    assert r.status_code == 409 and "changed meanwhile" in r.text
    assert filled.store.current_summary("docs/garden.md").text == "Someone else's text."
    r = c.post(
        "/actions/revert",
        data={"csrf": token, "doc_id": "docs/garden.md", "version": "1", "expected_version": "1"},
    )
    assert r.status_code == 409 and filled.store.current_summary("docs/garden.md").version == 2


def test_csrf_is_checked_on_every_action(filled):
    c = client(filled)
    page(c, "/")  # sets this browser's CSRF cookie
    for data in ({}, {"csrf": "forged"}):
        r = c.post("/actions/unpin", data={"doc_id": "docs/lease.md", **data})
        assert r.status_code == 403 and "CSRF" in r.text
    # a form from another browser (no cookie) is refused too
    fresh = client(filled)
    r = fresh.post(
        "/actions/unpin",
        data={"doc_id": "docs/lease.md", "csrf": csrf_of(page(c, "/doc/docs%2Flease.md"))},
    )
    assert r.status_code == 403
    assert filled.store.actions() == []


def test_token_is_required_on_every_request_when_set(filled):
    c = client(filled, token="s3cret")
    assert c.get("/").status_code == 401
    assert c.get("/static/style.css").status_code == 401
    assert c.get("/", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert c.get("/?token=wrong").status_code == 401
    assert c.get("/", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    login = c.get("/?token=s3cret&sort=missed")
    assert login.status_code == 303 and login.headers["location"] == "/?sort=missed"
    assert c.get("/").status_code == 200  # the cookie it set
    assert "s3cret" not in c.get("/").text


def test_read_only_serves_pages_but_no_action(filled):
    c = client(filled, read_only=True)
    html = page(c, "/doc/docs%2Flease.md")
    assert "read-only" in html and '<form method="post"' not in html
    token = c.cookies.get("cos_csrf")
    r = c.post("/actions/unpin", data={"doc_id": "docs/lease.md", "csrf": token})
    assert r.status_code == 403 and "read-only" in r.text
    assert filled.store.actions() == []


def test_revert_unpin_accept_reject_enqueue_retry_drop(filled):
    c = client(filled)
    token = csrf_of(page(c, "/doc/docs%2Flease.md"))
    d = "docs/lease.md"
    post = lambda url, **data: c.post(url, data={"csrf": token, "doc_id": d, **data})  # noqa: E731
    assert post("/actions/pin", expected_version="1", text="Owner text one.").status_code == 303
    # refinement can only suggest on a pinned document
    v3 = filled.store.publish_version(d, "Refined text.", expected_version=2, created_by="refine")
    assert filled.store.current_summary(d).version == 2
    assert post("/actions/reject", version=str(v3)).status_code == 303
    assert [v.status for v in filled.store.versions(d)][-1] == "rejected"
    assert post("/actions/accept", version=str(v3), expected_version="2").status_code == 409
    v4 = filled.store.publish_version(d, "Refined again.", expected_version=2, created_by="refine")
    assert post("/actions/accept", version=str(v4), expected_version="2").status_code == 303
    assert filled.store.current_summary(d).version == v4
    assert post("/actions/revert", version="1", expected_version=str(v4)).status_code == 303
    assert filled.store.current_summary(d).version == 1
    assert filled.summaries.get(where={"doc_id": d})["documents"] == [
        filled.store.versions(d)[0].text
    ]
    assert post("/actions/revert", version="99", expected_version="1").status_code == 404
    assert post("/actions/unpin").status_code == 303 and not filled.store.get_document(d).pinned
    assert post("/actions/enqueue", question="  Who signs the lease? ").status_code == 303
    (job,) = filled.store.jobs("pending")
    assert job.query == "Who signs the lease?"
    assert post("/actions/enqueue", question="   ").status_code == 409
    # a dead job: retry puts it back, drop gives up on it; a live one is refused
    assert (
        c.post("/actions/job", data={"csrf": token, "job_id": job.id, "verb": "retry"}).status_code
        == 409
    )
    for _ in range(3):
        leased = filled.store.lease("w")
        filled.store.fail_job(leased.id, "w", "boom")
    assert filled.store.job(job.id).status == "dead"
    assert "Retry" in page(c, "/") and "boom" in page(c, "/")
    assert (
        c.post("/actions/job", data={"csrf": token, "job_id": job.id, "verb": "retry"}).status_code
        == 303
    )
    assert filled.store.job(job.id).status == "pending" and filled.store.job(job.id).attempts == 0
    for _ in range(3):
        leased = filled.store.lease("w")
        filled.store.fail_job(leased.id, "w", "boom")
    assert (
        c.post("/actions/job", data={"csrf": token, "job_id": job.id, "verb": "drop"}).status_code
        == 303
    )
    assert filled.store.job(job.id).status == "dropped"
    assert (
        c.post("/actions/job", data={"csrf": token, "job_id": 999, "verb": "drop"}).status_code
        == 404
    )
    actions = [a.action for a in reversed(filled.store.actions(d))]
    assert actions == ["pin", "reject", "accept", "revert", "unpin", "enqueue", "retry", "drop"]
    hist = page(c, "/doc/docs%2Flease.md")
    assert all(a in hist for a in ("reject", "accept", "revert", "unpin", "enqueue"))


def test_misses_page_follows_each_miss_to_what_became_of_it(filled):
    store = filled.store
    for q in ("Who fixes the roof?", "What colour is the door?", "Is there parking?"):
        store.record_event("miss", "docs/lease.md", q)
    a = store.enqueue("docs/lease.md", "Who fixes the roof?")
    b = store.enqueue("docs/lease.md", "What colour is the door?")
    job = store.lease("w")
    assert job.id == a
    store.finish_job(a, "w", "published", "the rewrite answers it", version=2)
    job = store.lease("w")
    store.finish_job(b, "w", "not_in_source", "the source does not say")
    html = page(client(filled), "/misses")
    rows = {m.query: m for m in oversight.recent_misses(filled)[0]}
    assert (
        rows["Who fixes the roof?"].outcome == "refined"
        and rows["Who fixes the roof?"].version == 2
    )
    assert rows["What colour is the door?"].outcome == "not in source"
    assert rows["Is there parking?"].outcome == "not queued"
    assert "refined into v2" in html and "not in source" in html and "Recent misses (3)" in html


def test_cli_refuses_a_public_host_without_a_token(filled, monkeypatch):
    from typer.testing import CliRunner

    from cos_integrations.cli import app
    from cos_integrations.cli.ui import is_loopback

    monkeypatch.delenv("COS_UI_TOKEN", raising=False)
    out = CliRunner().invoke(app, ["ui", "--index", str(filled.path), "--host", "0.0.0.0"])
    assert out.exit_code == 2 and "without a token" in out.output
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")
    missing = CliRunner().invoke(app, ["ui", "--index", str(filled.path / "nope")])
    assert missing.exit_code == 2


def test_loopback_app_refuses_foreign_host_headers(filled):
    c = TestClient(
        create_app(filled, allowed_hosts=["127.0.0.1", "localhost"]),
        base_url="http://127.0.0.1:8765",
    )
    assert c.get("/").status_code == 200
    assert c.get("/", headers={"Host": "evil.example:8765"}).status_code == 400


def test_a_section_document_page_cites_its_source_with_the_anchor(index):
    model = ScriptedFakeModel(thesis_facts=2)
    docs = [
        SourceDocument(
            doc_id="site/guide.html#install",
            text=make_document(4, topic="install"),
            source="https://docs.example/guide.html#install",
            title="Guide › Install",
        ),
        SourceDocument(
            doc_id="site/local.md#setup",
            text=make_document(4, topic="setup"),
            source="/srv/site/local.md#setup",
            title="Local › Setup",
        ),
    ]
    asyncio.run(index.aingest(docs, ChainOfSummaries(model, CoSConfig.fast(iterations=0))))
    c = client(index)
    html = page(c, "/doc/site%2Fguide.html%23install")
    assert 'cited as <a href="https://docs.example/guide.html#install"' in html
    local = page(c, "/doc/site%2Flocal.md%23setup")
    assert "cited as /srv/site/local.md#setup" in local and '<a href="/srv' not in local
