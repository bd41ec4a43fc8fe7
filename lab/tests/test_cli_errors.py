"""Bad paths given to `spacy sla link-model`, `convert`, `train`,
`experiment` and `annotate --ray` are refused with coded errors, before any
compute, and never delete or overwrite the user's files."""
import os
from pathlib import Path

import pytest
from spacy.cli._util import app
from typer.testing import CliRunner

import spacy_sla._ray
import spacy_sla.cli  # noqa: F401  (registers `sla` on spaCy's app)

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
    return runner.invoke(app, ["sla", "link-model", package, str(destination)])


def test_a_package_that_is_not_installed_is_named(tmp_path):
    text = refused(link("no_such_model_package", tmp_path / "minilm"), "E070")
    assert "'no_such_model_package'" in text and "pip install" in text
    assert not (tmp_path / "minilm").exists()


def test_a_package_without_get_model_path_is_named(packages, tmp_path):
    name = model_package(packages, "model_package_without_path", "VERSION = 1\n")
    assert "has no get_model_path()" in refused(link(name, tmp_path / "minilm"), "E071")
    broken = model_package(packages, "model_package_failing", "def get_model_path():\n    raise OSError('gone')\n")
    assert "get_model_path() failed (OSError: gone)" in refused(link(broken, tmp_path / "minilm"), "E071")
    assert not (tmp_path / "minilm").is_symlink()


def test_a_model_directory_without_a_config_is_named(packages, tmp_path):
    empty = tmp_path / "empty-model"
    empty.mkdir()
    name = package_for(packages, "model_package_without_config", empty)
    text = refused(link(name, tmp_path / "minilm"), "E072")
    assert f"{empty} is not a Hugging Face model directory" in text
    assert not (tmp_path / "minilm").is_symlink()


def test_a_file_a_directory_or_a_foreign_symlink_is_never_replaced(packages, tmp_path):
    name = package_for(packages, "model_package_kept", model_dir(tmp_path / "model"))
    file_destination = tmp_path / "a-file"
    file_destination.write_text("mine", encoding="utf8")
    assert "it exists and is a file" in refused(link(name, file_destination), "E073")
    assert file_destination.read_text(encoding="utf8") == "mine" and not file_destination.is_symlink()
    directory = tmp_path / "a-directory"
    (directory / "inside").mkdir(parents=True)
    assert "it exists and is a directory" in refused(link(name, directory), "E073")
    assert (directory / "inside").is_dir() and not directory.is_symlink()
    notes = tmp_path / "notes.txt"
    notes.write_text("notes", encoding="utf8")
    to_notes = tmp_path / "to-notes"
    to_notes.symlink_to(notes)
    assert "which is not a model directory" in refused(link(name, to_notes), "E073")
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
    assert "Cannot create the link" in refused(link(name, tmp_path / "training" / "minilm"), "E074")
    assert (tmp_path / "training").read_text(encoding="utf8") == "a file"


def convert(input_path: Path, output_path: Path):
    return runner.invoke(app, ["sla", "convert", "sst2", str(input_path), str(output_path)])


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
    assert "would overwrite the data it reads" in refused(convert(data, output), "E075")
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
    result = runner.invoke(app, ["sla", "train", "ud", str(corpus), str(tmp_path / "training"),
                                 "--transformer", str(not_a_model)])
    assert f"{not_a_model} is not a Hugging Face model directory" in refused(result, "E072")
    assert not (tmp_path / "training").exists()
    result = runner.invoke(app, ["sla", "experiment", "ud", "--data-dir", str(tmp_path / "data"),
                                 "--transformer", str(not_a_model), "--root", str(tmp_path / "project")])
    refused(result, "E072")
    assert not (tmp_path / "project").exists()


def no_ray():
    raise spacy_sla._ray.RayNotInstalled("Ray is not installed: `pip install \"spacy-sla[ray]\"`")


def test_ray_missing_is_said_before_anything_is_prepared(tiny_bert, tmp_path, monkeypatch):
    monkeypatch.setattr(spacy_sla._ray, "import_ray", no_ray)
    result = runner.invoke(app, ["sla", "experiment", "ud", "--data-dir", str(tmp_path / "data"),
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
