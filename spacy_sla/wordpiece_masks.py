"""From token-level masks to the wordpiece-level LocalAttentionMask.

Every wordpiece gets the rows and columns of the tokens it is aligned with:
a wordpiece shared by several tokens sees what any of them sees and is seen
by whatever sees any of them. Wordpieces aligned with no token (the special
pieces, and padding) see everything and are seen by everything.
"""
import warnings
from typing import Dict, List, Sequence

import numpy
from spacy.tokens import Span
from thinc.types import Ragged

from .data_classes import LocalAttentionMask
from .errors import Errors, Warnings
from .masks import MaskBuilder, MissingParseError

ON_MISSING_PARSE = ("error", "global")


def check_on_missing_parse(value: str) -> str:
    if value not in ON_MISSING_PARSE:
        raise ValueError(Errors.E004.format(value=value))
    return value


def token_masks(
    spans: Sequence[Span], mask_builder: MaskBuilder, on_missing_parse: str
) -> List[numpy.ndarray]:
    """Call the mask builder on every span, applying the missing-parse policy
    (an all-visible mask, i.e. global attention, for "global")."""
    masks = []
    unparsed_docs = set()
    for span in spans:
        try:
            mask = mask_builder(span)
        except MissingParseError:
            if on_missing_parse == "error":
                raise
            unparsed_docs.add(id(span.doc))
            mask = numpy.ones((len(span), len(span)), dtype=bool)
        if (
            not isinstance(mask, numpy.ndarray)
            or mask.dtype != numpy.bool_
            or mask.shape != (len(span), len(span))
        ):
            got = (
                f"an array of shape {mask.shape} and dtype {mask.dtype}"
                if isinstance(mask, numpy.ndarray)
                else type(mask).__name__
            )
            raise ValueError(
                Errors.E008.format(builder=repr(mask_builder), got=got, n_tokens=len(span))
            )
        masks.append(mask)
    if unparsed_docs:
        warnings.warn(Warnings.W001.format(n_docs=len(unparsed_docs)))
    return masks


def _first_token_positions(spans: Sequence[Span]) -> Dict[int, int]:
    """Row of each Doc's first token in the alignment table, which numbers
    the tokens of the Docs in the order the spans first reach them (as
    spacy_transformers.align.get_token_positions does)."""
    offsets: Dict[int, int] = {}
    n_seen = 0
    for span in spans:
        if id(span.doc) not in offsets:
            offsets[id(span.doc)] = n_seen
            n_seen += len(span.doc)
    return offsets


def wordpiece_visibility(
    token_visible: numpy.ndarray,
    piece_tokens: numpy.ndarray,
    piece_indices: numpy.ndarray,
    n_pieces: int,
) -> numpy.ndarray:
    """Expand a span's (n_tokens, n_tokens) mask to (n_pieces, n_pieces), given
    the (token, piece) pairs of its alignment."""
    incidence = numpy.zeros((token_visible.shape[0], n_pieces), dtype=numpy.float32)
    incidence[piece_tokens, piece_indices] = 1.0
    # A piece pair is visible iff some token of the row piece sees some token
    # of the column piece: a boolean matrix product, done in BLAS.
    visible = (incidence.T @ token_visible.astype(numpy.float32) @ incidence) > 0
    # Every piece sees itself, whatever the builder says, so that no softmax
    # row of the local attention is empty.
    numpy.fill_diagonal(visible, True)
    unanchored = ~incidence.any(axis=0)
    visible[unanchored, :] = True
    visible[:, unanchored] = True
    return visible


def build_local_attention_mask(
    spans: Sequence[Span],
    align: Ragged,
    lengths: List[int],
    n_pieces: int,
    mask_builder: MaskBuilder,
    on_missing_parse: str = "error",
) -> LocalAttentionMask:
    """The LocalAttentionMask of a batch of spans.

    spans: the flat list of spans, in the order of the wordpiece batch.
    align: the token-to-wordpiece alignment of spacy-transformers (one row per
        distinct token, holding indices into the flattened, padded batch).
    lengths: wordpieces per span, padding excluded.
    n_pieces: the padded width of the wordpiece batch.
    """
    masks = token_masks(spans, mask_builder, on_missing_parse)
    visible = numpy.ones((len(spans), n_pieces, n_pieces), dtype=bool)
    if not spans:
        return LocalAttentionMask(visible, list(lengths))
    lengths_per_token = numpy.asarray(align.lengths, dtype=numpy.int64)
    token_rows = numpy.repeat(numpy.arange(len(lengths_per_token)), lengths_per_token)
    flat_pieces = numpy.asarray(align.dataXd, dtype=numpy.int64).reshape(-1)
    span_of_piece = flat_pieces // n_pieces
    piece_in_span = flat_pieces % n_pieces
    first_rows = _first_token_positions(spans)
    for i, (span, token_visible) in enumerate(zip(spans, masks)):
        in_span = span_of_piece == i
        # A token of overlapping strided spans has pieces in several spans.
        piece_tokens = token_rows[in_span] - first_rows[id(span.doc)] - span.start
        visible[i] = wordpiece_visibility(
            token_visible, piece_tokens, piece_in_span[in_span], n_pieces
        )
    return LocalAttentionMask(visible, list(lengths))
