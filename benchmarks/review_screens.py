"""Screenshots of the review page (``cos ui``) on a real index, for the README: the
overview, one section's page (summary, source, question bank) and its history.

    python benchmarks/review_screens.py INDEX_DIR [OUT_DIR=docs] [DOC_ID]

Starts ``cos ui`` on a free loopback port, opens it in Debian's headless Chromium through
chromedriver (``apt-get install chromium chromium-driver``), and writes
``review-overview.png``, ``review-document.png`` and ``review-history.png``. ``DOC_ID``
(default: the index's first document with traffic, else its first) picks the page.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pick_document(index_dir: Path) -> str:
    from cos_integrations.serving.index import CoSIndex

    index = CoSIndex(index_dir, create=False)
    try:
        seen = [e["doc_id"] for e in index.store.recent_events("hit", 50) if e["doc_id"]]
        seen += [e["doc_id"] for e in index.store.recent_events("miss", 50) if e["doc_id"]]
        return seen[0] if seen else index.store.documents()[0].doc_id
    finally:
        index.store.close()


def main(index_dir: Path, out: Path, doc_id: str | None) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    doc_id = doc_id or pick_document(index_dir)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cos_integrations.cli", "ui", "--index", str(index_dir)]
        + ["--port", str(port), "--user", "screens"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.2)
        opts = webdriver.ChromeOptions()
        opts.binary_location = "/usr/bin/chromium"
        profile = tempfile.mkdtemp()
        for arg in (
            "--headless=new",
            "--window-size=1280,900",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-dev-shm-usage",
            f"--user-data-dir={profile}",
        ):
            opts.add_argument(arg)
        driver = webdriver.Chrome(
            service=Service(executable_path="/usr/bin/chromedriver"), options=opts
        )
        try:
            out.mkdir(parents=True, exist_ok=True)
            base = f"http://127.0.0.1:{port}"
            driver.get(base + "/")
            driver.save_screenshot(str(out / "review-overview.png"))
            driver.get(f"{base}/doc/{quote(doc_id, safe='')}")
            driver.find_element(By.ID, "summary")
            driver.save_screenshot(str(out / "review-document.png"))
            driver.execute_script(
                "arguments[0].scrollIntoView()", driver.find_element(By.ID, "versions")
            )
            driver.save_screenshot(str(out / "review-history.png"))
            print(f"wrote 3 screenshots of {index_dir} ({doc_id}) to {out}")
        finally:
            driver.quit()
    finally:
        proc.terminate()
        proc.wait(timeout=20)


if __name__ == "__main__":
    args = sys.argv[1:]
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    main(
        Path(args[0]),
        Path(args[1] if len(args) > 1 else "docs"),
        args[2] if len(args) > 2 else None,
    )
