"""Mask builders: which tokens of a span each token may attend to locally.

A mask builder is any callable that takes a Doc or a Span and returns a numpy
bool array of shape (n_tokens, n_tokens) for that span, True where the row
token may attend to the column token. Builders are registered in spaCy's
`misc` registry so that a config picks one; users register their own with
the same call signature. A builder that needs a dependency parse raises
MissingParseError for a Doc without one, and the model applies its
`on_missing_parse` policy.

A distance builder (kind "distance", e.g. the soft tree-distance bias)
returns the clipped tree distance of every token pair instead, as integer
buckets 0..max_distance plus max_distance + 1 for "farther or unreachable";
it also makes, for each SLA layer, the module that turns the buckets into
the local branch's attention (an additive bias, or a transform of the
scores: see layers/local_bias.py) from the transformer's config.
"""
from typing import TYPE_CHECKING, Callable, Tuple, Union

import numpy
from spacy.attrs import IS_PUNCT
from spacy.tokens import Doc, Span
from spacy.util import registry

from .dependency_tree import (
    ancestor_or_self,
    blockwise_distances,
    blockwise_reach,
    doc_trees,
)
from .errors import Errors

if TYPE_CHECKING:
    from torch import nn
    from transformers import PretrainedConfig

DocLike = Union[Doc, Span]
BoolArray = numpy.ndarray
MaskBuilder = Callable[[DocLike], BoolArray]


class MissingParseError(ValueError):
    """Raised by a mask builder for a Doc without a dependency parse."""


def span_bounds(doclike: DocLike) -> Tuple[Doc, int, int]:
    if isinstance(doclike, Span):
        return doclike.doc, doclike.start, doclike.end
    return doclike, 0, len(doclike)


def builder_kind(builder: MaskBuilder) -> str:
    """"mask" (bool arrays) or "distance" (bucket arrays); user builders
    without the attribute are mask builders."""
    return getattr(builder, "kind", "mask")


def _check_parse(doc: Doc, builder: object) -> None:
    if not doc.has_annotation("DEP"):
        raise MissingParseError(Errors.E001.format(mask=repr(builder), name="sla_transformer"))


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
    forest of the Doc, of i or (with `neighbours`) of one of i's neighbours
    i-1 and i+1 in the Doc. With punct_visible, punctuation columns are
    visible from every row.
    """

    name = "spacy-sla.syntax_mask.v2"
    kind = "mask"
    requires_parse = True

    def __init__(self, threshold: int = 3, punct_visible: bool = True, neighbours: bool = True):
        self.threshold = _check_count(self.name, "threshold", threshold, 0)
        self.punct_visible = punct_visible
        self.neighbours = neighbours

    def __repr__(self) -> str:
        return (
            f"SyntaxMask(threshold={self.threshold}, punct_visible={self.punct_visible}, "
            f"neighbours={self.neighbours})"
        )

    def __call__(self, doclike: DocLike) -> BoolArray:
        doc, start, end = span_bounds(doclike)
        n_tokens = end - start
        if n_tokens == 0:
            return numpy.zeros((0, 0), dtype=bool)
        _check_parse(doc, self)
        trees = doc_trees(doc, self.threshold)
        if not self.neighbours:
            rows = numpy.arange(start, end)
            visible = blockwise_reach(trees, rows, rows, self.threshold)
            if self.punct_visible:
                _show_punctuation(visible, doc, start, end)
            return visible
        # The rows of the span's outer neighbours are needed for the union.
        first_row = max(start - 1, 0)
        end_row = min(end + 1, len(doc))
        reach = blockwise_reach(trees, numpy.arange(first_row, end_row), numpy.arange(start, end), self.threshold)
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
    kind = "mask"
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


class AncestorMask:
    """SG-Net's syntax-guided mask (Zhang et al. 2020): token j is visible
    from token i iff j is i or one of i's ancestors in the dependency tree."""

    name = "spacy-sla.ancestor_mask.v1"
    kind = "mask"
    requires_parse = True

    def __repr__(self) -> str:
        return "AncestorMask()"

    def __call__(self, doclike: DocLike) -> BoolArray:
        doc, start, end = span_bounds(doclike)
        if end == start:
            return numpy.zeros((0, 0), dtype=bool)
        _check_parse(doc, self)
        tokens = numpy.arange(start, end)
        return ancestor_or_self(doc_trees(doc, None).ancestors, tokens, tokens)


