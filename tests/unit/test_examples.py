"""The examples users copy, run on the prompt-reading fake model and lexical vectors (the
integration suite runs them on the real server)."""

import asyncio
import importlib.util
from contextlib import contextmanager
from pathlib import Path

from fakes import ScriptedFakeModel, make_document

from cos_integrations import BackgroundRefiner
from cos_integrations.embedded.embeddings import HashingEmbedder

ROOT = Path(__file__).resolve().parents[2]


def load_example(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_refinement_example_runs_one_refiner_and_the_second_ask_hits(tmp_path, monkeypatch):
    """Before, the example started a BackgroundRefiner and refine_on_miss="background" (a
    second one): two refiners raced for the one job, wait_idle could return before the
    other finished, and the retriever was never closed."""
    example = load_example("miss_triggered_refinement")
    (tmp_path / "docs").mkdir()
    policy = make_document(4, topic="travel") + " The travel insurance policy number is AR-5521."
    (tmp_path / "docs" / "travel-policy.md").write_text(policy)
    model = ScriptedFakeModel(thesis_facts=2)

    @contextmanager
    def fake_model(**_):
        yield model

    started: list[BackgroundRefiner] = []
    real_init = BackgroundRefiner.__init__

    def counting(self, *args, **kwargs):
        started.append(self)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(example, "HERE", tmp_path)
    monkeypatch.setattr(example, "open_model", fake_model)
    monkeypatch.setattr(example, "LocalEmbedder", lambda: HashingEmbedder(256))
    monkeypatch.setattr(BackgroundRefiner, "__init__", counting)
    first, again = asyncio.run(example.main(tmp_path / "ix"))
    assert not first.hit and first.job_id is not None
    assert again.hit and again.answer == "AR-5521"
    assert len(started) == 1  # one refiner
    assert not started[0]._thread.is_alive()  # closed on exit
    assert [o.status for o in started[0].outcomes] == ["published"]
