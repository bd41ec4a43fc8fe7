"""Tests for replication.converters on small hand-made files: the Docs must carry
exactly the annotation of the input, and every bad line must raise an error
that names the file and the line."""
import re
from pathlib import Path
from typing import List, Tuple

import pytest
import spacy
from spacy.language import Language
from spacy.tokens import Doc, DocBin

from replication.converters import (
    READERS,
    TASKS,
    convert,
    read_cola,
    read_conll2003,
    read_conll2003_docs,
    read_fce,
    read_sst2,
)
from spacy_sla.tools.support.conllu import ConversionError, read_conllu

COLA = "gj04\t1\t\tOur friends won't buy this.\nbc01\t0\t*\tThe more does Bill.\nbc01\t1\t\tHe left.\n"
# The real SST-2 file has a space before each tab.
SST2 = "sentence\tlabel\nhide new secretions \t0\na gorgeous film \t1\n"
# IOB1 edge cases in the second sentence: an I- tag opening the sentence, a
# B- tag between two LOC chunks, I-PER right after I-LOC, I-PER after O and a
# B-PER right after a PER chunk. A -DOCSTART- line without blank lines around
# it, repeated blank lines, and a last sentence without a final blank line.
CONLL2003 = (
    "-DOCSTART- -X- O O\n"
    "\n"
    "EU NNP I-NP I-ORG\n"
    "rejects VBZ I-VP O\n"
    "German JJ I-NP I-MISC\n"
    "\n"
    "\n"
    "Paris NNP I-NP I-LOC\n"
    "Lyon NNP I-NP B-LOC\n"
    "Nord NNP I-NP I-LOC\n"
    "Smith NNP I-NP I-PER\n"
    "and CC O O\n"
    "Jones NNP I-NP I-PER\n"
    "Brown NNP I-NP B-PER\n"
    "-DOCSTART- -X- O O\n"
    "Peter NNP I-NP I-PER\n"
    "Blackburn NNP I-NP I-PER"
)
FCE = "Dear\tc\nSir\tc\n\nI\tc\nam\tc\nwrite\ti\n\n\n"
# A multiword token ("don't" = do + n't, whose SpaceAfter is on the range
# line), an empty node (2.1, which spaCy skips) and comments before each
# sentence.
CONLLU = (
    "# sent_id = 1\n"
    "# text = I don't know.\n"
    "1\tI\tI\tPRON\tPRP\tCase=Nom|Number=Sing|Person=1|PronType=Prs\t4\tnsubj\t4:nsubj\t_\n"
    "2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n"
    "2\tdo\tdo\tAUX\tVBP\tMood=Ind|Tense=Pres|VerbForm=Fin\t4\taux\t4:aux\t_\n"
    "3\tn't\tnot\tPART\tRB\tPolarity=Neg\t4\tadvmod\t4:advmod\t_\n"
    "3.1\tknow\tknow\tVERB\tVB\t_\t_\t_\t4:conj\tCopyOf=4\n"
    "4\tknow\tknow\tVERB\tVB\tVerbForm=Inf\t0\troot\t0:root\tSpaceAfter=No\n"
    "5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t4:punct\t_\n"
    "\n"
    "# sent_id = 2\n"
    "1\tHi\thi\tINTJ\tUH\t_\t0\troot\t0:root\t_\n"
    "\n"
)
CONTENTS = {"cola": COLA, "sst2": SST2, "conll2003": CONLL2003, "fce": FCE, "conllu": CONLLU, "conll2003-docs": CONLL2003}
# Three articles: the second sentence of the first starts with I-PER right
# after a sentence that ends in I-PER (two entities, not one across the
# boundary); the second article is one sentence; the third opens with an
# entity and has a -DOCSTART- line followed by blank lines before it.
CONLL2003_ARTICLES = (
    "-DOCSTART- -X- O O\n"
    "\n"
    "Peter NNP I-NP I-PER\n"
    "met VBD I-VP O\n"
    "Blackburn NNP I-NP I-PER\n"
    "\n"
    "Smith NNP I-NP I-PER\n"
    "left VBD I-VP O\n"
    ". . O O\n"
    "\n"
    "-DOCSTART- -X- O O\n"
    "\n"
    "Rain NN I-NP O\n"
    "\n"
    "-DOCSTART- -X- O O\n"
    "\n"
    "\n"
    "New NNP I-NP I-LOC\n"
    "York NNP I-NP I-LOC\n"
    "won VBD I-VP O\n"
    "\n"
    "EU NNP I-NP I-ORG\n"
    "rejects VBZ I-VP O\n"
    "German JJ I-NP I-MISC\n"
    "call NN I-NP O\n"
)


