"""Converters from the original task files to spaCy Docs and `.spacy`
DocBin files.

Every reader checks each line it reads and raises ConversionError, naming the
file and the 1-based line number, for any line that does not fit the format.
No line is ever skipped silently: a dropped or misread example would change a
task's numbers without anyone noticing, so a bad or truncated file must
stop the conversion where a person can find and fix the line.

The readers are generators. They validate lazily, as the Docs are consumed,
except `read_conllu`, which validates the whole file first because spaCy's
CoNLL-U converter looks at the whole file before it yields the first Doc.
"""
import os
import re
from pathlib import Path
from typing import Callable, Collection, Dict, Iterator, List, Optional, Sequence, Tuple

import spacy
from spacy.language import Language
from spacy.tokens import Doc, DocBin, Span

from spacy_sla.tools.support.conllu import (
    ConversionError,
    Line,
    line_blocks,
    line_columns,
    line_error,
    no_data_error,
    numbered_lines,
    read_conllu,
)
from spacy_sla.tools.support.files import write_atomically

from .errors import Errors

TASKS = ("cola", "sst2", "conll2003", "fce", "conllu", "conll2003-docs")
# Raise this whenever a reader's output for the same input changes, so that
# corpora prepared by an earlier version are prepared again (see
# replication.experiments.prepare_corpus).
CONVERTER_VERSION = 1

Reader = Callable[[Path, Language], Iterator[Doc]]

_COLA_COLUMNS = ("source", "label", "original mark", "sentence")
_SST2_COLUMNS = ("sentence", "label")
_SST2_HEADER = "sentence\tlabel"
_CONLL2003_COLUMNS = ("word", "POS", "chunk", "NER")
_CONLL2003_DOCSTART = "-DOCSTART-"
_FCE_COLUMNS = ("token", "label")
_FCE_LABELS = ("c", "i")
_BINARY_LABELS = ("0", "1")
# An IOB1 NER tag: O, or B-/I- followed by an entity type.
_IOB1_TAG = re.compile(r"O|[BI]-\S+")


def _check_label(path: Path, line_number: int, label: str, allowed: Sequence[str]) -> None:
    if label not in allowed:
        raise line_error(path, line_number, f"found the label {label!r}; expected one of: {', '.join(allowed)}")


def _tsv_rows(
    path: Path, names: Sequence[str], what: str, header: Optional[str] = None, blank_ok: Collection[str] = ()
) -> Iterator[Tuple[int, List[str]]]:
    """Yield (line number, columns) for each data line of a one-example-per-line
    TSV file, after checking the header if the format has one. A blank line is
    an error too: it is no example, and in these formats it only appears in a
    damaged file."""
    line_number = 0
    n_rows = 0
    for line_number, line in numbered_lines(path):
        if header is not None and line_number == 1:
            if line != header:
                raise line_error(path, 1, f"found the header {line[:80]!r}; expected {header!r}")
            continue
        yield line_number, line_columns(path, line_number, line, "\t", names, blank_ok)
        n_rows += 1
    if n_rows == 0:
        raise no_data_error(path, line_number, what)


def _cats_doc(nlp: Language, sentence: str, label: str, positive: str, negative: str) -> Doc:
    doc = nlp.make_doc(sentence.strip())
    doc.cats = {positive: float(label == "1"), negative: float(label == "0")}
    return doc


def read_cola(path: Path, nlp: Language) -> Iterator[Doc]:
    """CoLA: `source<TAB>label<TAB>original mark<TAB>sentence`, no header,
    label 1 = acceptable. The original mark ("", "*", "?", ...) may be blank.
    The sentence is stripped of surrounding whitespace."""
    rows = _tsv_rows(path, _COLA_COLUMNS, "CoLA lines", blank_ok=("original mark",))
    for line_number, (_source, label, _mark, sentence) in rows:
        _check_label(path, line_number, label, _BINARY_LABELS)
        yield _cats_doc(nlp, sentence, label, "ACCEPTABLE", "UNACCEPTABLE")


