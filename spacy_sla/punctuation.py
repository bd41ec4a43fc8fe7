"""Which keys every query of the local branch may see: the punctuation rule.

"authors" (the default): Li et al.'s released code decides per wordpiece; a
    piece is punctuation when its lower-cased text is in the string
    AUTHORS_PUNCTUATION (Python's `in` on a string: for BERT, which splits
    punctuation into single-character pieces, one of those characters). So
    the "." pieces of "u.s." and "$" are visible, while "{", "}", "~", "|",
    Unicode quotes and dashes and continuation pieces ("##.") are not.
"spacy": spaCy's IS_PUNCT of the token, spread to all its pieces.
"none": no punctuation rule.

The authors' characters are ASCII: scripts whose punctuation is not (the
CJK "。，、！？「」", the Arabic "،؟", the Devanagari danda "।", ...) keep
their punctuation hidden under "authors", like words. spaCy's IS_PUNCT is true
for a token whose characters are all in a Unicode punctuation category, so
"spacy" makes them visible; default_punct_rule names it for the languages
written so.

A rule decided per wordpiece cannot be shown in a token-level matrix, so the
builders apply "spacy" themselves and leave "authors" to the step that turns
token masks into wordpiece masks (syntax_inputs).
"""
from functools import lru_cache
from typing import Optional, Sequence

import numpy

from .errors import Errors

AUTHORS_PUNCTUATION = "!\"#$%&'()*+,.-/:;<=>?@[\\]^_"
PUNCT_RULES = ("authors", "spacy", "none")
# Byte-level BPE (RoBERTa) and SentencePiece mark a preceding space with a
# first character of their own; the authors' (BERT) pieces have none.
_SPACE_MARKERS = ("\u0120", "\u2581")


# spaCy language codes of scripts whose full stop and comma are not ASCII
NON_ASCII_PUNCTUATION_LANGUAGES = ("am", "ar", "bn", "fa", "hi", "hy", "ja", "mr", "ne", "sa", "ti", "ur", "zh")


def default_punct_rule(lang: str) -> str:
    """The punctuation rule for a pipeline of `lang`: the authors' unless
    the language's punctuation is not ASCII, which their rule would treat as
    words; spaCy's Unicode IS_PUNCT then."""
    return "spacy" if lang in NON_ASCII_PUNCTUATION_LANGUAGES else "authors"


def check_punct_rule(value: str, builder: str) -> str:
    if value not in PUNCT_RULES:
        raise ValueError(Errors.E014.format(value=repr(value), builder=builder, rules=", ".join(PUNCT_RULES)))
    return value


def punct_rule_from_flag(punct_visible: bool) -> str:
    """The rule of the registered versions that took `punct_visible`."""
    return "spacy" if punct_visible else "none"


# Pieces repeat (a vocabulary of some 30k): the cache answers most of a
# batch's pieces with one dictionary look-up.
@lru_cache(maxsize=1 << 16)
def is_authors_punctuation(piece: str) -> bool:
    """The authors' test for one wordpiece (see the module docstring)."""
    text = piece[1:] if len(piece) > 1 and piece.startswith(_SPACE_MARKERS) else piece
    return bool(text) and text.lower() in AUTHORS_PUNCTUATION


def authors_punctuation_pieces(piece_strings: Sequence[str], n_pieces: Optional[int] = None) -> numpy.ndarray:
    """(n_pieces,) bool: which pieces of a span are punctuation by the
    authors' rule; padding beyond the strings is not."""
    n_pieces = len(piece_strings) if n_pieces is None else n_pieces
    flags = numpy.zeros(n_pieces, dtype=bool)
    flags[: len(piece_strings)] = [is_authors_punctuation(piece) for piece in piece_strings[:n_pieces]]
    return flags
