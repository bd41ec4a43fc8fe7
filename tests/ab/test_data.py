"""The nested training samples of `spacy sla ab --train-sizes`: drawn once
with the sample seed, each the start of the next, and recorded."""
import json
from pathlib import Path

import numpy
import pytest
from spacy.tokens import DocBin

from spacy_sla.ab.data import draw_training_samples, read_docbin_corpus
from spacy_sla.ab.plan import parse_sizes

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
