"""Which keys every query of the local branch may see: the punctuation rule.

PunctRule.AUTHORS ("authors", the default): Li et al.'s released code decides
    per wordpiece; a piece is punctuation when its lower-cased text is in the
    string AUTHORS_PUNCTUATION (Python's `in` on a string: for BERT, which
    splits punctuation into single-character pieces, one of those
    characters). So the "." pieces of "u.s." and "$" are visible, while "{",
    "}", "~", "|", Unicode quotes and dashes and continuation pieces ("##.")
    are not.
PunctRule.SPACY ("spacy"): spaCy's IS_PUNCT of the token, spread to all its
    pieces.
PunctRule.NONE ("none"): no punctuation rule.

A config names the rule by its value; a builder parses it once
(PunctRule.parse) and everything after compares the member by identity.

The authors' characters are ASCII: scripts whose punctuation is not (the
CJK "。，、！？「」", the Arabic "،؟", the Devanagari danda "।", ...) keep
their punctuation hidden under "authors", like words. spaCy's IS_PUNCT is true
for a token whose characters are all in a Unicode punctuation category, so
"spacy" makes them visible; default_punct_rule names it for the languages
written so.

A rule decided per wordpiece cannot be shown in a token-level matrix, so the
builders apply "spacy" themselves (token_punctuation) and leave
"authors" to the step that turns token masks into wordpiece masks
(syntax_inputs).
"""
from enum import Enum
from typing import Optional, Sequence, Union

import numpy
from spacy.attrs import IS_PUNCT
from spacy.tokens import Doc, Span

from ..errors import Errors
from .dependency_tree import span_array

__all__ = [
    "AUTHORS_PUNCTUATION",
    "PunctRule",
    "authors_punctuation_pieces",
    "default_punct_rule",
    "is_authors_punctuation",
    "token_punctuation",
]

AUTHORS_PUNCTUATION = "!\"#$%&'()*+,.-/:;<=>?@[\\]^_"
# Byte-level BPE (RoBERTa) and SentencePiece mark a preceding space with a
# first character of their own; the authors' (BERT) pieces have none.
_SPACE_MARKERS = ("\u0120", "\u2581")
# spaCy language codes of scripts whose full stop and comma are not ASCII
NON_ASCII_PUNCTUATION_LANGUAGES = ("am", "ar", "bn", "fa", "hi", "hy", "ja", "mr", "ne", "sa", "ti", "ur", "zh")


class PunctRule(Enum):
    """The punctuation rule of a builder (see the module docstring)."""

    AUTHORS = "authors"
    SPACY = "spacy"
    NONE = "none"

    @classmethod
    def parse(cls, value: Union[str, "PunctRule"], builder: str) -> "PunctRule":
        """The rule a config's `punct_rule` names; [SLA-E014] for anything
        else (the error names `builder`)."""
        if isinstance(value, PunctRule):
            return value
        try:
            return cls(value)
        except ValueError:
            rules = ", ".join(f'"{rule.value}"' for rule in cls)
            raise ValueError(Errors.E014.format(value=repr(value), builder=builder, rules=rules)) from None


def default_punct_rule(lang: str) -> PunctRule:
    """The punctuation rule for a pipeline of `lang`: the authors' unless
    the language's punctuation is not ASCII, which their rule would treat as
    words; spaCy's Unicode IS_PUNCT then."""
    return PunctRule.SPACY if lang in NON_ASCII_PUNCTUATION_LANGUAGES else PunctRule.AUTHORS


def token_punctuation(doclike: Union[Doc, Span], rule: PunctRule) -> Optional[numpy.ndarray]:
    """The token-level part of the rule: under PunctRule.SPACY, which tokens
    of the span are punctuation (bool, n_tokens), whose columns a builder
    makes visible from every query; None under the other rules (AUTHORS is
    decided per wordpiece, in syntax_inputs)."""
    if rule is not PunctRule.SPACY:
        return None
    return span_array(doclike, [IS_PUNCT]).reshape(-1).astype(bool)


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
