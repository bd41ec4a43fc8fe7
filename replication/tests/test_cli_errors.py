"""Bad paths given to `python -m replication link-model`, `convert`, `train`,
`experiment` (and `spacy sla annotate --ray`) are refused with coded errors, before any
compute, and never delete or overwrite the user's files."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from spacy.cli._util import app
from typer.testing import CliRunner

import spacy_sla.tools.cli  # noqa: F401  (registers `sla` on spaCy's app)
import spacy_sla.tools.support.ray_session
from replication.cli import app as replication_app
from replication.tasks import TASKS

from tools.cli.commands import failed  # tests/ is on the test path (setup.cfg)

runner = CliRunner()
SST2 = "sentence\tlabel\nA fine film .\t1\nA dull one .\t0\n"


def said(result) -> str:
    return " ".join(result.output.split())


def refused(result, code: str) -> str:
    """The output of a command that exited with a coded error, not a traceback."""
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert f"[{code}]" in result.output, result.output
    return said(result)


def model_dir(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}", encoding="utf8")
    return path


def model_package(root: Path, name: str, body: str) -> str:
    """An importable package `name` under root whose __init__.py is body."""
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text(body, encoding="utf8")
    return name


@pytest.fixture
def packages(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    return root


def package_for(packages: Path, name: str, directory: Path) -> str:
    return model_package(packages, name, f"def get_model_path():\n    return {str(directory)!r}\n")


def link(package: str, destination: Path):
    return runner.invoke(replication_app, ["link-model", package, str(destination)])


def test_a_package_that_is_not_installed_is_named(tmp_path):
    text = refused(link("no_such_model_package", tmp_path / "minilm"), "SLA-REPLICATION-E070")
    assert "'no_such_model_package'" in text and "pip install" in text
    assert not (tmp_path / "minilm").exists()


def test_a_package_without_get_model_path_is_named(packages, tmp_path):
    name = model_package(packages, "model_package_without_path", "VERSION = 1\n")
    assert "has no get_model_path()" in refused(link(name, tmp_path / "minilm"), "SLA-REPLICATION-E071")
    broken = model_package(packages, "model_package_failing", "def get_model_path():\n    raise OSError('gone')\n")
    assert "get_model_path() failed (OSError: gone)" in refused(link(broken, tmp_path / "minilm"), "SLA-REPLICATION-E071")
    assert not (tmp_path / "minilm").is_symlink()


def test_a_model_directory_without_a_config_is_named(packages, tmp_path):
    empty = tmp_path / "empty-model"
    empty.mkdir()
    name = package_for(packages, "model_package_without_config", empty)
    text = refused(link(name, tmp_path / "minilm"), "SLA-REPLICATION-E072")
    assert f"{empty} is not a Hugging Face model directory" in text
    assert not (tmp_path / "minilm").is_symlink()


def test_a_file_a_directory_or_a_foreign_symlink_is_never_replaced(packages, tmp_path):
    name = package_for(packages, "model_package_kept", model_dir(tmp_path / "model"))
    file_destination = tmp_path / "a-file"
    file_destination.write_text("mine", encoding="utf8")
    assert "it exists and is a file" in refused(link(name, file_destination), "SLA-REPLICATION-E073")
    assert file_destination.read_text(encoding="utf8") == "mine" and not file_destination.is_symlink()
    directory = tmp_path / "a-directory"
    (directory / "inside").mkdir(parents=True)
    assert "it exists and is a directory" in refused(link(name, directory), "SLA-REPLICATION-E073")
    assert (directory / "inside").is_dir() and not directory.is_symlink()
    notes = tmp_path / "notes.txt"
    notes.write_text("notes", encoding="utf8")
    to_notes = tmp_path / "to-notes"
    to_notes.symlink_to(notes)
    assert "which is not a model directory" in refused(link(name, to_notes), "SLA-REPLICATION-E073")
    assert to_notes.resolve() == notes.resolve() and notes.read_text(encoding="utf8") == "notes"


def test_a_link_to_a_model_or_to_nothing_is_replaced(packages, tmp_path):
    model = model_dir(tmp_path / "model")
    name = package_for(packages, "model_package_relinked", model)
    destination = tmp_path / "links" / "minilm"
    result = link(name, destination)
    assert result.exit_code == 0, result.output
    assert destination.is_symlink() and destination.resolve() == model.resolve()
    assert link(name, destination).exit_code == 0 and destination.resolve() == model.resolve()
    other = model_dir(tmp_path / "other-model")
    destination.unlink()
    destination.symlink_to(other, target_is_directory=True)
    assert link(name, destination).exit_code == 0 and destination.resolve() == model.resolve()
    assert (other / "config.json").is_file()  # the old link's target is left alone
    destination.unlink()
    destination.symlink_to(tmp_path / "uninstalled-model", target_is_directory=True)
    assert link(name, destination).exit_code == 0 and destination.resolve() == model.resolve()


def test_a_link_below_a_file_is_refused(packages, tmp_path):
    name = package_for(packages, "model_package_below_file", model_dir(tmp_path / "model"))
    (tmp_path / "training").write_text("a file", encoding="utf8")
    assert "Cannot create the link" in refused(link(name, tmp_path / "training" / "minilm"), "SLA-REPLICATION-E074")
    assert (tmp_path / "training").read_text(encoding="utf8") == "a file"


def convert(input_path: Path, output_path: Path):
    return runner.invoke(replication_app, ["convert", "sst2", str(input_path), str(output_path)])


@pytest.mark.parametrize("output_of", [
    lambda data: data,
    lambda data: data.parent / ".." / data.parent.name / data.name,
    lambda data: (data.parent / "linked.tsv").symlink_to(data) or data.parent / "linked.tsv",
    lambda data: os.link(data, data.parent / "hard.tsv") or data.parent / "hard.tsv",
])
def test_convert_refuses_to_write_over_its_input(tmp_path, output_of):
    data = tmp_path / "train.tsv"
    data.write_text(SST2, encoding="utf8")
    output = output_of(data)
    assert "would overwrite the data it reads" in refused(convert(data, output), "SLA-REPLICATION-E075")
    assert data.read_text(encoding="utf8") == SST2


def test_convert_to_another_path_still_works(tmp_path):
    data = tmp_path / "train.tsv"
    data.write_text(SST2, encoding="utf8")
    result = convert(data, tmp_path / "train.spacy")
    assert result.exit_code == 0, result.output
    assert "Wrote 2 documents" in said(result)


def test_a_transformer_directory_without_a_config_is_refused_before_training(tmp_path):
    not_a_model = tmp_path / "not-a-model"
    not_a_model.mkdir()
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    result = runner.invoke(replication_app, ["train", "ud", str(corpus), str(tmp_path / "training"),
                                 "--transformer", str(not_a_model)])
    assert f"{not_a_model} is not a Hugging Face model directory" in refused(result, "SLA-REPLICATION-E072")
    assert not (tmp_path / "training").exists()
    result = runner.invoke(replication_app, ["experiment", "ud", "--data-dir", str(tmp_path / "data"),
                                 "--transformer", str(not_a_model), "--root", str(tmp_path / "project")])
    refused(result, "SLA-REPLICATION-E072")
    assert not (tmp_path / "project").exists()


def no_ray():
    raise spacy_sla.tools.support.ray_session.RayNotInstalled("Ray is not installed: `pip install \"spacy-sla[ray]\"`")


def test_ray_missing_is_said_before_anything_is_prepared(tiny_bert, tmp_path, monkeypatch):
    monkeypatch.setattr(spacy_sla.tools.support.ray_session, "import_ray", no_ray)
    result = runner.invoke(replication_app, ["experiment", "ud", "--data-dir", str(tmp_path / "data"),
                                 "--transformer", str(tiny_bert), "--root", str(tmp_path / "project"), "--ray"])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert "Ray is not installed" in said(result)
    assert not (tmp_path / "project").exists()
    import spacy

    pipeline = tmp_path / "pipeline"
    spacy.blank("en").to_disk(pipeline)
    (tmp_path / "input.txt").write_text("A text.\n", encoding="utf8")
    result = runner.invoke(app, ["sla", "annotate", str(pipeline), str(tmp_path / "input.txt"),
                                 str(tmp_path / "out"), "--ray"])
    assert result.exit_code == 1 and "Ray is not installed" in said(result), result.output
    assert not (tmp_path / "out").exists()


SELF_HEADED = "1\tA\ta\tX\tX\t_\t2\tdep\t_\t_\n2\tB\tb\tX\tX\t_\t2\tdep\t_\t_\n\n"
COLA_LINE = "gj04\t1\t\tA sentence.\n"
ROOT = Path(__file__).parent.parent.parent


def cli(*args: object):
    return runner.invoke(replication_app, [str(arg) for arg in args])


def run_module(*args: object) -> subprocess.CompletedProcess:
    """`python -m replication ...` in a fresh process from the repository root, as the project runs it."""
    environment = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "replication", *[str(arg) for arg in args]],
        capture_output=True, text=True, env=environment, cwd=ROOT,
    )


# convert, prepare, experiment: one message and exit code 1, never a traceback


def test_convert_of_a_cyclic_tree_fails_in_one_line_as_spacy_runs_it(tmp_path: Path) -> None:
    source = tmp_path / "bad.conllu"
    source.write_text(SELF_HEADED, encoding="utf8")
    output_path = tmp_path / "out.spacy"
    result = run_module("convert", "conllu", source, output_path)
    said = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 1, said
    assert f"[SLA-E011] {source}:2: word 2 is its own HEAD" in said
    assert "Traceback" not in said
    assert not output_path.exists()


def test_convert_refuses_bad_arguments_and_unwritable_outputs(tmp_path: Path) -> None:
    source = tmp_path / "cola.tsv"
    source.write_text(COLA_LINE, encoding="utf8")
    failed(cli("convert", "ner", source, tmp_path / "out.spacy"), "Unknown input format 'ner'", "cola, sst2")
    failed(cli("convert", "cola", source, tmp_path / "out.spacy", "--limit", "-1"), "--limit takes a whole number >= 0; got -1")
    failed(cli("convert", "cola", source, tmp_path / "out.spacy", "--offset", "-2"), "--offset takes a whole number >= 0")
    # The output names a directory: the OSError, in one line.
    (tmp_path / "a_directory").mkdir()
    failed(cli("convert", "cola", source, tmp_path / "a_directory"), "Could not convert", "Is a directory")
    bad = tmp_path / "bad.tsv"
    bad.write_text(COLA_LINE + "gj04\t5\t\tBad.\n", encoding="utf8")
    failed(cli("convert", "cola", bad, tmp_path / "out.spacy"), f"[SLA-E011] {bad}:2: found the label '5'")


def write_cola(data_dir: Path, train: str) -> Path:
    (data_dir / "cola").mkdir(parents=True, exist_ok=True)
    (data_dir / TASKS["cola"].train_file).write_text(train, encoding="utf8")
    (data_dir / TASKS["cola"].dev_file).write_text(COLA_LINE, encoding="utf8")
    return data_dir


def test_prepare_fails_in_one_line(tmp_path: Path) -> None:
    data_dir = write_cola(tmp_path / "data", COLA_LINE + "gj04\t1\tTruncated.\n")
    train_file = data_dir / TASKS["cola"].train_file
    failed(cli("prepare", "cola", data_dir, tmp_path / "corpus"), f"[SLA-E011] {train_file}:2: found 3 tab-separated column(s)")
    failed(cli("prepare", "cola", data_dir, tmp_path / "corpus", "--dev-limit", "-1"), "--dev-limit takes a whole number >= 0")
    train_file.unlink()
    failed(cli("prepare", "cola", data_dir, tmp_path / "corpus"), "Could not prepare the cola corpus",
           "No such file or directory", str(train_file))


def test_experiment_fails_in_one_line_before_training(tmp_path: Path) -> None:
    data_dir = write_cola(tmp_path / "data", "gj04\tx\t\tBad label.\n")
    train_file = data_dir / TASKS["cola"].train_file
    options = ["--data-dir", data_dir, "--root", tmp_path, "--variants", "", "--transformer", "unused"]
    failed(cli("experiment", "cola", *options), f"[SLA-E011] {train_file}:1: found the label 'x'")
    failed(cli("experiment", "cola", *options, "--train-limit", "-3"), "--train-limit takes a whole number >= 0")
    shutil.rmtree(data_dir)
    failed(cli("experiment", "cola", *options), "Could not prepare the cola corpus", "No such file or directory")


# annotate
