"""What a local branch's builder is: the MaskBuilder protocol, its kinds,
and the parts the built-in builders share.

A mask builder is any callable that takes a Doc or a Span and returns a
numpy bool array of shape (n_tokens, n_tokens) for that span, True where the
row token may attend to the column token. Builders are registered in spaCy's
`misc` registry so that a config picks one (the built-in ones are the mask
variants, spacy_sla/variants/); users register their own with the same call
signature. A builder that needs a dependency parse raises MissingParseError
for a Doc without one, and the model applies its `on_missing_parse` policy.
A builder that reads the parse may also have `build(doclike, parses)`
(ParseReadingBuilder): the model calls that with the batch's DocParses, so
that each Doc's parse is read once however many spans and builders ask.

Two optional parts of the protocol, each a typed attribute:
- a distance builder (DistanceBuilder) returns the clipped tree distance of
  every token pair instead, as integer buckets 0..n_buckets - 2 ("farther or
  unreachable" the last of them; n_buckets - 1 is the special pieces'), and
  makes, for each SLA layer, the torch module that turns the buckets into
  the local branch's attention: make_layer_bias(transformer_config);
- a builder with a `punct_rule` (a PunctRule, or its value) gets the per-wordpiece part of
  that rule where its token matrices become wordpiece matrices.
This module needs no torch.
"""
from abc import ABC, abstractmethod
from enum import Enum
from typing import Any, Callable, Optional, Protocol, Sequence, Tuple, Union, runtime_checkable

import numpy
from spacy.attrs import IS_SPACE
from spacy.tokens import Doc, Span

from ..errors import Errors
from ..parsers import example_parser
from .dependency_tree import DocGraph, IntArray, span_array
from .doc_parses import DocParses
from .punctuation import PunctRule

__all__ = [
    "BuilderKind",
    "DistanceBuilder",
    "DocLike",
    "MaskBuilder",
    "MissingParseError",
    "ParseReader",
    "ParseReadingBuilder",
    "PunctuatedBuilder",
    "build_matrix",
    "builder_kind",
    "builder_punct_rule",
    "neighbour_table_rows",
    "position_of",
]

DocLike = Union[Doc, Span]


# A local branch's builder: (n_tokens, n_tokens) bool for a Doc or Span. A
# type alias rather than a Protocol: spaCy's config validation checks a
# setting's value against it, and a callable is what it can check.
MaskBuilder = Callable[[DocLike], numpy.ndarray]


@runtime_checkable
class DistanceBuilder(Protocol):
    """A builder of tree-distance buckets for a learned local attention, with
    the module each SLA layer turns them into (a torch.nn.Module: an additive
    bias, or a transform of the scores; see layers/syntax_aware_attention)."""

    n_buckets: int

    def __call__(self, doclike: DocLike) -> numpy.ndarray: ...

    def make_layer_bias(self, transformer_config: Any) -> Any: ...


@runtime_checkable
class PunctuatedBuilder(Protocol):
    """A builder whose punctuation rule the wordpiece step applies."""

    punct_rule: Union[PunctRule, str]


@runtime_checkable
class ParseReadingBuilder(Protocol):
    """A builder that reads the dependency parse from the batch's parses:
    the model calls build(doclike, parses) with one DocParses per batch, in
    place of the builder's own call."""

    def build(self, doclike: DocLike, parses: DocParses) -> numpy.ndarray: ...


class ParseReader(ABC):
    """The base of the built-in builders that read the parse: their own call
    reads the Doc's parse anew; the model calls build with the batch's."""

    def __call__(self, doclike: DocLike) -> numpy.ndarray:
        return self.build(doclike, DocParses())

    @abstractmethod
    def build(self, doclike: DocLike, parses: DocParses) -> numpy.ndarray: ...


def build_matrix(builder: MaskBuilder, doclike: DocLike, parses: DocParses) -> numpy.ndarray:
    """The builder's matrix for the span, from the batch's parses where the
    builder reads them (ParseReadingBuilder), else from its own call."""
    if isinstance(builder, ParseReadingBuilder):
        return builder.build(doclike, parses)
    return builder(doclike)


class BuilderKind(Enum):
    MASK = "mask"  # bool visibility
    DISTANCE = "distance"  # tree-distance buckets


def builder_kind(builder: object) -> BuilderKind:
    return BuilderKind.DISTANCE if isinstance(builder, DistanceBuilder) else BuilderKind.MASK


def builder_punct_rule(builder: object) -> PunctRule:
    """The builder's punctuation rule, NONE for a builder without one (its
    matrices are what it returns). The built-in builders hold a PunctRule; a
    user's builder may name it by its config value ("authors"), parsed here
    ([SLA-E014] for anything else)."""
    if not isinstance(builder, PunctuatedBuilder):
        return PunctRule.NONE
    return PunctRule.parse(builder.punct_rule, repr(builder))


