"""`spacy sla annotate` refuses a pipeline it cannot load in one line,
before the output directory is made, on Ray too."""
from pathlib import Path

from .commands import cli, failed


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