@pytest.fixture(scope="module")
def nlp() -> Language:
    return spacy.blank("en")


def write(tmp_path: Path, text: str, name: str = "input.txt") -> Path:
    """Write the exact bytes of `text`, so that line endings and a missing
    final newline reach the reader unchanged."""
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def ents(doc: Doc) -> List[Tuple[int, int, str]]:
    return [(ent.start, ent.end, ent.label_) for ent in doc.ents]


def test_tasks_and_readers_agree() -> None:
    assert tuple(READERS) == TASKS


def test_read_cola(tmp_path: Path, nlp: Language) -> None:
    docs = list(read_cola(write(tmp_path, COLA.rstrip("\n")), nlp))  # no final newline, like the dev file
    assert [doc.text for doc in docs] == ["Our friends won't buy this.", "The more does Bill.", "He left."]
    assert [doc.cats for doc in docs] == [
        {"ACCEPTABLE": 1.0, "UNACCEPTABLE": 0.0},
        {"ACCEPTABLE": 0.0, "UNACCEPTABLE": 1.0},
        {"ACCEPTABLE": 1.0, "UNACCEPTABLE": 0.0},
    ]
    assert [token.text for token in docs[0]] == ["Our", "friends", "wo", "n't", "buy", "this", "."]
    assert all(doc.vocab is nlp.vocab for doc in docs)


def test_read_sst2(tmp_path: Path, nlp: Language) -> None:
    docs = list(read_sst2(write(tmp_path, SST2), nlp))
    assert [doc.text for doc in docs] == ["hide new secretions", "a gorgeous film"]
    assert [doc.cats for doc in docs] == [{"POSITIVE": 0.0, "NEGATIVE": 1.0}, {"POSITIVE": 1.0, "NEGATIVE": 0.0}]


def test_read_conll2003(tmp_path: Path, nlp: Language) -> None:
    docs = list(read_conll2003(write(tmp_path, CONLL2003), nlp))
    assert [[token.text for token in doc] for doc in docs] == [
        ["EU", "rejects", "German"],
        ["Paris", "Lyon", "Nord", "Smith", "and", "Jones", "Brown"],
        ["Peter", "Blackburn"],
    ]
    assert [token.tag_ for token in docs[0]] == ["NNP", "VBZ", "JJ"]
    assert [token.tag_ for token in docs[1]][4] == "CC"
    assert ents(docs[0]) == [(0, 1, "ORG"), (2, 3, "MISC")]
    assert ents(docs[1]) == [(0, 1, "LOC"), (1, 3, "LOC"), (3, 4, "PER"), (5, 6, "PER"), (6, 7, "PER")]
    assert ents(docs[2]) == [(0, 2, "PER")]
    # Tokens outside entities are annotated as O, not left missing.
    assert [token.ent_iob_ for token in docs[1]] == ["B", "B", "I", "B", "O", "B", "B"]


