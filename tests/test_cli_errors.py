"""Every expected failure of a `spacy sla` command ends in one message and
exit code 1, never a traceback: bad data lines ([SLA-E011]), unreadable files,
damaged or mismatched saved pipelines, and bad benchmark settings (refused
before anything is measured)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest
import spacy
from spacy.cli._util import app
from spacy.tokens import DocBin
from typer.testing import CliRunner

import spacy_sla.cli  # noqa: F401  (registers `sla` on spaCy's app)
import spacy_sla.cli.benchmark as benchmark_cli

from util import sla_nlp

runner = CliRunner()
SELF_HEADED = "1\tA\ta\tX\tX\t_\t2\tdep\t_\t_\n2\tB\tb\tX\tX\t_\t2\tdep\t_\t_\n\n"
COLA_LINE = "gj04\t1\t\tA sentence.\n"


def cli(*args: object):
    return runner.invoke(app, ["sla", *[str(arg) for arg in args]])


def failed(result, *expected: str) -> str:
    """Assert a clean failure: exit code 1 through msg.fail (SystemExit, not
    an uncaught exception), no traceback, and the expected text (with
    wasabi's line wrapping undone)."""
    output = " ".join(result.output.split())
    assert result.exit_code == 1, output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in output
    for text in expected:
        assert text in output
    return output


def run_module(*args: object) -> subprocess.CompletedProcess:
    """`python -m spacy sla ...` in a fresh process, as a user runs it."""
    environment = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "spacy", "sla", *[str(arg) for arg in args]],
        capture_output=True, text=True, env=environment,
    )


def test_annotate_with_a_missing_pipeline_fails_in_one_line_before_writing(tmp_path: Path) -> None:
    texts = tmp_path / "texts.jsonl"
    texts.write_text('{"text": "The cat sat."}\n', encoding="utf8")
    missing, output_dir = tmp_path / "no" / "pipeline", tmp_path / "annotated"
    expected = (f"Could not find the pipeline '{missing}': there is no directory {missing.resolve()} "
                "and no installed package of that name")
    failed(cli("annotate", missing, texts, output_dir), expected)
    # on Ray too, refused before Ray starts
    failed(cli("annotate", missing, texts, output_dir, "--ray"), expected)
    assert not output_dir.exists()
    # a directory that holds no pipeline: refused before the output directory is made
    (tmp_path / "empty").mkdir()
    failed(cli("annotate", tmp_path / "empty", texts, output_dir),
           f"[SLA-E081] {tmp_path / 'empty'} is not a trained spaCy pipeline: it has no config.cfg and no meta.json")
    assert not output_dir.exists()


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
    failed(cli("info", truncated), f"Could not load the pipeline '{truncated}'", "Unpack failed",
           "truncated or damaged")
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


# benchmark: settings are refused before anything is loaded or measured


@pytest.mark.parametrize(
    "options,message",
    [
        (["--repeats", "0"], "--repeats takes a whole number >= 1; got 0"),
        (["--repeats", "-1"], "--repeats takes a whole number >= 1; got -1"),
        (["--n-batches", "0"], "--n-batches takes a whole number >= 1; got 0"),
        (["--n-docs", "0"], "--n-docs takes a whole number >= 1; got 0"),
    ],
)
def test_benchmark_refuses_bad_settings_up_front(monkeypatch, tmp_path: Path, options, message) -> None:
    def must_not_run(*args, **kwargs):
        raise AssertionError("the benchmark started despite a bad setting")

    monkeypatch.setattr(benchmark_cli, "run_config_benchmark", must_not_run)
    data = tmp_path / "sentences.spacy"
    DocBin(docs=[spacy.blank("en")("The cat sat.")]).to_disk(data)
    config = tmp_path / "config.cfg"
    config.write_text("[nlp]\nlang = \"en\"\n", encoding="utf8")
    failed(cli("benchmark", config, "--data", data, "--output", tmp_path / "report.json", *options), message)
    assert not (tmp_path / "report.json").exists()


def test_benchmark_without_a_config_file_fails_in_one_line(tmp_path: Path) -> None:
    data = tmp_path / "sentences.spacy"
    DocBin(docs=[spacy.blank("en")("The cat sat.")]).to_disk(data)
    failed(cli("benchmark", tmp_path / "missing.cfg", "--data", data, "--output", tmp_path / "report.json"),
           f"No config at {tmp_path / 'missing.cfg'}")
