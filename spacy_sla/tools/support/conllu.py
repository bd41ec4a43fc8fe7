"""CoNLL-U files (e.g. Universal Dependencies) as spaCy Docs, every line
checked first: a line that does not fit the format raises ConversionError
naming the file and its 1-based line number, never a traceback from spaCy's
converter or a silently misread parse (the syntax masks are built from it).

Also the line-level checks that the other text formats' readers share
(replication/converters.py): numbered_lines, line_columns, line_blocks.
"""
import re
from pathlib import Path
from typing import Callable, Collection, Iterator, List, Optional, Sequence, Tuple

from spacy.language import Language
from spacy.tokens import Doc
from spacy.training.converters import conllu_to_docs
from spacy.vocab import Vocab

from .errors import Errors

Line = Tuple[int, str]

_CONLLU_COLUMNS = ("ID", "FORM", "LEMMA", "UPOS", "XPOS", "FEATS", "HEAD", "DEPREL", "DEPS", "MISC")
# A CoNLL-U ID: a word (1), a multiword token range (1-2) or an empty node (1.1).
_CONLLU_ID = re.compile(r"[0-9]+(?:-[0-9]+|\.[0-9]+)?")
_CONLLU_WORD_ID = re.compile(r"[0-9]+")
_CONLLU_HEAD = re.compile(r"[0-9]+|_")


class ConversionError(ValueError):
    """An input file does not fit its format: the message starts with
    "[SLA-E011] {path}:{line_number}: " so that editors and terminals can jump to
    the line; or the output path is the input file ([SLA-REPLICATION-E075]). A ValueError,
    because it is a bad input value."""


def line_error(path: Path, line_number: int, problem: str) -> ConversionError:
    return ConversionError(Errors.E011.format(path=path, line_number=line_number, problem=problem))


def numbered_lines(path: Path) -> Iterator[Line]:
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
                raise line_error(
                    path, line_number, f"invalid UTF-8 ({err.reason} at byte {err.start}); expected a UTF-8 text file"
                ) from err
            yield line_number, text.rstrip("\r\n")


def no_data_error(path: Path, last_line_number: int, what: str) -> ConversionError:
    """The error for a file without a single example, which would otherwise
    become an empty training or evaluation set."""
    if last_line_number == 0:
        return line_error(path, 1, f"the file is empty; expected {what}")
    return line_error(path, last_line_number, f"the file ends here without any {what}")


def line_columns(
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
        raise line_error(
            path,
            line_number,
            f"found {len(fields)} {kind}-separated column(s) in {line[:80]!r}; expected {len(names)}: "
            + ", ".join(names),
        )
    for number, (name, field) in enumerate(zip(names, fields), start=1):
        if name not in blank_ok and not field.strip():
            raise line_error(path, line_number, f"column {number} ({name}) is empty in {line[:80]!r}")
    return fields


def line_blocks(
    path: Path, what: str, is_separator: Optional[Callable[[str], bool]] = None
) -> Iterator[List[Line]]:
    """Yield the runs of lines between separator lines (blank lines, and those
    for which `is_separator` is true). Several or trailing separators are
    fine, and so is a last block without a separator after it."""
    line_number = 0
    n_blocks = 0
    block: List[Line] = []
    for line_number, line in numbered_lines(path):
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
        raise no_data_error(path, line_number, what)


def _check_conllu_line(path: Path, line_number: int, line: str) -> str:
    """Check what spaCy's converter needs of a token line and would otherwise
    fail on without a line number (or misread): 10 columns, a well-formed ID,
    and a numeric or "_" HEAD for a word line. Returns the line."""
    fields = line_columns(path, line_number, line, "\t", _CONLLU_COLUMNS)
    token_id, head = fields[0], fields[6]
    if not _CONLLU_ID.fullmatch(token_id):
        raise line_error(
            path,
            line_number,
            f"found the ID {token_id!r}; expected a word number (3), a range (3-4) or a decimal (3.1)",
        )
    if _CONLLU_WORD_ID.fullmatch(token_id) and not _CONLLU_HEAD.fullmatch(head):
        raise line_error(path, line_number, f"found the HEAD {head!r}; expected a word number, 0 for the root, or _")
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
            raise line_error(
                path,
                line_number,
                f"found the word ID {token_id}; expected {expected_id} (the words of a sentence are numbered "
                "1, 2, 3, ... in order, with ranges and empty nodes between them)",
            )
        word_lines.append(line_number)
        heads.append(0 if head == "_" else int(head))
    n_words = len(heads)
    for word_id, (line_number, head_id) in enumerate(zip(word_lines, heads), start=1):
        if head_id == word_id:
            raise line_error(
                path, line_number, f"word {word_id} is its own HEAD; expected the ID of another word, or 0 for the root"
            )
        if head_id > n_words:
            raise line_error(
                path,
                line_number,
                f"found the HEAD {head_id}, but the sentence has words 1 to {n_words}; expected one of them, "
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
            raise line_error(
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
    for block in line_blocks(path, "CoNLL-U sentences"):
        token_lines = [(n, line) for n, line in block if not line.startswith("#")]
        if not token_lines:
            raise line_error(path, block[-1][0], "comment lines without token lines after them; expected a sentence")
        first_lines.append(token_lines[0][0])
        sentences.append("\n".join(_check_conllu_line(path, n, line) for n, line in token_lines))
        _check_conllu_tree(path, token_lines)
    docs = conllu_to_docs("\n\n".join(sentences), n_sents=1, no_print=True)
    for first_line in first_lines:
        try:
            doc = next(docs)
        except ValueError as err:
            raise line_error(
                path, first_line, f"spaCy's CoNLL-U converter could not read the sentence that starts here: {err}"
            ) from err
        yield _into_vocab(doc, nlp.vocab)