def read_sst2(path: Path, nlp: Language) -> Iterator[Doc]:
    """GLUE SST-2: the header `sentence<TAB>label`, then one
    `sentence<TAB>label` line per example, label 1 = positive. The sentence is
    stripped of the space that GLUE leaves before the tab."""
    rows = _tsv_rows(path, _SST2_COLUMNS, "SST-2 lines after the header", header=_SST2_HEADER)
    for line_number, (sentence, label) in rows:
        _check_label(path, line_number, label, _BINARY_LABELS)
        yield _cats_doc(nlp, sentence, label, "POSITIVE", "NEGATIVE")


def _is_docstart(line: str) -> bool:
    return line.split(" ", 1)[0] == _CONLL2003_DOCSTART


def _iob1_spans(doc: Doc, tags: Sequence[str], offset: int = 0) -> List[Span]:
    """Entity spans from the IOB1 tags of one sentence, which starts at token
    `offset` of doc, read exactly as conlleval reads chunks: a B-X always
    starts a new chunk, an I-X continues a chunk of type X and otherwise
    (after O or after another type) starts one. Read per sentence, as
    conlleval does, so that an entity never runs into the next sentence."""
    spans = []
    start: Optional[int] = None
    label = ""
    for i, tag in enumerate([*tags, "O"]):
        prefix, _, entity_type = tag.partition("-")
        if start is not None and (prefix != "I" or entity_type != label):
            spans.append(Span(doc, offset + start, offset + i, label=label))
            start = None
        if prefix == "B" or (prefix == "I" and start is None):
            start, label = i, entity_type
    return spans


ConllSentence = Tuple[List[str], List[str], List[str]]  # words, POS tags, IOB1 NER tags


def _conll2003_sentence(path: Path, block: List[Line]) -> ConllSentence:
    """The checked columns of one sentence's `word POS chunk NER` lines."""
    words, pos_tags, ner_tags = [], [], []
    for line_number, line in block:
        word, pos, _chunk, ner = line_columns(path, line_number, line, " ", _CONLL2003_COLUMNS)
        if not _IOB1_TAG.fullmatch(ner):
            raise line_error(
                path, line_number, f"found the NER tag {ner!r}; expected O, or B- or I- followed by an entity type"
            )
        words.append(word)
        pos_tags.append(pos)
        ner_tags.append(ner)
    return words, pos_tags, ner_tags


def read_conll2003(path: Path, nlp: Language) -> Iterator[Doc]:
    """CoNLL-2003 NER: `word POS chunk NER` lines with IOB1 NER tags, a blank
    line between sentences and `-DOCSTART-` lines between documents. Yields
    one Doc per sentence with the POS column as `token.tag_` and the entities
    as `doc.ents` (all other tokens are marked as outside an entity)."""
    for block in line_blocks(path, "sentences of 'word POS chunk NER' lines", _is_docstart):
        words, pos_tags, ner_tags = _conll2003_sentence(path, block)
        doc = Doc(nlp.vocab, words=words, tags=pos_tags)
        doc.ents = _iob1_spans(doc, ner_tags)
        yield doc


def _conll2003_articles(path: Path) -> Iterator[List[List[Line]]]:
    """The sentences (blocks of lines) of each `-DOCSTART-` unit. Sentences
    before the first `-DOCSTART-` line form a unit of their own; a
    `-DOCSTART-` line with no sentence before the next one gives none."""
    line_number = 0
    article: List[List[Line]] = []
    block: List[Line] = []
    n_sentences = 0
    for line_number, line in numbered_lines(path):
        if line.strip() and not _is_docstart(line):
            block.append((line_number, line))
            continue
        if block:
            article.append(block)
            n_sentences += 1
            block = []
        if _is_docstart(line) and article:
            yield article
            article = []
    if block:
        article.append(block)
        n_sentences += 1
    if article:
        yield article
    if n_sentences == 0:
        raise no_data_error(path, line_number, "sentences of 'word POS chunk NER' lines")


