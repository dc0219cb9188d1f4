"""Every ``bash`` block of the README and the documentation site, run as a script the way
a user pastes it, against the smoke model's server (``COS_BASE_URL``), so a command line
cannot drift from the CLI.

Each block runs with ``bash -euo pipefail`` in a fresh folder like a user's checkout
(``examples/``, a few documents in ``docs/``, an index built from them in ``./index``),
with what stands for another machine replaced by this one's (:data:`HOSTS`: the docs'
PostgreSQL host and ``PGPASSWORD=...`` become the session's real PostgreSQL and its
password, the Chroma host a real ``chroma run`` server). Three kinds of line cannot run to
completion inside a test and are checked instead, by shell functions the block's script
starts with (:data:`PREAMBLE`):

- ``cos ... --watch`` and ``cos ui``, which serve until stopped, must still be running
  after a few seconds (an exit before that, error or not, fails the block);
- ``make TARGET`` must name a target of the Makefile (``make -n``: ``make test`` is this
  suite, ``make demo`` the quick start, which ``test_examples_and_docs`` runs);
- ``pip install "cos-integrations[EXTRAS]"`` must name extras that ``pyproject.toml`` has
  (installing is what CI's own setup does).
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)
TUTORIAL = "/usr/share/doc/python3-doc/html/tutorial"
# other machines in the docs -> this one's (a fixture name, or a folder of the sandbox)
HOSTS = {
    "postgresql://cos@db.internal/cos": "postgres_url",
    "http://chroma.internal:8000": "chroma_server",
    "PGPASSWORD=...": "pg_password",
    "/srv/cos": "srv-cos",
    TUTORIAL: "tutorial",
}
LONG_RUN_S = 8
PREAMBLE = r"""
serves() {  # a command that serves until stopped: still running after $LONG_RUN_S s
  local rc=0
  timeout -s INT "$LONG_RUN_S" "$@" || rc=$?
  [ "$rc" -eq 124 ] || { echo "$* stopped (exit $rc) within $LONG_RUN_S s" >&2; return 1; }
}
cos() {
  case " $* " in
    *" --watch "* | " ui "*) serves "$COS_BIN" "$@" ;;
    *) "$COS_BIN" "$@" ;;
  esac
}
make() { command make -n -C "$ROOT" "$@" >/dev/null; }
pip() { "$PYTHON" "$ROOT/tests/integration/test_shell_blocks.py" pip "$@"; }
"""
EPILOGUE = '\nfor job in $(jobs -p); do wait "$job"; done\n'


def blocks() -> list:
    out = []
    for page in PAGES:
        for n, m in enumerate(FENCE.finditer(page.read_text()), 1):
            out.append(pytest.param(m.group(1), id=f"{page.name}-bash-{n}"))
    return out


def check_pip_line(args: list[str]) -> str | None:
    """Why ``pip ARGS`` would not install this package's extras (``None``: it would)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = [a for a in args if not a.startswith("-") and a != "install"]
    if args[:1] != ["install"] or not specs:
        return f"not a 'pip install PACKAGE[EXTRAS]' line: {args}"
    for spec in specs:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[([^\]]*)\])?", spec)
        if not m or m.group(1) != project["name"]:
            return f"{spec!r} is not {project['name']}"
        extras = {e.strip() for e in (m.group(2) or "").split(",") if e.strip()}
        unknown = extras - set(project.get("optional-dependencies", {}))
        if unknown:
            return f"{spec}: no such extra {sorted(unknown)} in pyproject.toml"
    return None


@pytest.fixture(scope="module")
def built_index(smoke_env, tmp_path_factory):
    """``cos ingest docs --index index`` once, on the smoke model: the ``./index`` the
    blocks name (each block gets its own copy)."""
    where = tmp_path_factory.mktemp("shell-index")
    shutil.copytree(ROOT / "examples" / "docs", where / "docs")
    env = _env(smoke_env)
    cmd = [str(Path(sys.executable).parent / "cos"), "ingest", "docs", "--index", "index"]
    res = subprocess.run(cmd, cwd=where, env=env, capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    return where / "index"


def _env(smoke_env: dict[str, str]) -> dict[str, str]:
    return {
        **smoke_env,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "COS_BIN": str(Path(sys.executable).parent / "cos"),
        "PYTHON": sys.executable,
        "ROOT": str(ROOT),
        "LONG_RUN_S": str(LONG_RUN_S),
    }


def _sandbox(code: str, request, tmp_path: Path, built_index: Path) -> str:
    """A user's checkout in ``tmp_path``; ``code`` with other machines replaced."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    shutil.copytree(ROOT / "examples" / "docs", tmp_path / "docs")
    shutil.copytree(built_index, tmp_path / "index")
    for there, here in HOSTS.items():
        if there not in code:
            continue
        if here == "tutorial":
            if not Path(TUTORIAL).is_dir():
                if os.environ.get("COS_REQUIRE_PYDOC"):
                    pytest.fail("python3-doc is not installed (COS_REQUIRE_PYDOC is set)")
                pytest.skip("apt-get install python3-doc")
            (tmp_path / here).mkdir()
            for page in ("whatnow.html",):  # one short page, not 17 (the block runs, answer or not)
                shutil.copy(Path(TUTORIAL) / page, tmp_path / here / page)
            value = str(tmp_path / here)
        elif here == "pg_password":  # the session's server's (tests/pg_server.py)
            import pg_server

            value = f"PGPASSWORD={pg_server.PASSWORD}"
        elif here.endswith("_url") or here.endswith("_server"):
            value = request.getfixturevalue(here)
        else:
            value = str(tmp_path / here)
        code = code.replace(there, value)
    return code


def test_every_page_has_its_shell_blocks_collected():
    ids = [p.id for p in blocks()]
    assert any(i.startswith("README.md") for i in ids)
    text = "".join(str(p.values[0]) for p in blocks())
    stale = [there for there in HOSTS if there not in text]
    assert not stale, f"HOSTS names what no block says any more: {stale}"


@pytest.mark.parametrize(
    "args, why",
    [
        (["install", "cos-integrations[llamaindex,local]"], None),
        (["install", "cos-integrations[nosuch]"], "no such extra"),
        (["install", "other-package"], "is not"),
    ],
)
def test_a_pip_line_is_checked_against_pyproject(args, why):
    got = check_pip_line(args)
    assert (got is None) if why is None else (why in got)


@pytest.mark.parametrize("code", blocks())
def test_a_shell_block_of_the_docs_runs(code, request, tmp_path, smoke_env, built_index):
    script = PREAMBLE + _sandbox(code, request, tmp_path, built_index) + EPILOGUE
    (tmp_path / "block.sh").write_text(script)
    res = subprocess.run(
        ["bash", "-euo", "pipefail", "block.sh"],
        cwd=tmp_path,
        env=_env(smoke_env),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert res.returncode == 0, f"{code}\nfailed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"


if __name__ == "__main__" and sys.argv[1:2] == ["pip"]:  # the blocks' `pip` function
    reason = check_pip_line(sys.argv[2:])
    if reason:
        sys.exit(f"pip {' '.join(sys.argv[2:])}: {reason}")
