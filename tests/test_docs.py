"""docs/reference.md lists every coded error and warning of the wheel, and
no other; replication/README.md lists the replication's; the documents
list the encoder families; docs/your-pipeline.md's JSONL example writes
.spacy files that `spacy sla ab` accepts."""
import re

import pytest
import srsly
from codes import REPLICATION_ERROR_MODULE, ROOT, WHEEL_ERROR_MODULES, coded
from spacy.tokens import DocBin
from spacy.vocab import Vocab


def listed(path, prefix):
    return set(re.findall(rf"\[{prefix}-([EW]\d{{3}})\]", path.read_text(encoding="utf8")))


def test_every_code_of_the_wheel_is_in_the_reference_and_no_other():
    defined = {code for _, code in coded(WHEEL_ERROR_MODULES)}
    assert {"E001", "W001", "E030", "E076"} <= defined
    assert sorted(listed(ROOT / "docs" / "reference.md", "SLA")) == sorted(defined)


def test_every_code_of_the_replication_is_in_its_readme_and_no_other():
    defined = {code for _, code in coded([REPLICATION_ERROR_MODULE])}
    assert {"E015", "E020", "E070"} <= defined
    assert sorted(listed(ROOT / "replication" / "README.md", "SLA-REPLICATION")) == sorted(defined)


def listed_families(path, start: str) -> set:
    """The `names` of the sentence of a document that begins with start."""
    text = path.read_text(encoding="utf8")
    assert start in text, f"{path.name} no longer lists the encoder families after {start!r}"
    sentence = text[text.index(start):]
    sentence = sentence[: re.search(r"\.(\s|$)", sentence).end()]
    return set(re.findall(r"`([\w-]+)`", sentence))


def test_the_docs_list_the_encoder_families_the_code_wraps():
    from spacy_sla.layers import ATTENTION_FAMILIES

    for path, start in [(ROOT / "README.md", "Supported encoders"),
                        (ROOT / "CHANGELOG.md", "Encoders of the model types"),
                        (ROOT / "docs" / "reference.md", "Supported model types")]:
        assert listed_families(path, start) == set(ATTENTION_FAMILIES), path.name


def python_block(path, containing: str) -> str:
    """The ```python block of a document that contains the text."""
    blocks = re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf8"), flags=re.S)
    (block,) = [block for block in blocks if containing in block]
    return block


PRODIGY_TASKS = [
    {"text": "The match ended in a draw.", "accept": ["SPORTS"], "answer": "accept"},
    {"text": "Parliament passed the bill on tech.", "accept": ["POLITICS", "TECH"], "answer": "accept"},
    {"text": "Not sure about this one.", "accept": ["TECH"], "answer": "reject"},
    {"text": "Anna Smith met Google in Berlin.", "answer": "accept",
     "spans": [{"start": 0, "end": 10, "label": "PERSON"}, {"start": 15, "end": 21, "label": "ORG"},
               {"start": 25, "end": 31, "label": "GPE"}]},
]


def test_the_jsonl_example_writes_spacy_files_that_ab_accepts(tmp_path, monkeypatch):
    from spacy_sla.tools.ab.data import check_dev_annotation, corpus_documents

    for name in ("train.jsonl", "dev.jsonl"):
        srsly.write_jsonl(tmp_path / name, PRODIGY_TASKS)
    monkeypatch.chdir(tmp_path)
    exec(compile(python_block(ROOT / "docs" / "your-pipeline.md", "DocBin"), "your-pipeline.md", "exec"), {})
    docs = list(DocBin().from_disk(tmp_path / "dev.spacy").get_docs(Vocab()))
    assert [doc.text for doc in docs] == [task["text"] for task in PRODIGY_TASKS if task["answer"] == "accept"]
    assert docs[0].cats == {"SPORTS": 1.0, "POLITICS": 0.0, "TECH": 0.0}
    assert docs[1].cats == {"SPORTS": 0.0, "POLITICS": 1.0, "TECH": 1.0} and docs[2].cats == {}
    expected = [("Anna Smith", "PERSON"), ("Google", "ORG"), ("Berlin", "GPE")]
    assert [(span.text, span.label_) for span in docs[2].ents] == expected
    assert [(span.text, span.label_) for span in docs[2].spans["sc"]] == expected
    assert corpus_documents(tmp_path / "train.spacy", "train") == 3
    for key in ("cats_macro_auc", "ents_f", "spans_sc_f"):
        check_dev_annotation(tmp_path / "dev.spacy", {"training": {"score_weights": {key: 1.0}}})
    with pytest.raises(ValueError, match=r"\[SLA-E062\].*not a .spacy file but JSON lines.*docs/your-pipeline.md"):
        corpus_documents(tmp_path / "dev.jsonl", "dev")
