"""Every example, and every Python code block of the README and the documentation site,
run as a user runs it, against the smoke model's real llama.cpp server (one server: the
session's, reached through ``COS_BASE_URL``), so a snippet cannot drift from the code.

Our own collector rather than ``pytest-examples`` or ``mktestdocs``: each block runs in a
fresh process and a fresh folder holding ``examples/docs`` (the paths the snippets use),
with the environment that points ``open_model()`` at the running server; both plugins run
blocks in the test process, where one block's index, event loop or model server would
leak into the next."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def blocks() -> list:
    out = []
    for page in PAGES:
        for n, m in enumerate(FENCE.finditer(page.read_text()), 1):
            out.append(pytest.param(m.group(1), id=f"{page.name}-{n}"))
    return out


@pytest.fixture
def user_env(smoke_env, tmp_path):
    """A folder like a user's checkout (examples/docs) and the environment that sends every
    ``open_model()`` to the session's smoke server."""
    shutil.copytree(ROOT / "examples" / "docs", tmp_path / "examples" / "docs")
    return tmp_path, dict(smoke_env)


def run(args: list[str], cwd: Path, env: dict, timeout: float = 600) -> str:
    res = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert res.returncode == 0, f"{args} failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res.stdout


def test_every_page_has_its_python_blocks_collected():
    names = [p.id for p in blocks()]
    assert any(n.startswith("README.md") for n in names)
    assert len(names) >= 3  # the README's three uses


@pytest.mark.parametrize("code", blocks())
def test_a_python_block_of_the_docs_runs(code, user_env):
    cwd, env = user_env
    (cwd / "snippet.py").write_text(code)
    run([sys.executable, "snippet.py"], cwd, env)


@pytest.mark.parametrize(
    "example, args",
    [
        ("quickstart.py", ["ix"]),
        ("llamaindex_pipeline.py", ["ix"]),
        ("langchain_retriever.py", ["ix"]),
        ("miss_triggered_refinement.py", ["ix"]),
    ],
)
def test_an_example_runs(example, args, user_env):
    cwd, env = user_env
    out = run([sys.executable, str(ROOT / "examples" / example), *args], cwd, env)
    assert out.strip()


def test_the_docs_site_example_runs_on_one_page(user_env):
    if not Path("/usr/share/doc/python3-doc/html/tutorial").is_dir():
        if os.environ.get("COS_REQUIRE_PYDOC"):
            pytest.fail("python3-doc is not installed (COS_REQUIRE_PYDOC is set)")
        pytest.skip("apt-get install python3-doc")
    cwd, env = user_env
    args = [sys.executable, str(ROOT / "examples" / "docs_site.py"), "ix", "--pages", "whatnow"]
    out = run(args, cwd, env)
    assert "llms.txt" in out or "sections" in out
