"""The data of `spacy sla ab`: the nested training samples of
--train-sizes (drawn once with the sample seed, each the start of the next,
and recorded), and the data refused before any training, with messages
about the data alone."""
import json
from pathlib import Path

import numpy
import pytest
from spacy.tokens import DocBin

from spacy_sla.tools.ab.data import check_dev_annotation, corpus_documents, draw_training_samples, read_docbin_corpus
from spacy_sla.tools.ab.plan import parse_sizes

from tools.cli.commands import cli, failed
from util import annotated_docs


def write_corpus(path: Path, docs) -> Path:
    DocBin(docs=docs, store_user_data=True).to_disk(path)
    return path


def test_training_samples_are_nested_and_recorded(tmp_path):
    docs = annotated_docs(30, 3)
    train = write_corpus(tmp_path / "train.spacy", docs)
    files = draw_training_samples(train, parse_sizes(["10", "all", "20"]), tmp_path / "data", sample_seed=4)
    small = [doc.text for doc in read_docbin_corpus(files[10])]
    large = [doc.text for doc in read_docbin_corpus(files[20])]
    assert len(small) == 10 and len(large) == 20 and large[:10] == small and files[None] == train
    order = numpy.random.default_rng(4).permutation(30)
    assert large == [docs[index].text for index in order[:20]]
    record = json.loads((tmp_path / "data" / "samples.json").read_text(encoding="utf8"))
    assert record["sample_seed"] == 4 and record["sizes"] == [10, 20] and record["documents"] == 30
    with pytest.raises(ValueError, match=r"\[SLA-E037\].*it has 30 documents"):
        draw_training_samples(train, [40], tmp_path / "data2", sample_seed=4)
    with pytest.raises(ValueError, match=r"\[SLA-E037\]"):
        parse_sizes(["ten"])


def test_a_dev_set_without_the_annotation_is_refused_without_speaking_of_runs_or_models(tmp_path):
    docs = annotated_docs(3, 1)
    for doc in docs:
        doc.ents = []
    dev = tmp_path / "dev.spacy"
    DocBin(docs=docs, attrs=["ORTH", "TAG"]).to_disk(dev)
    with pytest.raises(ValueError) as refused:
        check_dev_annotation(dev, {"training": {"score_weights": {"tag_acc": 0.5, "ents_f": 0.5}}})
    message = " ".join(str(refused.value).split())
    assert message.startswith(f"[SLA-E036] The dev set {dev} gives no value of the weighted score ents_f: no document "
                              "has entities.")
    assert "run" not in message.lower() and "model" not in message.lower()


def test_jsonl_data_is_refused_with_a_way_to_make_spacy_files(tmp_path):
    (tmp_path / "train.jsonl").write_text('{"text": "a", "accept": ["A"], "answer": "accept"}\n', encoding="utf8")
    with pytest.raises(ValueError) as refused:
        corpus_documents(tmp_path / "train.jsonl", "train")
    message = " ".join(str(refused.value).split())
    assert "[SLA-E062]" in message and "it is not a .spacy file but JSON lines (e.g. Prodigy's export)" in message
    assert "does not read JSONL" in message and "`prodigy data-to-spacy`" in message
    assert 'docs/your-pipeline.md ("Your data as .spacy")' in message


def test_ab_without_the_data_is_refused_with_a_code(tmp_path):
    configs = tmp_path / "configs"
    configs.mkdir()
    output = failed(cli("ab", configs, tmp_path / "out", "--paths.train", tmp_path / "train.spacy"), "[SLA-E155]")
    assert "give `--paths.dev PATH`" in output and "Nothing was trained" in output
    output = failed(cli("ab", configs, tmp_path / "out"), "[SLA-E155]")
    assert "give `--paths.train PATH` and `--paths.dev PATH`" in output
    assert not (tmp_path / "out").exists()
