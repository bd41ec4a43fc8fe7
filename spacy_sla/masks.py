"""Mask builders: which tokens of a span each token may attend to locally.

A mask builder is any callable that takes a Doc or a Span and returns a numpy
bool array of shape (n_tokens, n_tokens) for that span, True where the row
token may attend to the column token. Builders are registered in spaCy's
`misc` registry so that a config picks one; users register their own with
the same call signature. A builder that needs a dependency parse raises
MissingParseError for a Doc without one, and the model applies its
`on_missing_parse` policy.
"""
from typing import Callable, Tuple, Union

import numpy
from spacy.attrs import IS_PUNCT
from spacy.tokens import Doc, Span
from spacy.util import registry

from .dependency_tree import ancestor_table, head_indices, tree_distances
from .errors import Errors

DocLike = Union[Doc, Span]
BoolArray = numpy.ndarray
MaskBuilder = Callable[[DocLike], BoolArray]


class MissingParseError(ValueError):
    """Raised by a mask builder for a Doc without a dependency parse."""


def span_bounds(doclike: DocLike) -> Tuple[Doc, int, int]:
    if isinstance(doclike, Span):
        return doclike.doc, doclike.start, doclike.end
    return doclike, 0, len(doclike)


def _check_count(builder: str, arg: str, value: int, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(
            Errors.E007.format(arg=arg, value=repr(value), builder=builder, minimum=minimum)
        )
    return value


def _show_punctuation(visible: BoolArray, doc: Doc, start: int, end: int) -> None:
    is_punct = doc.to_array([IS_PUNCT]).reshape(-1)[start:end].astype(bool)
    visible[:, is_punct] = True


class SyntaxMask:
    """Syntax-aware local attention (Li et al. 2021): token j is visible from
    token i iff j is within `threshold` hops, in the undirected dependency
    forest of the Doc, of i or of one of i's neighbours i-1 and i+1 in the
    Doc. With punct_visible, punctuation columns are visible from every row.
    """

    name = "spacy-sla.syntax_mask.v1"
    requires_parse = True

    def __init__(self, threshold: int = 3, punct_visible: bool = True):
        self.threshold = _check_count(self.name, "threshold", threshold, 0)
        self.punct_visible = punct_visible

    def __repr__(self) -> str:
        return f"SyntaxMask(threshold={self.threshold}, punct_visible={self.punct_visible})"

    def __call__(self, doclike: DocLike) -> BoolArray:
        doc, start, end = span_bounds(doclike)
        n_tokens = end - start
        if n_tokens == 0:
            return numpy.zeros((0, 0), dtype=bool)
        if not doc.has_annotation("DEP"):
            raise MissingParseError(Errors.E001.format(mask=repr(self), name="sla_transformer"))
        ancestors = ancestor_table(head_indices(doc), self.threshold)
        # The rows of the span's outer neighbours are needed for the union.
        first_row = max(start - 1, 0)
        end_row = min(end + 1, len(doc))
        reach = (
            tree_distances(
                ancestors,
                numpy.arange(first_row, end_row),
                numpy.arange(start, end),
                self.threshold,
            )
            <= self.threshold
        )
        # Pad one all-False row on each side, standing for the neighbours that
        # are missing at the Doc's edges.
        padded = numpy.zeros((reach.shape[0] + 2, n_tokens), dtype=bool)
        padded[1:-1] = reach
        own_rows = numpy.arange(start, end) - first_row + 1
        visible = padded[own_rows - 1] | padded[own_rows] | padded[own_rows + 1]
        if self.punct_visible:
            _show_punctuation(visible, doc, start, end)
        return visible


class WindowMask:
    """Window local attention (the WLA baseline of Li et al. 2021): token j
    is visible from token i iff |i - j| <= window. With punct_visible,
    punctuation columns are visible from every row."""

    name = "spacy-sla.window_mask.v1"
    requires_parse = False

    def __init__(self, window: int = 3, punct_visible: bool = True):
        self.window = _check_count(self.name, "window", window, 0)
        self.punct_visible = punct_visible

    def __repr__(self) -> str:
        return f"WindowMask(window={self.window}, punct_visible={self.punct_visible})"

    def __call__(self, doclike: DocLike) -> BoolArray:
        doc, start, end = span_bounds(doclike)
        positions = numpy.arange(end - start)
        visible = numpy.abs(positions[:, None] - positions[None, :]) <= self.window
        if self.punct_visible:
            _show_punctuation(visible, doc, start, end)
        return visible


@registry.misc("spacy-sla.syntax_mask.v1")
def create_syntax_mask(threshold: int = 3, punct_visible: bool = True) -> SyntaxMask:
    """The SLA mask: tokens within `threshold` dependency hops of a token or
    of its left or right neighbour."""
    return SyntaxMask(threshold=threshold, punct_visible=punct_visible)


@registry.misc("spacy-sla.window_mask.v1")
def create_window_mask(window: int = 3, punct_visible: bool = True) -> WindowMask:
    """Window local attention: tokens at most `window` positions away."""
    return WindowMask(window=window, punct_visible=punct_visible)
