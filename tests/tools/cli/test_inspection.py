"""`spacy sla info`, `mask` and `gates` on damaged or mismatched saved
pipelines and files: one message and exit code 1, never a traceback, in
this process as in `python -m spacy sla`."""
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest
import spacy
from spacy.tokens import DocBin

from .commands import cli, failed
from util import sla_nlp


def run_module(*args: object) -> subprocess.CompletedProcess:
    """`python -m spacy sla ...` in a fresh process, as a user runs it."""
    environment = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "spacy", "sla", *[str(arg) for arg in args]],
        capture_output=True, text=True, env=environment,
    )


# info, mask, gates on damaged or mismatched pipelines


@pytest.fixture(scope="module")
def broken_pipelines(tiny_bert: Path, tmp_path_factory) -> Dict[str, Path]:
    """A saved SLA pipeline and copies of it with a truncated weight file,
    the weights of a pipeline with other sla_layers ([SLA-E006]) and a config
    that is not UTF-8."""
    root = tmp_path_factory.mktemp("broken")
    sla_nlp(tiny_bert).to_disk(root / "good")
    sla_nlp(tiny_bert, sla_layers=[0]).to_disk(root / "one_layer")
    weights = Path("sla_transformer") / "model"
    for name in ("truncated", "mismatched", "not_utf8"):
        shutil.copytree(root / "good", root / name)
    data = (root / "good" / weights).read_bytes()
    (root / "truncated" / weights).write_bytes(data[: len(data) // 2])
    shutil.copyfile(root / "one_layer" / weights, root / "mismatched" / weights)
    config = root / "not_utf8" / "config.cfg"
    config.write_bytes(config.read_bytes().replace(b"[nlp]", b"[nlp]\n# caf\xe9 (Latin-1)", 1))
    return {name: root / name for name in ("good", "truncated", "mismatched", "not_utf8")}


def test_info_of_damaged_or_mismatched_pipelines_fails_in_one_line(broken_pipelines: Dict[str, Path]) -> None:
    truncated, mismatched, not_utf8 = (broken_pipelines[name] for name in ("truncated", "mismatched", "not_utf8"))
    failed(cli("info", truncated), f"Could not load the pipeline '{truncated}': [SLA-E124]", "Unpack failed")
    output = failed(cli("info", mismatched), f"Could not load the pipeline '{mismatched}': [SLA-E006]",
                    "transformer.encoder.layer.1.attention.self.gate.weight")
    assert "truncated or damaged" not in output  # a coded error says itself what to do
    failed(cli("info", not_utf8), f"{not_utf8 / 'config.cfg'} is not valid UTF-8", "save it as UTF-8")


def test_mask_and_gates_load_pipelines_the_same_way(broken_pipelines: Dict[str, Path], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    truncated = broken_pipelines["truncated"]
    failed(cli("mask", truncated, "The cat sat.", "--output", tmp_path / "mask.html"), "Could not load the pipeline", "Unpack failed")
    corpus = tmp_path / "texts.spacy"
    DocBin(docs=[spacy.blank("en")("The cat sat.")]).to_disk(corpus)
    failed(cli("gates", broken_pipelines["mismatched"], corpus, "--output", tmp_path / "gates.png"), "[SLA-E006]")
    # A truncated .spacy file is refused with its name.
    damaged = tmp_path / "damaged.spacy"
    damaged.write_bytes(corpus.read_bytes()[:20])
    failed(cli("gates", broken_pipelines["good"], damaged, "--output", tmp_path / "gates.png"),
           f"Could not read {damaged} as a .spacy file")


def test_a_damaged_pipeline_fails_in_one_line_as_spacy_runs_it(broken_pipelines: Dict[str, Path]) -> None:
    result = run_module("info", broken_pipelines["truncated"])
    said = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 1 and "Unpack failed" in said and "Traceback" not in said, said


def test_any_load_failure_of_a_pipeline_fails_in_one_line(broken_pipelines: Dict[str, Path], tmp_path: Path) -> None:
    """A component file that makes its reader raise a TypeError (a JSON list
    as the component's cfg, which spacy-transformers updates a dict with):
    the tool's one line, the hint for a damaged file, no traceback."""
    pipeline = tmp_path / "list_cfg"
    shutil.copytree(broken_pipelines["good"], pipeline)
    (pipeline / "sla_transformer" / "cfg").write_text("[1, 2]", encoding="utf8")
    failed(cli("info", pipeline), f"Could not load the pipeline '{pipeline}'", "dictionary update sequence",
           "truncated or damaged")
    result = run_module("info", pipeline)
    said = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 1 and "Traceback" not in said and "Could not load the pipeline" in said, said