def test_read_conll2003_docs_one_doc_per_article(tmp_path: Path, nlp: Language) -> None:
    docs = list(read_conll2003_docs(write(tmp_path, CONLL2003_ARTICLES), nlp))
    assert len(docs) == CONLL2003_ARTICLES.count("-DOCSTART-") == 3
    assert [[token.text for token in doc] for doc in docs] == [
        ["Peter", "met", "Blackburn", "Smith", "left", "."],
        ["Rain"],
        ["New", "York", "won", "EU", "rejects", "German", "call"],
    ]
    # The file's sentence boundaries, set on every token (True or False, never unknown).
    assert [[sent.text for sent in doc.sents] for doc in docs] == [
        ["Peter met Blackburn", "Smith left ."],
        ["Rain"],
        ["New York won", "EU rejects German call"],
    ]
    assert [token.is_sent_start for token in docs[0]] == [True, False, False, True, False, False]
    # "Blackburn" ends one sentence and "Smith" starts the next, both I-PER:
    # two entities, as conlleval reads the per-sentence file.
    assert ents(docs[0]) == [(0, 1, "PER"), (2, 3, "PER"), (3, 4, "PER")]
    assert ents(docs[1]) == []
    assert ents(docs[2]) == [(0, 2, "LOC"), (3, 4, "ORG"), (5, 6, "MISC")]
    assert [token.tag_ for token in docs[2]] == ["NNP", "NNP", "VBD", "NNP", "VBZ", "JJ", "NN"]


def test_read_conll2003_docs_keeps_what_the_sentence_reader_reads(tmp_path: Path, nlp: Language) -> None:
    path = write(tmp_path, CONLL2003_ARTICLES)
    sentences = list(read_conll2003(path, nlp))
    from_articles = [sent.as_doc() for doc in read_conll2003_docs(path, nlp) for sent in doc.sents]
    assert [doc.text for doc in from_articles] == [doc.text for doc in sentences]
    assert [ents(doc) for doc in from_articles] == [ents(doc) for doc in sentences]
    assert [[token.ent_iob_ for token in doc] for doc in from_articles] == [[t.ent_iob_ for t in doc] for doc in sentences]


def test_read_conll2003_docs_sentences_before_the_first_docstart(tmp_path: Path, nlp: Language) -> None:
    text = "EU NNP I-NP I-ORG\n\nRain NN I-NP O\n-DOCSTART- -X- O O\n-DOCSTART- -X- O O\nPeter NNP I-NP I-PER"
    docs = list(read_conll2003_docs(write(tmp_path, text), nlp))
    assert [doc.text for doc in docs] == ["EU Rain ", "Peter "]
    assert [len(list(doc.sents)) for doc in docs] == [2, 1]


def test_read_conll2003_docs_round_trip_keeps_sentences(tmp_path: Path, nlp: Language) -> None:
    output_path = tmp_path / "docs.spacy"
    assert convert("conll2003-docs", write(tmp_path, CONLL2003_ARTICLES), output_path) == 3
    docs = list(DocBin().from_disk(output_path).get_docs(nlp.vocab))
    assert [[sent.start for sent in doc.sents] for doc in docs] == [[0, 3], [0], [0, 3]]
    assert ents(docs[0]) == [(0, 1, "PER"), (2, 3, "PER"), (3, 4, "PER")]


def test_read_fce(tmp_path: Path, nlp: Language) -> None:
    docs = list(read_fce(write(tmp_path, FCE), nlp))
    assert [[token.text for token in doc] for doc in docs] == [["Dear", "Sir"], ["I", "am", "write"]]
    assert [[token.tag_ for token in doc] for doc in docs] == [["c", "c"], ["c", "c", "i"]]


def test_read_fce_last_sentence_without_blank_line(tmp_path: Path, nlp: Language) -> None:
    docs = list(read_fce(write(tmp_path, "Dear\tc\n\nSir\ti"), nlp))
    assert [[(token.text, token.tag_) for token in doc] for doc in docs] == [[("Dear", "c")], [("Sir", "i")]]


