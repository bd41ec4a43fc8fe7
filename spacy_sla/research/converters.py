"""Converters from the original benchmark files to spaCy Docs and `.spacy`
DocBin files.

Every reader checks each line it reads and raises ConversionError, naming the
file and the 1-based line number, for any line that does not fit the format.
No line is ever skipped silently: a dropped or misread example would change a
benchmark's numbers without anyone noticing, so a bad or truncated file must
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
from spacy.training.converters import conllu_to_docs
from spacy.vocab import Vocab

from ..errors import Errors
from ..files import write_atomically

TASKS = ("cola", "sst2", "conll2003", "fce", "conllu", "conll2003-docs")
# Raise this whenever a reader's output for the same input changes, so that
# corpora prepared by an earlier version are prepared again (see
# spacy_sla.research.experiments.prepare_corpus).
CONVERTER_VERSION = 1

Reader = Callable[[Path, Language], Iterator[Doc]]
Line = Tuple[int, str]

_COLA_COLUMNS = ("source", "label", "original mark", "sentence")
_SST2_COLUMNS = ("sentence", "label")
_SST2_HEADER = "sentence\tlabel"
_CONLL2003_COLUMNS = ("word", "POS", "chunk", "NER")
_CONLL2003_DOCSTART = "-DOCSTART-"
_FCE_COLUMNS = ("token", "label")
_FCE_LABELS = ("c", "i")
_CONLLU_COLUMNS = ("ID", "FORM", "LEMMA", "UPOS", "XPOS", "FEATS", "HEAD", "DEPREL", "DEPS", "MISC")
_BINARY_LABELS = ("0", "1")
# An IOB1 NER tag: O, or B-/I- followed by an entity type.
_IOB1_TAG = re.compile(r"O|[BI]-\S+")
# A CoNLL-U ID: a word (1), a multiword token range (1-2) or an empty node (1.1).
_CONLLU_ID = re.compile(r"[0-9]+(?:-[0-9]+|\.[0-9]+)?")
_CONLLU_WORD_ID = re.compile(r"[0-9]+")
_CONLLU_HEAD = re.compile(r"[0-9]+|_")


class ConversionError(ValueError):
    """An input file does not fit its format: the message starts with
    "[E011] {path}:{line_number}: " so that editors and terminals can jump to
    the line; or the output path is the input file ([E075]). A ValueError,
    because it is a bad input value."""


def _error(path: Path, line_number: int, problem: str) -> ConversionError:
    return ConversionError(Errors.E011.format(path=path, line_number=line_number, problem=problem))


def _lines(path: Path) -> Iterator[Line]:
    """Yield (1-based line number, line without its line ending).

    The file is split on "\\n" only, not on a stray "\\r" or another Unicode
    line break inside a field (which would shift every later line number), and
    each line is decoded on its own so that invalid UTF-8 is reported with its
    line. A byte-order mark on the first line is dropped.
    """
    with Path(path).open("rb") as file:
        for line_number, raw in enumerate(file, start=1):
            try:
                text = raw.decode("utf-8-sig" if line_number == 1 else "utf-8")
            except UnicodeDecodeError as err:
                raise _error(
                    path, line_number, f"invalid UTF-8 ({err.reason} at byte {err.start}); expected a UTF-8 text file"
                ) from err
            yield line_number, text.rstrip("\r\n")


def _no_data(path: Path, last_line_number: int, what: str) -> ConversionError:
    """The error for a file without a single example, which would otherwise
    become an empty training or evaluation set."""
    if last_line_number == 0:
        return _error(path, 1, f"the file is empty; expected {what}")
    return _error(path, last_line_number, f"the file ends here without any {what}")


def _columns(
    path: Path,
    line_number: int,
    line: str,
    separator: str,
    names: Sequence[str],
    blank_ok: Collection[str] = (),
) -> List[str]:
    """Split a line into exactly `names` columns, each non-blank unless it is
    named in `blank_ok`: a missing or empty column means a truncated or
    shifted line."""
    fields = line.split(separator)
    if len(fields) != len(names):
        kind = "tab" if separator == "\t" else "space"
        raise _error(
            path,
            line_number,
            f"found {len(fields)} {kind}-separated column(s) in {line[:80]!r}; expected {len(names)}: "
            + ", ".join(names),
        )
    for number, (name, field) in enumerate(zip(names, fields), start=1):
        if name not in blank_ok and not field.strip():
            raise _error(path, line_number, f"column {number} ({name}) is empty in {line[:80]!r}")
    return fields


def _check_label(path: Path, line_number: int, label: str, allowed: Sequence[str]) -> None:
    if label not in allowed:
        raise _error(path, line_number, f"found the label {label!r}; expected one of: {', '.join(allowed)}")


def _tsv_rows(
    path: Path, names: Sequence[str], what: str, header: Optional[str] = None, blank_ok: Collection[str] = ()
) -> Iterator[Tuple[int, List[str]]]:
    """Yield (line number, columns) for each data line of a one-example-per-line
    TSV file, after checking the header if the format has one. A blank line is
    an error too: it is no example, and in these formats it only appears in a
    damaged file."""
    line_number = 0
    n_rows = 0
    for line_number, line in _lines(path):
        if header is not None and line_number == 1:
            if line != header:
                raise _error(path, 1, f"found the header {line[:80]!r}; expected {header!r}")
            continue
        yield line_number, _columns(path, line_number, line, "\t", names, blank_ok)
        n_rows += 1
    if n_rows == 0:
        raise _no_data(path, line_number, what)


def _blocks(
    path: Path, what: str, is_separator: Optional[Callable[[str], bool]] = None
) -> Iterator[List[Line]]:
    """Yield the runs of lines between separator lines (blank lines, and those
    for which `is_separator` is true). Several or trailing separators are
    fine, and so is a last block without a separator after it."""
    line_number = 0
    n_blocks = 0
    block: List[Line] = []
    for line_number, line in _lines(path):
        if not line.strip() or (is_separator is not None and is_separator(line)):
            if block:
                yield block
                n_blocks += 1
                block = []
        else:
            block.append((line_number, line))
    if block:
        yield block
        n_blocks += 1
    if n_blocks == 0:
        raise _no_data(path, line_number, what)


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
        word, pos, _chunk, ner = _columns(path, line_number, line, " ", _CONLL2003_COLUMNS)
        if not _IOB1_TAG.fullmatch(ner):
            raise _error(
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
    for block in _blocks(path, "sentences of 'word POS chunk NER' lines", _is_docstart):
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
    for line_number, line in _lines(path):
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
        raise _no_data(path, line_number, "sentences of 'word POS chunk NER' lines")


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
    for block in _blocks(path, "sentences of 'token<TAB>c|i' lines"):
        words, labels = [], []
        for line_number, line in block:
            token, label = _columns(path, line_number, line, "\t", _FCE_COLUMNS)
            _check_label(path, line_number, label, _FCE_LABELS)
            words.append(token)
            labels.append(label)
        yield Doc(nlp.vocab, words=words, tags=labels)


def _check_conllu_line(path: Path, line_number: int, line: str) -> str:
    """Check what spaCy's converter needs of a token line and would otherwise
    fail on without a line number (or misread): 10 columns, a well-formed ID,
    and a numeric or "_" HEAD for a word line. Returns the line."""
    fields = _columns(path, line_number, line, "\t", _CONLLU_COLUMNS)
    token_id, head = fields[0], fields[6]
    if not _CONLLU_ID.fullmatch(token_id):
        raise _error(
            path,
            line_number,
            f"found the ID {token_id!r}; expected a word number (3), a range (3-4) or a decimal (3.1)",
        )
    if _CONLLU_WORD_ID.fullmatch(token_id) and not _CONLLU_HEAD.fullmatch(head):
        raise _error(path, line_number, f"found the HEAD {head!r}; expected a word number, 0 for the root, or _")
    return line


def _check_conllu_tree(path: Path, token_lines: Sequence[Line]) -> None:
    """Check that the words of one sentence (its checked token lines) form a
    tree: word IDs 1, 2, 3, ... in order, every HEAD 0 or the ID of another
    word, and every word's chain of HEADs ending at the root (0).

    spaCy's converter checks none of this: it reads a self-headed word as a
    root, keeps cycles and numbers the words by position whatever their IDs,
    so a damaged tree would be written as a parse and the syntax masks built
    from it. Multiword token ranges (2-3) and empty nodes (2.1) are not
    words of the tree and are passed over, as the converter does; a word's
    HEAD "_" is a root, as the converter reads it.
    """
    word_lines: List[int] = []  # the line number of word i + 1
    heads: List[int] = []  # the HEAD of word i + 1; 0 for the root
    for line_number, line in token_lines:
        fields = line.split("\t")
        token_id, head = fields[0], fields[6]
        if not _CONLLU_WORD_ID.fullmatch(token_id):
            continue
        expected_id = len(word_lines) + 1
        if int(token_id) != expected_id:
            raise _error(
                path,
                line_number,
                f"found the word ID {token_id}; expected {expected_id} (the words of a sentence are numbered "
                "1, 2, 3, ... in order, with ranges and empty nodes between them)",
            )
        word_lines.append(line_number)
        heads.append(0 if head == "_" else int(head))
    n_words = len(heads)
    for word_id, (line_number, head) in enumerate(zip(word_lines, heads), start=1):
        if head == word_id:
            raise _error(
                path, line_number, f"word {word_id} is its own HEAD; expected the ID of another word, or 0 for the root"
            )
        if head > n_words:
            raise _error(
                path,
                line_number,
                f"found the HEAD {head}, but the sentence has words 1 to {n_words}; expected one of them, "
                "or 0 for the root",
            )
    # Follow each word's HEADs until they reach the root or a word known to
    # reach it; coming back to a word of the current chain is a cycle.
    reaches_root = [True] + [False] * n_words  # indexed by word ID; 0 is the root
    for start in range(1, n_words + 1):
        chain: List[int] = []
        word_id = start
        while not reaches_root[word_id] and word_id not in chain:
            chain.append(word_id)
            word_id = heads[word_id - 1]
        if not reaches_root[word_id]:
            cycle = chain[chain.index(word_id):]
            first = min(cycle)
            # The cycle from its smallest word ID, back to that word.
            shown = cycle[cycle.index(first):] + cycle[: cycle.index(first)] + [first]
            raise _error(
                path,
                word_lines[first - 1],
                f"the HEADs of words {' -> '.join(map(str, shown))} form a cycle that never reaches the root (0); "
                "expected every word's chain of HEADs to end at 0",
            )
        for word_id in chain:
            reaches_root[word_id] = True


def _into_vocab(doc: Doc, vocab: Vocab) -> Doc:
    """Rebuild a Doc on `vocab`: spaCy's CoNLL-U converter builds its Docs on
    a private Vocab, and Docs from one reader should share the pipeline's."""
    return Doc(
        vocab,
        words=[token.text for token in doc],
        spaces=[bool(token.whitespace_) for token in doc],
        tags=[token.tag_ for token in doc],
        pos=[token.pos_ for token in doc],
        morphs=[str(token.morph) for token in doc],
        lemmas=[token.lemma_ for token in doc],
        heads=[token.head.i for token in doc],
        deps=[token.dep_ for token in doc],
        ents=[f"{t.ent_iob_}-{t.ent_type_}" if t.ent_iob_ in ("B", "I") else t.ent_iob_ for t in doc],
    )