class MissingParseError(ValueError):
    """Raised by a mask builder for a Doc without a (complete) dependency
    parse. Made with for_builder, it carries [SLA-E001], whose hint names the
    component the parser must run before and the Doc (in_component fills in
    the name the pipeline actually uses and the Doc's place in the batch)."""

    def __init__(self, message: str, *, mask: Optional[str] = None, doc: Optional[Doc] = None):
        super().__init__(message)
        self.mask = mask
        self.doc = doc

    @classmethod
    def for_builder(
        cls,
        mask: str,
        component: str = "sla_transformer",
        doc: Optional[Doc] = None,
        place: Optional[str] = None,
    ) -> "MissingParseError":
        described = describe_doc(doc, place)
        parser = example_parser(doc.lang_ if doc is not None else "en")
        message = Errors.E001.format(mask=mask, name=component, doc=described, parser=parser)
        return cls(message, mask=mask, doc=doc)

    def in_component(
        self, component: str, docs: Sequence[Doc] = (), first_index: int = 0, where: str = "batch"
    ) -> "MissingParseError":
        """The error as `component` reports it for a call on `docs`, whose
        first Doc is number `first_index` of the `where`."""
        if self.mask is None:
            return self
        index = position_of(self.doc, docs)
        place = None if index is None else f"Doc {first_index + index} of the {where}, counting from 0"
        return MissingParseError.for_builder(self.mask, component, self.doc, place)


def position_of(doc: Optional[Doc], docs: Sequence[Doc]) -> Optional[int]:
    """The index of this very Doc object in docs (Docs compare by identity)."""
    return next((i for i, candidate in enumerate(docs) if candidate is doc), None) if doc is not None else None


def describe_doc(doc: Optional[Doc], place: Optional[str] = None, n_chars: int = 40) -> str:
    """Which Doc, for an error message: its place in a batch where known and
    the start of its text."""
    if doc is None:
        return place or "Doc not known"
    text = doc.text if len(doc.text) <= n_chars else doc.text[:n_chars] + "..."
    return f"{place}, text {text!r}" if place else f"text {text!r}"


def span_bounds(doclike: DocLike) -> Tuple[Doc, int, int]:
    if isinstance(doclike, Span):
        return doclike.doc, doclike.start, doclike.end
    return doclike, 0, len(doclike)


def parsed_graph(parses: DocParses, doc: Doc, builder: object) -> DocGraph:
    """The Doc's graph, from the batch's parses. A builder that reads the
    parse refuses Docs where some token has no dependency label (no parse,
    or a partial one such as Doc.from_docs([parsed, unparsed]))."""
    parse = parses.get(doc)
    if not parse.complete_parse:
        raise MissingParseError.for_builder(repr(builder), doc=doc)
    return parse.graph


def check_count(builder: str, arg: str, value: int, minimum: int) -> int:
    """A builder's whole-number setting, or [SLA-E007]."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(Errors.E007.format(arg=arg, value=repr(value), builder=builder, minimum=minimum))
    return value


def neighbour_table_rows(doc: Doc, start: int, end: int) -> Tuple[IntArray, IntArray, IntArray, IntArray]:
    """For a table with one row per distinct token of doc[start:end] and of
    their outer word neighbours (word_neighbours), after a row 0 that stands
    for "no neighbour": those tokens (sorted), and for each token of the
    span the table row of its left neighbour, of itself and of its right
    neighbour."""
    tokens = numpy.arange(start, end)
    left, right = word_neighbours(doc, start, end)
    rows = numpy.unique(numpy.concatenate([left, tokens, right]))
    rows = rows[rows >= 0]

    def row_of(token_ids: IntArray) -> IntArray:
        found: IntArray = numpy.searchsorted(rows, token_ids) + 1
        return found

    return rows, numpy.where(left >= 0, row_of(left), 0), row_of(tokens), numpy.where(right >= 0, row_of(right), 0)


def word_neighbours(doc: Doc, start: int, end: int) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """For each token of doc[start:end]: its nearest token on the left and on
    the right that is not whitespace (-1 where there is none). spaCy keeps
    runs of whitespace as tokens with no wordpieces; the authors collapse
    whitespace before parsing, so their neighbours are always words."""
    lower, upper = start, end
    while lower > 0 and doc[lower - 1].is_space:
        lower -= 1
    lower = max(lower - 1, 0)
    while upper < len(doc) and doc[upper].is_space:
        upper += 1
    upper = min(upper + 1, len(doc))
    is_word = ~span_array(doc[lower:upper], [IS_SPACE]).reshape(-1).astype(bool)
    positions = numpy.arange(lower, upper)
    # the last word at or before each position, the first at or after it
    last_word = numpy.maximum.accumulate(numpy.where(is_word, positions, -1))
    next_word = numpy.minimum.accumulate(numpy.where(is_word, positions, len(doc))[::-1])[::-1]
    own = numpy.arange(start, end) - lower
    left = numpy.where(own > 0, last_word[numpy.maximum(own - 1, 0)], -1)
    right = numpy.where(own + 1 < len(positions), next_word[numpy.minimum(own + 1, len(positions) - 1)], len(doc))
    return left, numpy.where(right >= len(doc), -1, right)
