"""The dependency ranges in setup.cfg are true: `import spacy_sla` needs no
encoder family that a transformers release in range lacks, the
sentencepiece extra brings what converting a SentencePiece model needs, and
(slow) the lowest declared versions of spaCy, spacy-transformers,
transformers, thinc and torch, with the sentencepiece extra's, install in a
fresh environment and pass the core tests there."""
import configparser
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest
from packaging.requirements import Requirement

from spacy_sla.layers.family_adapters import TRANSFORMERS_FLOOR

ROOT = Path(__file__).parent.parent
# what the floors' environment runs: loading and saving, every family the
# floors support, training through listeners, the registered architectures
CORE_TESTS = [
    "tests/layers/test_hf_shim.py",
    "tests/layers/test_saved_state.py",
    "tests/layers/test_saved_tokenizer.py",
    "tests/test_pipeline_component.py",
    "tests/test_architectures.py",
]
FLOOR_PACKAGES = ("spacy", "spacy-transformers", "transformers", "thinc", "torch")
# besides the floors: what the tests import, and click, which spaCy 3.8.2's
# CLI imports and which current typer releases no longer bring
TEST_PACKAGES = ("pytest", "hypothesis", "click")


def declared(section: str, key: str) -> List[Requirement]:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg", encoding="utf8")
    lines = config[section][key].splitlines()
    return [Requirement(line.strip()) for line in lines if line.strip() and not line.strip().startswith("#")]


def floor(requirement: Requirement) -> str:
    (lowest,) = [spec.version for spec in requirement.specifier if spec.operator == ">="]
    return lowest


def floors() -> Dict[str, str]:
    requirements = declared("options", "install_requires") + declared("options.extras_require", "sentencepiece")
    wanted = FLOOR_PACKAGES + ("sentencepiece", "protobuf")
    return {requirement.name: floor(requirement) for requirement in requirements if requirement.name in wanted}


def test_the_sentencepiece_extra_brings_the_converters_protobuf():
    assert {requirement.name for requirement in declared("options.extras_require", "sentencepiece")} == {
        "sentencepiece", "protobuf"}


def test_the_adapters_know_the_declared_transformers_floor():
    assert floors()["transformers"] == TRANSFORMERS_FLOOR


IMPORT_WITHOUT_LATE_FAMILIES = """
import importlib, pkgutil, sys
# as with transformers 4.38-4.47, which setup.cfg allows: no ModernBERT
sys.modules["transformers.models.modernbert"] = None
sys.modules["transformers.models.modernbert.modeling_modernbert"] = None
import spacy_sla
for module in pkgutil.walk_packages(spacy_sla.__path__, "spacy_sla."):
    if module.name != "spacy_sla.tools.ab.watchdog":
        importlib.import_module(module.name)
print("imported")
"""


def test_every_module_imports_without_the_families_that_transformers_added_later():
    result = subprocess.run([sys.executable, "-c", IMPORT_WITHOUT_LATE_FAMILIES], capture_output=True, text=True,
                            timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("imported")


SAVE_ALBERT = """
import sys
sys.path.insert(0, "tests")
from pathlib import Path
from tiny_models import save_tiny_model
path = save_tiny_model(Path(sys.argv[1]), "albert")
(path / "tokenizer.json").unlink()  # as in many ALBERT and DeBERTa-v3 directories: the SentencePiece model alone
"""
LOAD_ALBERT = """
import sys
if sys.argv[2] == "without protobuf":
    sys.modules["google.protobuf"] = None
sys.path.insert(0, "tests")
from util import sla_nlp
try:
    nlp = sla_nlp(sys.argv[1])
except OSError as error:
    print(str(error).splitlines()[0])
else:
    print(type(nlp.get_pipe("sla_transformer").model.tokenizer).__name__)
"""


def test_a_sentencepiece_model_without_tokenizer_json_is_converted_with_protobuf(tmp_path):
    pytest.importorskip("sentencepiece")
    pytest.importorskip("google.protobuf")
    model = tmp_path / "albert"
    subprocess.run([sys.executable, "-c", SAVE_ALBERT, str(model)], check=True, cwd=ROOT, timeout=300)
    said = {}
    for case in ("with protobuf", "without protobuf"):
        result = subprocess.run([sys.executable, "-c", LOAD_ALBERT, str(model), case], capture_output=True,
                                text=True, cwd=ROOT, timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        said[case] = result.stdout.strip().splitlines()[-1]
    assert said["with protobuf"] == "AlbertTokenizerFast"
    assert said["without protobuf"].startswith("[SLA-E005]") and "protobuf" in said["without protobuf"]


def run(command: List[object], **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(part) for part in command], capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return result


@pytest.mark.slow  # installs the floors from the package index (pip's cache makes a second run quicker)
def test_the_declared_floors_install_and_pass_the_core_tests(tmp_path):
    environment = tmp_path / "floors"
    run([sys.executable, "-m", "venv", environment])
    python = environment / "bin" / "python"
    pins = [f"{name}=={version}" for name, version in floors().items()]
    pip = [python, "-m", "pip", "--disable-pip-version-check", "-q"]
    run([*pip, "install", *pins, *TEST_PACKAGES], timeout=1200)
    # the plugin itself, without touching its dependencies
    run([*pip, "install", "--no-deps", "--no-build-isolation", "-e", ROOT], timeout=600)
    listed = json.loads(run([python, "-m", "pip", "--disable-pip-version-check", "list", "--format", "json"]).stdout)
    installed = {package["name"].lower().replace("_", "-"): package["version"].split("+")[0] for package in listed}
    assert {name: installed.get(name) for name in floors()} == floors()
    offline = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    result = run([python, "-m", "pytest", *CORE_TESTS, "-m", "not slow", "-q", "-p", "no:cacheprovider"],
                 cwd=ROOT, env=offline, timeout=1800)
    summary = result.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary and "error" not in summary, summary
