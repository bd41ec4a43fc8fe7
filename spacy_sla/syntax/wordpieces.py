"""From a span's token matrix to its wordpiece matrix, by the alignment of
spacy-transformers.

Every wordpiece gets the rows and columns of the tokens it is aligned with:
a wordpiece shared by several tokens sees what any of them sees (and is at
the smallest distance any of them is). Wordpieces aligned with no token (the
special pieces, and padding) see everything and are seen by everything.
"""
from typing import Dict, List, Sequence, Tuple

import numpy
from spacy.tokens import Span
from thinc.types import Ragged

from ..data_classes import IGNORED_TARGET
from .dependency_tree import NO_TOKEN
from .doc_parses import DocParses

__all__ = ["PiecePairs", "expand_to_pieces", "parent_pieces", "span_piece_pairs", "wordpiece_visibility"]

PiecePairs = Tuple[numpy.ndarray, numpy.ndarray]  # (token in span, piece in span)


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


def span_piece_pairs(spans: Sequence[Span], align: Ragged, n_pieces: int) -> List[PiecePairs]:
    """The (token, piece) pairs of each span's alignment, both numbered
    within the span. A token of overlapping strided spans has pieces in
    several spans: each span keeps its own."""
    lengths_per_token = numpy.asarray(align.lengths, dtype=numpy.int64)
    token_rows = numpy.repeat(numpy.arange(len(lengths_per_token)), lengths_per_token)
    flat_pieces = numpy.asarray(align.dataXd, dtype=numpy.int64).reshape(-1)
    span_of_piece = flat_pieces // n_pieces
    order = numpy.argsort(span_of_piece, kind="stable")
    bounds = numpy.searchsorted(span_of_piece[order], numpy.arange(len(spans) + 1))
    first_rows = _first_token_positions(spans)
    pairs = []
    for i, span in enumerate(spans):
        selected = order[bounds[i] : bounds[i + 1]]
        tokens = token_rows[selected] - first_rows[id(span.doc)] - span.start
        pairs.append((tokens, flat_pieces[selected] % n_pieces))
    return pairs


def expand_to_pieces(
    token_values: numpy.ndarray, pairs: PiecePairs, n_pieces: int, unanchored: object
) -> numpy.ndarray:
    """(n_tokens, n_tokens) -> (n_pieces, n_pieces): each piece pair takes
    the smallest value over the token pairs it stands for; pieces without a
    token get `unanchored` in their rows and columns."""
    tokens, pieces = pairs
    expanded = numpy.full((n_pieces, n_pieces), unanchored, dtype=token_values.dtype)
    if len(pieces) == 0:
        return expanded
    if numpy.bincount(pieces, minlength=n_pieces).max() == 1:
        # The usual case: no piece is shared, so each takes its token's values.
        values = token_values.take(tokens, axis=0).take(tokens, axis=1)
        first = pieces[0]
        if pieces[-1] - first + 1 == len(pieces) and (numpy.diff(pieces) == 1).all():
            # pieces in a run (as a tokenizer gives them): a slice, some ten
            # times cheaper than scattering to index pairs
            expanded[first : first + len(pieces), first : first + len(pieces)] = values
        else:
            expanded[numpy.ix_(pieces, pieces)] = values
        return expanded
    order = numpy.lexsort((tokens, pieces))
    pieces, tokens = pieces[order], tokens[order]
    starts = numpy.flatnonzero(numpy.r_[True, pieces[1:] != pieces[:-1]])
    anchored = pieces[starts]
    group = numpy.repeat(numpy.arange(len(starts)), numpy.diff(numpy.r_[starts, len(pieces)]))
    rank = numpy.arange(len(pieces)) - starts[group]
    # Almost every piece has one token; a piece shared by r tokens needs r
    # choices of token per side, and the minimum over all combinations.
    choices = []
    for r in range(rank.max() + 1):
        choice = tokens[starts].copy()
        chosen = rank == r
        choice[group[chosen]] = tokens[chosen]
        choices.append(choice)
    block = token_values[numpy.ix_(choices[0], choices[0])]
    for row_choice in choices:
        for col_choice in choices:
            block = numpy.minimum(block, token_values[numpy.ix_(row_choice, col_choice)])
    expanded[numpy.ix_(anchored, anchored)] = block
    return expanded


def wordpiece_visibility(token_visible: numpy.ndarray, pairs: PiecePairs, n_pieces: int) -> numpy.ndarray:
    """A piece pair is visible iff some token of the row piece sees some
    token of the column piece; unanchored pieces see and are seen by all."""
    visible = ~expand_to_pieces(~token_visible, pairs, n_pieces, unanchored=False)
    # Every piece sees itself, whatever the builder says, so that no softmax
    # row of the local attention is empty.
    numpy.fill_diagonal(visible, True)
    return visible


def parent_pieces(span: Span, pairs: PiecePairs, n_pieces: int, parses: DocParses) -> numpy.ndarray:
    """For the first piece of each token: the first piece of its syntactic
    head (its own for a root); IGNORED_TARGET elsewhere, and where the head
    lies outside the span or has no piece. The heads come from the batch's
    parses."""
    tokens, pieces = pairs
    targets = numpy.full(n_pieces, IGNORED_TARGET, dtype=numpy.int64)
    if len(pieces) == 0:
        return targets
    first_piece = numpy.full(len(span), -1, dtype=numpy.int64)
    order = numpy.lexsort((pieces, tokens))
    starts = numpy.flatnonzero(numpy.r_[True, tokens[order][1:] != tokens[order][:-1]])
    first_piece[tokens[order][starts]] = pieces[order][starts]
    heads = parses.get(span.doc).heads[span.start : span.end]
    heads = numpy.where(heads == NO_TOKEN, numpy.arange(span.start, span.end), heads) - span.start
    tokens_with_piece = numpy.flatnonzero(first_piece >= 0)
    token_heads = heads[tokens_with_piece]
    inside = (token_heads >= 0) & (token_heads < len(span))
    inside[inside] = first_piece[token_heads[inside]] >= 0
    sources = first_piece[tokens_with_piece[inside]]
    # a piece shared by two tokens follows the first of them
    sources, first_of_piece = numpy.unique(sources, return_index=True)
    targets[sources] = first_piece[token_heads[inside][first_of_piece]]
    return targets
