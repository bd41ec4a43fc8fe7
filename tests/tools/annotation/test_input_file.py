"""The input of `spacy sla annotate`: a line that Python's JSON reader
cannot hold is a bad line like any other, and an input record with a field
the annotation writes is refused before anything is written, so that no
field of the input is lost."""
import json
from pathlib import Path
from typing import List

import pytest
import spacy
from spacy.tokens import DocBin

from spacy_sla.tools.annotation import AnnotateSettings, AnnotationError, annotate, plan_shards, read_lines

DEEP = b'{"text": "Deep.", "nested": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
LONG_NUMBER = b'{"text": "Long.", "number": ' + b"9" * 5000 + b"}"


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory) -> Path:
    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler").add_patterns([{"label": "GPE", "pattern": "Paris"}])
    path = tmp_path_factory.mktemp("rules") / "pipeline"
    nlp.to_disk(path)
    return path


def settings(pipeline: Path, input_path: Path, output_dir: Path, **options) -> AnnotateSettings:
    return AnnotateSettings(pipeline=str(pipeline), input_path=str(input_path), output_dir=str(output_dir), **options)


def write_lines(path: Path, lines: List[bytes]) -> Path:
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_json_that_python_cannot_read_is_a_bad_line(tmp_path):
    path = write_lines(tmp_path / "input.jsonl", [b'{"text": "Fine."}', DEEP, LONG_NUMBER, b'{"text": "Also fine."}'])
    options = settings("p", path, tmp_path / "out")
    (shard,) = plan_shards(options)
    items, bad = read_lines(options, shard)
    assert [number for number, _, _ in items] == [1, 4]
    assert [line.line for line in bad] == [2, 3]
    assert bad[0].reason == "JSON that cannot be read (nested deeper than Python's recursion limit)"
    assert bad[1].reason.startswith("JSON that cannot be read (Exceeds the limit (4300 digits) for integer string")


def test_annotate_skips_json_that_python_cannot_read_and_stops_on_it_with_e096(pipeline, tmp_path):
    path = write_lines(tmp_path / "input.jsonl", [b'{"text": "In Paris."}', DEEP, LONG_NUMBER, b'{"text": "Hi."}'])
    with pytest.raises(AnnotationError, match=rf"\[SLA-E096\] {path}:2: JSON that cannot be read \(nested deeper"):
        annotate(settings(pipeline, path, tmp_path / "stopped", output_format="jsonl"), report=lambda _: None)
    output = tmp_path / "out"
    summary = annotate(settings(pipeline, path, output, output_format="jsonl", on_error="skip", shard_size=2,
                                fields=("entities",)), report=lambda _: None)
    assert (summary.n_docs, [line.line for line in summary.bad_lines]) == (2, [2, 3])
    records = [json.loads(line) for shard in sorted(output.glob("shard-*.jsonl"))
               for line in shard.read_text(encoding="utf8").splitlines()]
    assert [record["text"] for record in records] == ["In Paris.", "Hi."]
    assert records[0]["entities"] == [{"start": 3, "end": 8, "label": "GPE", "text": "Paris"}]


@pytest.mark.parametrize("fields,key", [(("entities",), "entities"), (("tags",), "tokens"), (("deps",), "heads"),
                                        (("cats", "pos"), "cats")])
def test_an_input_field_the_jsonl_output_writes_is_refused_before_anything_is_written(pipeline, tmp_path, fields,
                                                                                      key):
    lines = [json.dumps({"text": "One.", "id": 1}).encode(), json.dumps({"text": "Two.", key: ["theirs"]}).encode()]
    path = write_lines(tmp_path / "input.jsonl", lines)
    output = tmp_path / "out"
    with pytest.raises(AnnotationError) as refused:
        annotate(settings(pipeline, path, output, output_format="jsonl", fields=fields), report=lambda _: None)
    assert str(refused.value).startswith(f'[SLA-E136] {path}:2: the record has the field "{key}", which the '
                                         f"annotation writes into every JSONL record for --fields {','.join(fields)}")
    assert not output.exists()


def test_a_written_key_spelled_with_escapes_is_found(tmp_path):
    path = write_lines(tmp_path / "input.jsonl", [b'{"text": "One."}', b'{"text": "Two.", "\\u0074okens": [1]}'])
    with pytest.raises(AnnotationError, match=rf'\[SLA-E136\] {path}:2: the record has the field "tokens"'):
        plan_shards(settings("p", path, tmp_path / "out", output_format="jsonl", fields=("pos",)))


def test_the_input_fields_no_field_writes_are_kept_as_they_are(pipeline, tmp_path):
    """Fields with the names of annotations not asked for stay in the JSONL
    records; a .spacy shard keeps every input field apart."""
    record = {"text": "In Paris.", "tokens": ["their", "tokens"], "heads": [0, 0], "cats": {"A": 1}, "tags": "x"}
    path = write_lines(tmp_path / "input.jsonl", [json.dumps(record).encode(), b'{"text": "\\"entities\\" here."}'])
    annotate(settings(pipeline, path, tmp_path / "jsonl", output_format="jsonl", fields=("entities",)),
             report=lambda _: None)
    first, second = [json.loads(line) for line in (tmp_path / "jsonl" / "shard-00000.jsonl").read_text().splitlines()]
    assert first == {**record, "entities": [{"start": 3, "end": 8, "label": "GPE", "text": "Paris"}]}
    assert second == {"text": '"entities" here.', "entities": []}
    annotate(settings(pipeline, path, tmp_path / "spacy", fields=("entities", "tags", "deps", "cats")),
             report=lambda _: None)
    docs = list(DocBin().from_disk(tmp_path / "spacy" / "shard-00000.spacy").get_docs(spacy.blank("en").vocab))
    kept = json.loads(json.dumps(docs[0].user_data["input_fields"]))  # msgpack gives lists back as tuples
    assert kept == {key: value for key, value in record.items() if key != "text"}