def test_read_conllu(tmp_path: Path, nlp: Language) -> None:
    docs = list(read_conllu(write(tmp_path, CONLLU), nlp))
    assert len(docs) == 2
    doc = docs[0]
    assert doc.vocab is nlp.vocab
    assert [token.text for token in doc] == ["I", "do", "n't", "know", "."]
    assert doc.text == "I don't know. "
    assert [token.head.i for token in doc] == [3, 3, 3, 3, 3]
    assert [token.dep_ for token in doc] == ["nsubj", "aux", "advmod", "ROOT", "punct"]
    assert [token.pos_ for token in doc] == ["PRON", "AUX", "PART", "VERB", "PUNCT"]
    assert [token.tag_ for token in doc] == ["PRP", "VBP", "RB", "VB", "."]
    assert [token.lemma_ for token in doc] == ["I", "do", "not", "know", "."]
    assert str(doc[2].morph) == "Polarity=Neg"
    assert str(doc[4].morph) == ""
    assert [(token.text, token.dep_, token.head.i) for token in docs[1]] == [("Hi", "ROOT", 0)]


@pytest.mark.parametrize("task", TASKS)
def test_convert_round_trip(tmp_path: Path, nlp: Language, task: str) -> None:
    input_path = write(tmp_path, CONTENTS[task])
    output_path = tmp_path / "out" / "sub" / f"{task}.spacy"
    expected = list(READERS[task](input_path, nlp))
    assert convert(task, input_path, output_path) == len(expected)
    docs = list(DocBin().from_disk(output_path).get_docs(nlp.vocab))
    assert len(docs) == len(expected)
    for doc, want in zip(docs, expected):
        assert doc.text == want.text
        assert doc.cats == want.cats
        assert ents(doc) == ents(want)
        assert [token.tag_ for token in doc] == [token.tag_ for token in want]
        assert [token.ent_iob_ for token in doc] == [token.ent_iob_ for token in want]
        assert [(token.head.i, token.dep_, token.pos_, token.lemma_) for token in doc] == [
            (token.head.i, token.dep_, token.pos_, token.lemma_) for token in want
        ]
        assert [str(token.morph) for token in doc] == [str(token.morph) for token in want]


@pytest.mark.parametrize(
    "offset,limit,texts",
    [
        (0, None, ["Our friends won't buy this.", "The more does Bill.", "He left."]),
        (1, None, ["The more does Bill.", "He left."]),
        (1, 1, ["The more does Bill."]),
        (0, 2, ["Our friends won't buy this.", "The more does Bill."]),
        (2, 5, ["He left."]),
        (3, None, []),
        (0, 0, []),
    ],
)
def test_convert_offset_limit(
    tmp_path: Path, nlp: Language, offset: int, limit: int, texts: List[str]
) -> None:
    output_path = tmp_path / "cola.spacy"
    assert convert("cola", write(tmp_path, COLA), output_path, offset=offset, limit=limit) == len(texts)
    docs = list(DocBin().from_disk(output_path).get_docs(nlp.vocab))
    assert [doc.text for doc in docs] == texts
    assert [doc.cats["ACCEPTABLE"] for doc in docs] == [0.0 if text.startswith("The more") else 1.0 for text in texts]


def test_convert_checks_the_whole_file_despite_limit(tmp_path: Path) -> None:
    path = write(tmp_path, COLA + "bc01\t2\t\tBad label.\n")
    with pytest.raises(ConversionError, match=re.escape(f"{path}:4: ")):
        convert("cola", path, tmp_path / "out.spacy", limit=1)