def read_conllu(path: Path, nlp: Language) -> Iterator[Doc]:
    """CoNLL-U (e.g. Universal Dependencies): one Doc per sentence with the
    gold heads, dependency labels, UPOS, XPOS (as `tag_`), lemmas and
    morphology. Multiword tokens are split into their syntactic words, as
    spaCy's `spacy convert` does by default.

    The lines are checked here first, then parsed by spaCy's own converter
    (`conllu_to_docs`); an error it raises on a sentence is reported at the
    sentence's first token line.
    """
    first_lines: List[int] = []
    sentences: List[str] = []
    for block in _blocks(path, "CoNLL-U sentences"):
        token_lines = [(n, line) for n, line in block if not line.startswith("#")]
        if not token_lines:
            raise _error(path, block[-1][0], "comment lines without token lines after them; expected a sentence")
        first_lines.append(token_lines[0][0])
        sentences.append("\n".join(_check_conllu_line(path, n, line) for n, line in token_lines))
        _check_conllu_tree(path, token_lines)
    docs = conllu_to_docs("\n\n".join(sentences), n_sents=1, no_print=True)
    for first_line in first_lines:
        try:
            doc = next(docs)
        except ValueError as err:
            raise _error(
                path, first_line, f"spaCy's CoNLL-U converter could not read the sentence that starts here: {err}"
            ) from err
        yield _into_vocab(doc, nlp.vocab)


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
