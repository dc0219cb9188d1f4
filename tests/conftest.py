import pytest
from fakes import ScriptedFakeModel

from cos_integrations import ChainOfSummaries, CoSConfig
from cos_integrations.embeddings import HashingEmbedder
from cos_integrations.index import CoSIndex


@pytest.fixture
def fake_model():
    return ScriptedFakeModel(thesis_facts=2)


@pytest.fixture
def engine(fake_model):
    return ChainOfSummaries(fake_model, CoSConfig.fast())


@pytest.fixture
def index(tmp_path):
    idx = CoSIndex(tmp_path / "index", embedder=HashingEmbedder(256), config=CoSConfig.fast())
    yield idx
    idx.store.close()