def test_convert_unknown_task(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Unknown task 'ner'.*cola, sst2, conll2003, fce, conllu"):
        convert("ner", write(tmp_path, COLA), tmp_path / "out.spacy")


def test_convert_negative_offset(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="offset"):
        convert("cola", write(tmp_path, COLA), tmp_path / "out.spacy", offset=-1)


BAD_CONLLU_LINE = "1\tHi\thi\tINTJ\tUH\t_\t0\troot\t0:root\t_\n"


@pytest.mark.parametrize(
    "task,text,line_number,problem",
    [
        # Wrong number of columns, including truncated lines.
        ("cola", "gj04\t1\t\tFine.\ngj04\t1\tTruncated.\n", 2, "found 3 tab-separated column(s)"),
        ("cola", "gj04\t1\t\tFine.\n\ngj04\t1\t\tFine.\n", 2, "found 1 tab-separated column(s)"),
        ("sst2", "sentence\tlabel\nfine \t1\ntruncated\n", 3, "found 1 tab-separated column(s)"),
        ("conll2003", "EU NNP I-NP I-ORG\nrejects VBZ O\n", 2, "found 3 space-separated column(s)"),
        ("conll2003", "EU NNP  I-ORG\n", 1, "column 3 (chunk) is empty"),
        ("fce", "Dear\tc\nSir\n", 2, "found 1 tab-separated column(s)"),
        ("conllu", "# c\n1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\n", 2, "found 9 tab-separated column(s)"),
        # Labels outside the allowed set.
        ("cola", "gj04\t1\t\tFine.\ngj04\t2\t\tBad.\n", 2, "found the label '2'; expected one of: 0, 1"),
        ("sst2", "sentence\tlabel\nbad \tpositive\n", 2, "found the label 'positive'; expected one of: 0, 1"),
        ("fce", "Dear\tc\n\nSir\tx\n", 3, "found the label 'x'; expected one of: c, i"),
        ("conll2003", "EU NNP I-NP E-ORG\n", 1, "found the NER tag 'E-ORG'"),
        ("conll2003", "EU NNP I-NP B-\n", 1, "found the NER tag 'B-'"),
        ("conll2003", "EU NNP I-NP ORG\n", 1, "found the NER tag 'ORG'"),
        # Empty sentences.
        ("cola", "gj04\t1\t\tFine.\ngj04\t1\t\t  \n", 2, "column 4 (sentence) is empty"),
        ("sst2", "sentence\tlabel\n \t1\n", 2, "column 1 (sentence) is empty"),
        # SST-2 header.
        ("sst2", "fine \t1\n", 1, "found the header 'fine \\t1'; expected 'sentence\\tlabel'"),
        # Empty files and files without a single example.
        ("cola", "", 1, "the file is empty"),
        ("sst2", "", 1, "the file is empty"),
        ("conll2003", "", 1, "the file is empty"),
        ("fce", "", 1, "the file is empty"),
        ("conllu", "", 1, "the file is empty"),
        ("sst2", "sentence\tlabel\n", 1, "the file ends here without any SST-2 lines"),
        ("conll2003", "-DOCSTART- -X- O O\n\n", 2, "the file ends here without any sentences"),
        ("conll2003-docs", "-DOCSTART- -X- O O\n\n", 2, "the file ends here without any sentences"),
        ("conll2003-docs", "", 1, "the file is empty"),
        ("conll2003-docs", "-DOCSTART- -X- O O\n\nEU NNP I-NP I-ORG\n\nrejects VBZ O\n", 5, "found 3 space-separated column(s)"),
        ("fce", "\n\n\n", 3, "the file ends here without any sentences"),
        # CoNLL-U: bad IDs and heads, a sentence spaCy's converter rejects
        # (a UPOS outside UD's tag set), and comments without a sentence.
        ("conllu", BAD_CONLLU_LINE + "\n" + BAD_CONLLU_LINE.replace("1", "x", 1), 3, "found the ID 'x'"),
        ("conllu", BAD_CONLLU_LINE.replace("\t0\t", "\tone\t"), 1, "found the HEAD 'one'"),
        (
            "conllu",
            BAD_CONLLU_LINE + "\n# c\n" + BAD_CONLLU_LINE.replace("\t0\t", "\t7\t"),
            4,
            "found the HEAD 7, but the sentence has words 1 to 1",
        ),
        (
            "conllu",
            BAD_CONLLU_LINE + "\n# c\n" + BAD_CONLLU_LINE.replace("INTJ", "NOTAPOS"),
            4,
            "spaCy's CoNLL-U converter could not read the sentence that starts here: [E1021]",
        ),
        ("conllu", BAD_CONLLU_LINE + "\n# c\n# d\n", 4, "comment lines without token lines"),
    ],
)
def test_bad_input(
    tmp_path: Path, nlp: Language, task: str, text: str, line_number: int, problem: str
) -> None:
    path = write(tmp_path, text)
    expected = re.escape(f"[SLA-E011] {path}:{line_number}: {problem}")
    with pytest.raises(ConversionError, match=expected):
        list(READERS[task](path, nlp))


def test_invalid_utf8(tmp_path: Path, nlp: Language) -> None:
    path = tmp_path / "input.txt"
    path.write_bytes(b"Dear\tc\nS\xffr\tc\n")
    with pytest.raises(ConversionError, match=re.escape(f"[SLA-E011] {path}:2: invalid UTF-8")):
        list(read_fce(path, nlp))


def test_crlf_line_endings(tmp_path: Path, nlp: Language) -> None:
    docs = list(read_sst2(write(tmp_path, SST2.replace("\n", "\r\n")), nlp))
    assert [doc.cats["POSITIVE"] for doc in docs] == [0.0, 1.0]


def conllu_word(word_id: str, head: str, form: str = "w") -> str:
    """A CoNLL-U word line with the given ID and HEAD."""
    return f"{word_id}\t{form}\t{form}\tX\tX\t_\t{head}\tdep\t_\t_\n"


# Trees that spaCy's converter would accept and write: it reads a self-headed
# word as a root and keeps a cycle, so the Docs would carry a parse no parser
# produces (and the syntax masks would be built from it).
@pytest.mark.parametrize(
    "text,line_number,problem",
    [
        # Word 2 is its own HEAD.
        (conllu_word("1", "2") + conllu_word("2", "2"), 2, "word 2 is its own HEAD"),
        # 1 -> 2 -> 1 beside a proper root: the cycle never reaches 0.
        (
            "# sent_id = 1\n" + conllu_word("1", "2") + conllu_word("2", "1") + conllu_word("3", "0"),
            2,
            "the HEADs of words 1 -> 2 -> 1 form a cycle that never reaches the root (0)",
        ),
        # No root at all; word 1 hangs off the cycle 2 -> 3 -> 2, which is reported from its first word.
        (
            conllu_word("1", "2") + conllu_word("2", "3") + conllu_word("3", "2"),
            2,
            "the HEADs of words 2 -> 3 -> 2 form a cycle",
        ),
        # In a second sentence, after a multiword token range and with an
        # empty node (neither is part of the tree): line 17 is word 2.
        (
            CONLLU
            + "# sent_id = 3\n"
            + "1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n"
            + conllu_word("1", "0")
            + conllu_word("2", "3")
            + conllu_word("2.1", "_")
            + conllu_word("3", "2"),
            17,
            "the HEADs of words 2 -> 3 -> 2 form a cycle",
        ),
        # A HEAD that names no word of the sentence, reported at its own line.
        (conllu_word("1", "0") + conllu_word("2", "7"), 2, "found the HEAD 7, but the sentence has words 1 to 2"),
        # Word IDs out of order: spaCy numbers the words by position, so HEADs would point elsewhere.
        (conllu_word("1", "0") + conllu_word("3", "1"), 2, "found the word ID 3; expected 2"),
    ],
    ids=["self-headed", "cycle-beside-root", "no-root", "cycle-after-range", "head-out-of-range", "ids-out-of-order"],
)
def test_conllu_trees_must_reach_the_root(
    tmp_path: Path, nlp: Language, text: str, line_number: int, problem: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConversionError, match=re.escape(f"[SLA-E011] {path}:{line_number}: {problem}")):
        list(read_conllu(path, nlp))
    output_path = tmp_path / "out.spacy"
    with pytest.raises(ConversionError):
        convert("conllu", path, output_path)
    assert not output_path.exists()
