"""The review page end to end in a real headless browser: Debian's Chromium driven by
Selenium through the packaged chromedriver (no browser download), against `cos ui` run as
a real process over a real store and Chroma index.

Skipped when Chromium or chromedriver is missing, unless COS_REQUIRE_BROWSER=1 (set by
.ci/run, which installs them), where a missing browser fails the run.

The README's screenshots are taken by this test: regenerate them with
``COS_SCREENSHOTS=docs .venv/bin/python -m pytest tests/e2e`` (else they go to a temporary
directory).
"""

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakes import ScriptedFakeModel, make_document

from cos_integrations import ChainOfSummaries, CoSConfig
from cos_integrations.loaders import SourceDocument

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
HOSTILE = '<script>alert("pwned")</script><img src=x onerror="alert(1)">'

missing = not (os.path.exists(CHROMIUM) and os.path.exists(DRIVER))
if missing and os.environ.get("COS_REQUIRE_BROWSER") == "1":
    raise RuntimeError(
        f"COS_REQUIRE_BROWSER=1 but no {CHROMIUM} / {DRIVER}: "
        "apt-get install chromium chromium-driver"
    )
pytestmark = pytest.mark.skipif(missing, reason="needs Debian's chromium and chromium-driver")
webdriver = pytest.importorskip("selenium.webdriver")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(index, tmp_path):
    model = ScriptedFakeModel(thesis_facts=2)
    engine = ChainOfSummaries(model, CoSConfig.fast(iterations=0))
    docs = [
        SourceDocument(doc_id="docs/lease.md", text=make_document(6, topic="lease"), title="Lease"),
        SourceDocument(
            doc_id="docs/evil.md",
            text=make_document(3, topic="evil") + " " + HOSTILE,
            title=HOSTILE,
        ),
    ]
    asyncio.run(index.aingest(docs, engine))
    index.store.publish_version(
        "docs/evil.md", "Evil summary " + HOSTILE, expected_version=1, created_by="refine"
    )
    # some traffic, so the overview's figures and plots have something to show
    for i in range(6):
        q = f"What is the lease item {i % 2}?"
        index.store.record_event("hit", "docs/lease.md", q, context_tokens=60)
    for q in ("Who repairs the boiler?", "Can I keep a cat?"):
        index.store.record_event("miss", "docs/lease.md", q, context_tokens=400)
        index.store.enqueue("docs/lease.md", q)
    index.store.close()
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cos_integrations.cli",
            "ui",
            "--index",
            str(index.path),
            "--port",
            str(port),
            "--user",
            "browser-e2e",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        text=True,
    )
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"cos ui exited: {proc.stdout.read()}")
            time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("cos ui did not start listening in 60 s")
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=20)


@pytest.fixture
def browser(tmp_path):
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--window-size=1280,900",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'chrome-profile'}",
    ):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=opts)
    driver.set_page_load_timeout(60)
    driver.implicitly_wait(10)  # find_element waits for the next page to load
    yield driver
    driver.quit()


def no_alert(driver) -> bool:
    from selenium.common.exceptions import NoAlertPresentException

    try:
        _ = driver.switch_to.alert
    except NoAlertPresentException:
        return True
    return False


def flash(driver, words: str) -> str:
    """The confirmation on the page a form led to (waits for that page to load)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    # the old page's element goes stale when the new page replaces it mid-read: look again
    WebDriverWait(driver, 30, ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda d: words in " ".join(e.text for e in d.find_elements(By.ID, "flash"))
    )
    return driver.find_element(By.ID, "flash").text


def test_owner_edits_pins_sees_the_diff_reverts_and_hostile_text_stays_text(
    served, browser, tmp_path
):
    from selenium.webdriver.common.by import By

    shots = Path(os.environ.get("COS_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    b = browser
    b.get(served + "/")
    assert "cos review" in b.title
    assert b.save_screenshot(str(shots / "review-overview.png"))
    assert "docs/lease.md" in b.find_element(By.ID, "documents").text
    b.find_element(By.LINK_TEXT, "docs/lease.md").click()
    assert b.find_element(By.ID, "doc-id").text == "Lease"
    before = b.find_element(By.ID, "summary").text
    # edit and pin
    area = b.find_element(By.ID, "pin-text")
    area.clear()
    area.send_keys("The lease item 4 is value 4e. Rent is 990 euros.")
    b.find_element(By.ID, "pin-reason").send_keys("owner correction")
    b.find_element(By.ID, "pin-button").click()
    assert "pinned" in flash(b, "pinned")
    assert "990" in b.find_element(By.ID, "summary").text
    # the number the source does not state is highlighted
    marks = b.find_elements(By.CSS_SELECTOR, "#summary mark.number")
    assert [m.text for m in marks] == ["990"]
    versions = b.find_element(By.ID, "versions").text
    assert "v2 (current)" in versions and "owner correction" in versions
    diff = b.find_element(By.ID, "diff")
    assert "990" in " ".join(e.text for e in diff.find_elements(By.TAG_NAME, "ins"))
    assert diff.find_elements(By.TAG_NAME, "del")
    assert "browser-e2e" in b.find_element(By.ID, "actions").text
    assert b.save_screenshot(str(shots / "review-document.png"))
    b.execute_script("arguments[0].scrollIntoView()", b.find_element(By.ID, "versions"))
    assert b.save_screenshot(str(shots / "review-history.png"))
    # revert to v1
    b.find_element(By.ID, "revert-1").click()
    assert "reverted to v1" in flash(b, "reverted")
    assert b.find_element(By.ID, "summary").text == before
    assert "v1 (current)" in b.find_element(By.ID, "versions").text
    assert "revert" in b.find_element(By.ID, "actions").text
    # a hostile document renders as text: no script ran, no image error handler fired
    b.get(served + "/doc/docs%2Fevil.md")
    assert no_alert(b)
    assert '<script>alert("pwned")</script>' in b.find_element(By.ID, "source").text
    assert '<script>alert("pwned")</script>' in b.find_element(By.ID, "doc-id").text
    assert not b.find_elements(By.CSS_SELECTOR, "#source script, #source img, #doc-id img")
    assert b.execute_script("return document.querySelectorAll('img').length") == 0
    b.get(served + "/")
    assert no_alert(b) and HOSTILE not in b.page_source
