"""`spacy sla benchmark`: bad settings and a missing config are refused in
one line before anything is loaded or measured."""
from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin

import spacy_sla.tools.cli.benchmark as benchmark_cli

from .commands import cli, failed


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
