"""From the parse of each span to the wordpiece-level SyntaxInputs.

Every wordpiece gets the rows and columns of the tokens it is aligned with:
a wordpiece shared by several tokens sees what any of them sees (and is at
the smallest distance any of them is). Wordpieces aligned with no token (the
special pieces, and padding) see everything and are seen by everything. A
builder with the "authors" punctuation rule makes punctuation pieces visible
from every query (distance 0) here, since that rule is decided per piece.
"""
import warnings
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple

import numpy
from spacy.tokens import Doc, Span
from thinc.types import Ragged

from .data_classes import IGNORED_TARGET, SyntaxInputs
from .dependency_tree import NO_TOKEN, doc_trees, has_complete_parse, shared_doc_trees
from .errors import Errors, Warnings
from .masks import MaskBuilder, MissingParseError, SyntaxMask, builder_kind
from .punctuation import authors_punctuation_pieces

ON_MISSING_PARSE = ("error", "global")
PiecePairs = Tuple[numpy.ndarray, numpy.ndarray]  # (token in span, piece in span)


def check_on_missing_parse(value: str) -> str:
    if value not in ON_MISSING_PARSE:
        raise ValueError(Errors.E004.format(value=value))
    return value


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


def parent_pieces(span: Span, pairs: PiecePairs, n_pieces: int) -> numpy.ndarray:
    """For the first piece of each token: the first piece of its syntactic
    head (its own for a root); IGNORED_TARGET elsewhere, and where the head
    lies outside the span or has no piece."""
    tokens, pieces = pairs
    targets = numpy.full(n_pieces, IGNORED_TARGET, dtype=numpy.int64)
    if len(pieces) == 0:
        return targets
    first_piece = numpy.full(len(span), -1, dtype=numpy.int64)
    order = numpy.lexsort((pieces, tokens))
    starts = numpy.flatnonzero(numpy.r_[True, tokens[order][1:] != tokens[order][:-1]])
    first_piece[tokens[order][starts]] = pieces[order][starts]
    heads = doc_trees(span.doc, 0).heads[span.start : span.end]
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


class _MissingParsePolicy:
    """Applies on_missing_parse to the builders' calls and warns once per batch."""

    def __init__(self, on_missing_parse: str):
        self.on_missing_parse = on_missing_parse
        self.unparsed_docs: set = set()

    def call(self, builder: MaskBuilder, span: Span) -> Optional[numpy.ndarray]:
        """The builder's matrix, or None for an unparsed Doc under "global"."""
        try:
            return builder(span)
        except MissingParseError:
            if self.on_missing_parse == "error":
                raise
            self.unparsed_docs.add(id(span.doc))
            return None

    def has_parse(self, span: Span) -> bool:
        if len(span) == 0 or has_complete_parse(span.doc):
            return True
        if self.on_missing_parse == "error":
            raise MissingParseError.for_builder("parent attention", doc=span.doc)
        self.unparsed_docs.add(id(span.doc))
        return False

    def warn(self) -> None:
        if self.unparsed_docs:
            warnings.warn(Warnings.W001.format(n_docs=len(self.unparsed_docs)))


def _whole_doc_masks(builder: MaskBuilder, spans: Sequence[Span]) -> List[Optional[numpy.ndarray]]:
    """The token masks of the spans, sliced from the masks of their whole
    Docs computed together, where the builder is our SyntaxMask (not a
    subclass, whose __call__ may differ): a span's mask is the part of its
    Doc's mask between its tokens, since hops and neighbours are the Doc's.
    None for the spans of the Docs that path leaves to the builder's call.
    The Docs go in chunks of at most CHUNK_CELLS matrix cells, so that only
    a few Docs' matrices are held at a time."""
    masks: List[Optional[numpy.ndarray]] = [None] * len(spans)
    if type(builder) is not SyntaxMask:
        return masks
    spans_of: Dict[int, List[int]] = {}
    docs: List[Doc] = []
    for i, span in enumerate(spans):
        if id(span.doc) not in spans_of:
            spans_of[id(span.doc)] = []
            docs.append(span.doc)
        spans_of[id(span.doc)].append(i)
    for chunk in _chunks_by_cells(docs):
        for doc, doc_mask in zip(chunk, builder.whole_docs(chunk)):
            if doc_mask is None:
                continue
            for i in spans_of[id(doc)]:
                span = spans[i]
                is_whole = span.start == 0 and span.end == len(doc)
                masks[i] = doc_mask if is_whole else doc_mask[span.start : span.end, span.start : span.end].copy()
    return masks


def _chunks_by_cells(docs: Sequence[Doc]) -> Iterator[List[Doc]]:
    chunk: List[Doc] = []
    cells = 0
    for doc in docs:
        if chunk and cells + len(doc) ** 2 > CHUNK_CELLS:
            yield chunk
            chunk, cells = [], 0
        chunk.append(doc)
        cells += len(doc) ** 2
    if chunk:
        yield chunk


# 2**24 booleans: 16 MB of whole-Doc masks at a time.
CHUNK_CELLS = 2**24


