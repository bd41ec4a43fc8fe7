"""CoNLL-U as Docs: gold heads, labels, tags and lemmas read by spaCy's own
converter, and every malformed line refused with its file and line number."""
from pathlib import Path

import pytest
import spacy

from spacy_sla.tools.support.conllu import ConversionError, numbered_lines, read_conllu

SENTENCE = (
    "# text = She ran.\n"
    "1\tShe\tshe\tPRON\tPRP\t_\t2\tnsubj\t_\t_\n"
    "2\tran\trun\tVERB\tVBD\t_\t0\troot\t_\tSpaceAfter=No\n"
    "3\t.\t.\tPUNCT\t.\t_\t2\tpunct\t_\tSpaceAfter=No\n"
)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf8")
    return path


def test_a_sentence_becomes_a_doc_with_its_gold_tree(tmp_path):
    nlp = spacy.blank("en")
    (doc,) = read_conllu(write(tmp_path / "a.conllu", SENTENCE + "\n"), nlp)
    assert doc.vocab is nlp.vocab and doc.text == "She ran."
    assert [token.head.i for token in doc] == [1, 1, 1]
    assert [token.dep_ for token in doc] == ["nsubj", "ROOT", "punct"]
    assert [(token.pos_, token.tag_, token.lemma_) for token in doc] == [
        ("PRON", "PRP", "she"), ("VERB", "VBD", "run"), ("PUNCT", ".", ".")]


def test_a_head_outside_the_sentence_names_its_line(tmp_path):
    broken = SENTENCE.replace("3\t.\t.\tPUNCT\t.\t_\t2", "3\t.\t.\tPUNCT\t.\t_\t9")
    with pytest.raises(ConversionError, match=r"\[SLA-E011\] .*b\.conllu:4: "):
        list(read_conllu(write(tmp_path / "b.conllu", broken), spacy.blank("en")))


def test_lines_are_numbered_from_one_without_their_endings_and_the_bom(tmp_path):
    path = tmp_path / "c.txt"
    path.write_bytes("\ufeffone\r\ntwo\n".encode("utf8"))
    assert list(numbered_lines(path)) == [(1, "one"), (2, "two")]
    path.write_bytes(b"ok\n\xff\n")
    with pytest.raises(ConversionError, match=r"c\.txt:2: invalid UTF-8"):
        list(numbered_lines(path))
