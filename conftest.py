"""Fixtures shared by the tests of the wheel (tests/), the replication (replication/tests/) and
the performance measurements (performance/tests/); setup.cfg puts the repository root and
tests/ (util.py, tiny_models.py) on sys.path."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from tiny_models import save_tiny_model  # noqa: E402

torch.set_num_threads(2)


def pytest_runtest_setup(item):
    if "gpu" in item.keywords and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny-bert"), "bert")


@pytest.fixture(scope="session")
def tiny_distilbert(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny-distilbert"), "distilbert")


@pytest.fixture(scope="session")
def tiny_electra(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny-electra"), "electra")


@pytest.fixture(scope="session")
def tiny_bert_relative(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny-bert-relative"), "bert", position_embedding_type="relative_key_query")


@pytest.fixture(scope="session")
def tiny_mpnet(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny-mpnet"), "mpnet")


def skip_unless_transformers_wraps(model_type: str) -> None:
    """Skip where the installed transformers predates the family's adapter
    (the tests of the declared floors run with transformers 4.38)."""
    from packaging.version import Version

    from spacy_sla.layers.family_adapters import ATTENTION_FAMILIES, installed_transformers

    minimum = ATTENTION_FAMILIES[model_type].minimum_transformers
    if Version(installed_transformers()) < Version(minimum):
        pytest.skip(f"{model_type} needs transformers {minimum}; {installed_transformers()} is installed")


@pytest.fixture(scope="session")
def tiny_modernbert(tmp_path_factory) -> Path:
    skip_unless_transformers_wraps("modernbert")
    return save_tiny_model(tmp_path_factory.mktemp("tiny-modernbert"), "modernbert")


@pytest.fixture(scope="session")
def tiny_albert(tmp_path_factory) -> Path:
    pytest.importorskip("sentencepiece", reason="the tiny ALBERT's tokenizer is trained with sentencepiece")
    return save_tiny_model(tmp_path_factory.mktemp("tiny-albert"), "albert")


@pytest.fixture(scope="session")
def tiny_deberta_v3(tmp_path_factory) -> Path:
    pytest.importorskip("sentencepiece", reason="the tiny DeBERTa's tokenizer is trained with sentencepiece")
    skip_unless_transformers_wraps("deberta-v2")
    return save_tiny_model(tmp_path_factory.mktemp("tiny-deberta-v3"), "deberta-v2")


@pytest.fixture(scope="module")
def ray_instance():
    """A local Ray instance of 2 CPUs for the tests of one module."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False)
    yield ray
    ray.shutdown()