def _punctuation_pieces(builder: MaskBuilder, piece_strings: Optional[Sequence[str]], n_pieces: int) -> Optional[numpy.ndarray]:
    """The pieces the builder's "authors" punctuation rule makes visible, or
    None when it has another rule."""
    if getattr(builder, "punct_rule", None) != "authors":
        return None
    if piece_strings is None:
        raise ValueError(
            f"The mask builder {builder!r} has the per-wordpiece \"authors\" punctuation rule, "
            "so build_syntax_inputs needs the wordpiece strings (piece_strings)."
        )
    return authors_punctuation_pieces(piece_strings, n_pieces)


def _checked(matrix: numpy.ndarray, builder: MaskBuilder, span: Span, kind: str) -> numpy.ndarray:
    expected_dtype = numpy.bool_ if kind == "mask" else numpy.integer
    if (
        not isinstance(matrix, numpy.ndarray)
        or not numpy.issubdtype(matrix.dtype, expected_dtype)
        or matrix.shape != (len(span), len(span))
    ):
        got = (
            f"an array of shape {matrix.shape} and dtype {matrix.dtype}"
            if isinstance(matrix, numpy.ndarray)
            else type(matrix).__name__
        )
        raise ValueError(Errors.E008.format(builder=repr(builder), got=got, n_tokens=len(span)))
    return matrix


def build_syntax_inputs(
    spans: Sequence[Span],
    align: Ragged,
    lengths: List[int],
    n_pieces: int,
    *,
    local: Optional[MaskBuilder] = None,
    guide: Optional[MaskBuilder] = None,
    parents: bool = False,
    on_missing_parse: str = "error",
    piece_strings: Optional[Sequence[Sequence[str]]] = None,
    warned: Optional[Set[str]] = None,
) -> SyntaxInputs:
    """The SyntaxInputs of a batch of spans.

    spans: the flat list of spans, in the order of the wordpiece batch.
    align: the token-to-wordpiece alignment of spacy-transformers (one row per
        distinct token, holding indices into the flattened, padded batch).
    lengths: wordpieces per span, padding excluded.
    n_pieces: the padded width of the wordpiece batch.
    local: the local branch's builder (a mask or a distance builder), or None.
    guide: SG-Net's mask builder, or None.
    parents: whether to compute LISA's parent targets.
    piece_strings: the wordpiece strings of each span (WordpieceBatch.strings),
        for builders with the per-piece "authors" punctuation rule.
    warned: the codes of the warnings the calling component has given
        already; warnings given once per component are added to it.
    """
    with shared_doc_trees() as batch:
        inputs = _build(
            spans, align, lengths, n_pieces, local, guide, parents, on_missing_parse, piece_strings
        )
        n_non_forest = batch.non_forest_docs()
    if n_non_forest and (warned is None or "SLA-W003" not in warned):
        warnings.warn(Warnings.W003.format(n_docs=n_non_forest))
        if warned is not None:
            warned.add("SLA-W003")
    return inputs


def _build(
    spans: Sequence[Span],
    align: Ragged,
    lengths: List[int],
    n_pieces: int,
    local: Optional[MaskBuilder],
    guide: Optional[MaskBuilder],
    parents: bool,
    on_missing_parse: str,
    piece_strings: Optional[Sequence[Sequence[str]]],
) -> SyntaxInputs:
    policy = _MissingParsePolicy(on_missing_parse)
    pairs = span_piece_pairs(spans, align, n_pieces) if spans else []
    n_spans = len(spans)
    inputs = SyntaxInputs(lengths=list(lengths))
    if local is not None:
        kind = builder_kind(local)
        if kind == "mask":
            inputs.local_mask = numpy.ones((n_spans, n_pieces, n_pieces), dtype=bool)
        else:
            # A bucket used by every pair of a row adds the same bias to the
            # whole row, which softmax ignores: "special" everywhere is
            # global attention.
            special = local.n_buckets - 1
            inputs.local_buckets = numpy.full((n_spans, n_pieces, n_pieces), special, dtype=numpy.int16)
        batched = _whole_doc_masks(local, spans)
        for i, span in enumerate(spans):
            matrix = batched[i] if batched[i] is not None else policy.call(local, span)
            if matrix is None:
                continue
            matrix = _checked(matrix, local, span, kind)
            punctuation = _punctuation_pieces(local, None if piece_strings is None else piece_strings[i], n_pieces)
            if kind == "mask":
                inputs.local_mask[i] = wordpiece_visibility(matrix, pairs[i], n_pieces)
                if punctuation is not None:
                    inputs.local_mask[i][:, punctuation] = True
            else:
                inputs.local_buckets[i] = expand_to_pieces(matrix.astype(numpy.int16), pairs[i], n_pieces, special)
                if punctuation is not None:
                    inputs.local_buckets[i][:, punctuation] = 0
    if guide is not None:
        inputs.guide_mask = numpy.ones((n_spans, n_pieces, n_pieces), dtype=bool)
        for i, span in enumerate(spans):
            matrix = policy.call(guide, span)
            if matrix is not None:
                inputs.guide_mask[i] = wordpiece_visibility(_checked(matrix, guide, span, "mask"), pairs[i], n_pieces)
    if parents:
        inputs.parent_targets = numpy.full((n_spans, n_pieces), IGNORED_TARGET, dtype=numpy.int64)
        for i, span in enumerate(spans):
            if policy.has_parse(span):
                inputs.parent_targets[i] = parent_pieces(span, pairs[i], n_pieces)
    policy.warn()
    return inputs