class TreeDistanceBuckets:
    """Clipped tree distances for a learned local attention bias: bucket
    D(i, j) for D <= max_distance, max_distance + 1 for farther pairs and
    pairs in different sentences. Each SLA layer learns, per head, one bias
    per bucket (initialised to zero, so training starts from global
    attention): the soft tree-distance bias."""

    name = "spacy-sla.tree_distance_bias.v1"
    kind = "distance"
    requires_parse = True

    def __init__(self, max_distance: int = 8):
        self.max_distance = _check_count(self.name, "max_distance", max_distance, 0)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(max_distance={self.max_distance})"

    @property
    def n_buckets(self) -> int:
        # 0..max_distance, "farther", and one for special pieces
        return self.max_distance + 3

    def make_layer_bias(self, config: "PretrainedConfig") -> "nn.Module":
        from .layers.local_bias import DistanceBucketBias

        return DistanceBucketBias(config.num_attention_heads, self.n_buckets)

    def __call__(self, doclike: DocLike) -> numpy.ndarray:
        doc, start, end = span_bounds(doclike)
        if end == start:
            return numpy.zeros((0, 0), dtype=numpy.int16)
        _check_parse(doc, self)
        tokens = numpy.arange(start, end)
        return blockwise_distances(doc_trees(doc, self.max_distance), tokens, tokens, self.max_distance)


class SoftThresholdBias(TreeDistanceBuckets):
    """The soft threshold bias (our variant, beyond the paper; not the
    authors' soft threshold, which is spacy-sla.dependency_scale.v1): the
    local branch adds log(0.5 + 0.5 * tanh(tau_h - D(i, j))) to the scores,
    with one learned threshold tau_h per head and layer, the same for every
    token; D is the plain clipped tree distance (no neighbour minimum, no
    punctuation rule)."""

    name = "spacy-sla.soft_threshold.v1"

    def __init__(self, initial_threshold: float = 3.0, max_distance: int = 8):
        super().__init__(max_distance)
        self.initial_threshold = float(initial_threshold)

    def __repr__(self) -> str:
        return f"SoftThresholdBias(initial_threshold={self.initial_threshold}, max_distance={self.max_distance})"

    def make_layer_bias(self, config: "PretrainedConfig") -> "nn.Module":
        from .layers.local_bias import SoftThresholdLogBias

        return SoftThresholdLogBias(config.num_attention_heads, self.max_distance, self.initial_threshold)


# The name this builder had before it was told apart from the authors' soft
# threshold; kept for code that imports it.
SoftThreshold = SoftThresholdBias


@registry.misc("spacy-sla.syntax_mask.v1")
def create_syntax_mask(threshold: int = 3, punct_visible: bool = True) -> SyntaxMask:
    """The SLA mask: tokens within `threshold` dependency hops of a token or
    of its left or right neighbour."""
    return SyntaxMask(threshold=threshold, punct_visible=punct_visible, neighbours=True)


@registry.misc("spacy-sla.syntax_mask.v2")
def create_syntax_mask_v2(
    threshold: int = 3, punct_visible: bool = True, neighbours: bool = True
) -> SyntaxMask:
    """The SLA mask with the neighbour union as an option (ablation)."""
    return SyntaxMask(threshold=threshold, punct_visible=punct_visible, neighbours=neighbours)


@registry.misc("spacy-sla.ancestor_mask.v1")
def create_ancestor_mask() -> AncestorMask:
    """SG-Net's mask: a token and its ancestors."""
    return AncestorMask()


@registry.misc("spacy-sla.tree_distance_bias.v1")
def create_tree_distance_bias(max_distance: int = 8) -> TreeDistanceBuckets:
    """A learned per-head bias on clipped tree distances, for the local branch."""
    return TreeDistanceBuckets(max_distance=max_distance)


@registry.misc("spacy-sla.soft_threshold.v1")
def create_soft_threshold(initial_threshold: float = 3.0, max_distance: int = 8) -> SoftThresholdBias:
    """The soft threshold bias: an additive log(0.5 + 0.5 tanh(tau_h - D)) with
    one learned threshold per head (not the authors' formulation)."""
    return SoftThresholdBias(initial_threshold=initial_threshold, max_distance=max_distance)


@registry.misc("spacy-sla.window_mask.v1")
def create_window_mask(window: int = 3, punct_visible: bool = True) -> WindowMask:
    """Window local attention: tokens at most `window` positions away."""
    return WindowMask(window=window, punct_visible=punct_visible)
