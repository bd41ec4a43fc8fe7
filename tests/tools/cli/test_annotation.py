"""`spacy sla annotate` refuses a pipeline it cannot load in one line,
before the output directory is made, on Ray too."""
from pathlib import Path

from .commands import cli, failed
from util import sla_nlp


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


def test_annotate_maps_any_load_failure_to_its_load_error(tiny_bert: Path, tmp_path: Path) -> None:
    """A damaged component file whose reader raises neither OSError nor
    ValueError (a TypeError here) is [SLA-E083], before any output."""
    texts = tmp_path / "texts.jsonl"
    texts.write_text('{"text": "The cat sat."}\n', encoding="utf8")
    pipeline, output_dir = tmp_path / "pipeline", tmp_path / "annotated"
    sla_nlp(tiny_bert).to_disk(pipeline)
    (pipeline / "sla_transformer" / "cfg").write_text("[1, 2]", encoding="utf8")
    failed(cli("annotate", pipeline, texts, output_dir), f"[SLA-E083] Could not load the pipeline {pipeline}: ",
           "dictionary update sequence")
    assert not list(output_dir.glob("shard-*"))
