"""AnnotateSettings.check refuses, before anything is written, what the
run could not use; resolved() and manifest() say what a resume compares."""
import json
from pathlib import Path

import pytest
import spacy

from spacy_sla.tools.annotation.settings import AnnotateSettings, AnnotationError, BadLine, check_pipeline


@pytest.fixture
def pipeline(tmp_path: Path) -> Path:
    path = tmp_path / "pipeline"
    spacy.blank("en").to_disk(path)
    return path


@pytest.fixture
def texts(tmp_path: Path) -> Path:
    path = tmp_path / "texts.txt"
    path.write_text("One line.\nAnother line.\n", encoding="utf8")
    return path


def settings(pipeline: Path, texts: Path, **changes) -> AnnotateSettings:
    return AnnotateSettings(pipeline=str(pipeline), input_path=str(texts), output_dir=str(texts.parent / "out"),
                            **changes)


def test_good_settings_pass_and_name_their_input_format(pipeline, texts, tmp_path):
    settings(pipeline, texts).check()
    assert settings(pipeline, texts).input_format == "text"
    assert settings(pipeline, tmp_path / "in.JSONL").input_format == "jsonl"
    assert settings(pipeline, tmp_path / "in.spacy").input_format == "spacy"
    check_pipeline("blank:de")


@pytest.mark.parametrize("changes,message", [
    ({"output_format": "csv"}, "Unknown output format 'csv': use spacy or jsonl."),
    ({"fields": ("entities", "lemmas")}, "Unknown field(s) lemmas: choose from entities, cats, tags, pos, deps, gates."),
    ({"on_error": "ignore"}, "Unknown on_error 'ignore': use stop or skip."),
    ({"batch_size": 0}, "The batch size and the shard size must be at least 1."),
    ({"shard_size": 0}, "The batch size and the shard size must be at least 1."),
])
def test_bad_options_are_refused_with_the_choices(pipeline, texts, changes, message):
    with pytest.raises(AnnotationError) as error:
        settings(pipeline, texts, **changes).check()
    assert str(error.value) == message


def test_paths_that_cannot_be_used_are_coded_errors(pipeline, texts, tmp_path):
    with pytest.raises(AnnotationError, match=r"\[SLA-E080\].*it is a directory"):
        settings(pipeline, tmp_path).check()
    with pytest.raises(AnnotationError, match=r"\[SLA-E080\].*--code file"):
        settings(pipeline, texts, code_path=str(tmp_path / "missing.py")).check()
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "config.cfg").write_text("", encoding="utf8")
    with pytest.raises(AnnotationError, match=r"\[SLA-E081\].*it has no meta.json"):
        settings(tmp_path / "half", texts).check()
    with pytest.raises(AnnotationError, match=r"\[SLA-E081\].*it has no directory \(it is a file\)"):
        settings(texts, texts).check()
    with pytest.raises(AnnotationError, match="no installed package of that name"):
        settings(Path("no_such_pipeline_anywhere"), texts).check()


def test_resolved_paths_are_absolute_and_a_package_name_stays_a_name(pipeline, texts, monkeypatch):
    monkeypatch.chdir(texts.parent)
    relative = AnnotateSettings(pipeline="pipeline", input_path="texts.txt", output_dir="out", fields=["cats"],
                                code_path="code.py").resolved()
    assert relative.pipeline == str(pipeline.resolve()) and relative.input_path == str(texts.resolve())
    assert relative.output_dir == str((texts.parent / "out").resolve()) and relative.fields == ("cats",)
    assert relative.code_path == str((texts.parent / "code.py").resolve())
    assert AnnotateSettings(pipeline="en_core_web_sm", input_path="texts.txt", output_dir="out").resolved().pipeline \
        == "en_core_web_sm"


def test_the_manifest_changes_with_what_decides_the_shards_only(pipeline, texts):
    base = settings(pipeline, texts)
    manifest = base.manifest(n_shards=2)
    assert manifest["n_shards"] == 2 and manifest["input_bytes"] == len("One line.\nAnother line.\n")
    assert settings(pipeline, texts, batch_size=7, on_error="skip").manifest(2) == manifest
    assert settings(pipeline, texts, shard_size=5).manifest(2) != manifest
    before = manifest["pipeline_fingerprint"]
    meta = json.loads((pipeline / "meta.json").read_text(encoding="utf8"))
    (pipeline / "meta.json").write_text(json.dumps({**meta, "version": "9.9.9"}), encoding="utf8")
    assert base.manifest(2)["pipeline_fingerprint"] != before
    assert str(BadLine("in.jsonl", 3, "not JSON")) == "in.jsonl:3: not JSON"


@pytest.mark.parametrize("where", ["the pipeline", "below it", "below a link to it"])
def test_an_output_directory_in_the_pipeline_is_refused(pipeline, texts, tmp_path, where):
    output_dir = {"the pipeline": pipeline, "below it": pipeline / "a" / "b",
                  "below a link to it": tmp_path / "link" / "out"}[where]
    (tmp_path / "link").symlink_to(pipeline)
    with pytest.raises(AnnotationError) as refused:
        AnnotateSettings(pipeline=str(pipeline), input_path=str(texts), output_dir=str(output_dir)).check()
    assert str(refused.value).startswith(f"[SLA-E137] The output directory {output_dir} is inside the pipeline's "
                                         f"directory {pipeline}")
    # beside it, or with a name that only starts like it: accepted
    for beside in (tmp_path / "out", tmp_path / "pipeline-annotated"):
        AnnotateSettings(pipeline=str(pipeline), input_path=str(texts), output_dir=str(beside)).check()


@pytest.mark.parametrize("fields,output_format,refused", [
    (("tags",), "jsonl", True), (("deps",), "jsonl", True), (("entities",), "jsonl", False),
    (("tags",), "spacy", False),
])
def test_a_text_key_that_a_field_writes_is_refused_for_jsonl_output(pipeline, texts, fields, output_format,
                                                                     refused):
    options = settings(pipeline, texts, fields=fields, output_format=output_format, text_key="tokens")
    if not refused:
        options.check()
        return
    with pytest.raises(AnnotationError) as error:
        options.check()
    assert str(error.value).startswith(f'[SLA-E136] --text-key names the field "tokens", which the annotation '
                                       f"writes into every JSONL record for --fields {fields[0]} (with {fields[0]})")