def read_conll2003_docs(path: Path, nlp: Language) -> Iterator[Doc]:
    """CoNLL-2003 NER as whole articles: the same lines as read_conll2003,
    but one Doc per `-DOCSTART-` unit, with the file's sentence boundaries as
    `token.is_sent_start` (True at each sentence's first token, False at
    every other token), the POS column as `token.tag_` and the entities as
    `doc.ents`, read per sentence as conlleval reads them."""
    for article in _conll2003_articles(path):
        sentences = [_conll2003_sentence(path, block) for block in article]
        words = [word for sentence_words, _, _ in sentences for word in sentence_words]
        sent_starts = [i == 0 for sentence_words, _, _ in sentences for i in range(len(sentence_words))]
        doc = Doc(
            nlp.vocab,
            words=words,
            tags=[tag for _, pos_tags, _ in sentences for tag in pos_tags],
            sent_starts=sent_starts,
        )
        entities: List[Span] = []
        offset = 0
        for sentence_words, _, ner_tags in sentences:
            entities.extend(_iob1_spans(doc, ner_tags, offset))
            offset += len(sentence_words)
        doc.ents = entities
        yield doc


def read_fce(path: Path, nlp: Language) -> Iterator[Doc]:
    """FCE grammatical error detection: `token<TAB>c|i` lines (correct or
    incorrect), a blank line between sentences. Yields one Doc per sentence
    with the label as `token.tag_`."""
    for block in line_blocks(path, "sentences of 'token<TAB>c|i' lines"):
        words, labels = [], []
        for line_number, line in block:
            token, label = line_columns(path, line_number, line, "\t", _FCE_COLUMNS)
            _check_label(path, line_number, label, _FCE_LABELS)
            words.append(token)
            labels.append(label)
        yield Doc(nlp.vocab, words=words, tags=labels)


READERS: Dict[str, Reader] = {
    "cola": read_cola,
    "sst2": read_sst2,
    "conll2003": read_conll2003,
    "fce": read_fce,
    "conllu": read_conllu,
    "conll2003-docs": read_conll2003_docs,
}


def is_same_file(path: Path, other: Path) -> bool:
    """Whether two paths name one file: the same path once symlinks are
    resolved, or (hard links) the same file on disk."""
    if path.resolve() == other.resolve():
        return True
    try:
        return os.path.samefile(path, other)
    except OSError:  # one of them does not exist (yet)
        return False


def convert(
    task: str,
    input_path: Path,
    output_path: Path,
    *,
    offset: int = 0,
    limit: Optional[int] = None,
    lang: str = "en",
) -> int:
    """Convert a `task` file to a `.spacy` DocBin, keeping the Docs
    `offset` to `offset + limit` in file order (all from `offset` when `limit`
    is None), e.g. to carve a dev set out of a training file. Returns the
    number of Docs written.

    The whole input file is read and checked even when `limit` stops the
    selection early, so that a file converted in parts fails the same way as
    when converted whole.
    """
    if task not in READERS:
        raise ValueError(f"Unknown task {task!r}; expected one of: {', '.join(TASKS)}.")
    if offset < 0 or (limit is not None and limit < 0):
        raise ValueError(f"offset ({offset}) and limit ({limit}) must be >= 0 (limit may be None for all Docs).")
    if is_same_file(Path(input_path), Path(output_path)):
        raise ConversionError(Errors.E075.format(input_path=input_path, output_path=output_path))
    nlp = spacy.blank(lang)
    end = None if limit is None else offset + limit
    doc_bin = DocBin()
    for index, doc in enumerate(READERS[task](Path(input_path), nlp)):
        if index >= offset and (end is None or index < end):
            doc_bin.add(doc)
    write_atomically(Path(output_path), doc_bin.to_bytes())
    return len(doc_bin)
