"""`spacy package` turns a pipeline with an sla_transformer into an
installable package that declares spacy-sla, loads by name and gives the
same outputs as the pipeline it was made from."""
import json
import os
import shutil
import subprocess
import sys

import numpy
import pytest
import srsly

from util import add_sla, parser_pipeline

TEXT = "The cat sat on the mat."
# Loads the installed package by name and prints its output and a checksum.
LOAD_PACKAGE = f"""
import json, spacy
nlp = spacy.load("en_sla_test")
doc = nlp({TEXT!r})
tensor = doc._.trf_data.tensors[0]
print(json.dumps({{"shape": list(tensor.shape), "checksum": float(abs(tensor).sum()), "values": tensor.ravel().tolist()}}))
"""


def run(command, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(part) for part in command], capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


@pytest.mark.slow
def test_a_packaged_sla_pipeline_installs_and_gives_the_same_outputs(tiny_bert, tmp_path):
    # A copy of the transformer that is deleted before the package is loaded:
    # the package must carry everything itself.
    bert = shutil.copytree(tiny_bert, tmp_path / "bert")
    nlp = add_sla(parser_pipeline(), bert)
    expected = nlp(TEXT)._.trf_data.tensors[0]
    nlp.to_disk(tmp_path / "pipeline")
    shutil.rmtree(bert)
    (tmp_path / "packages").mkdir()
    run([sys.executable, "-m", "spacy", "package", tmp_path / "pipeline", tmp_path / "packages",
         "--name", "sla_test", "--version", "0.0.1", "--build", "sdist", "--force"])
    package_dir = tmp_path / "packages" / "en_sla_test-0.0.1"
    requirements = srsly.read_json(package_dir / "meta.json")["requirements"]
    assert "spacy-sla>=0.1.0,<0.2.0" in requirements  # found by spaCy from the factory's distribution
    (sdist,) = (package_dir / "dist").glob("*.tar.gz")
    site = tmp_path / "site"
    run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--target", site, sdist])
    (metadata,) = site.glob("en_sla_test-0.0.1.dist-info/METADATA")
    assert "Requires-Dist: spacy-sla" in metadata.read_text()
    result = run([sys.executable, "-c", LOAD_PACKAGE], env={**os.environ, "PYTHONPATH": str(site)}, cwd=tmp_path)
    output = json.loads(result.stdout.strip().splitlines()[-1])
    assert output["shape"] == list(expected.shape) == [1, 9, 32]  # [CLS] + 7 tokens + [SEP], hidden size 32
    assert output["checksum"] == pytest.approx(float(numpy.abs(expected).sum()), rel=1e-5)
    numpy.testing.assert_allclose(numpy.asarray(output["values"]).reshape(expected.shape), expected, atol=1e-5)
