"""SyntaxInputs, a batch's syntax at wordpiece level, and its making from
the parse of each span (build_syntax_inputs): each builder's token matrix of
each span, checked and expanded to wordpieces (wordpieces.py), with the
missing-parse policy applied. A builder with the "authors" punctuation rule
makes punctuation pieces visible from every query (distance 0) here, since
that rule is decided per piece.
"""
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, Iterator, List, Optional, Protocol, Sequence, Set, runtime_checkable

import numpy
from spacy.tokens import Doc, Span
from thinc.types import Ragged

from ..data_classes import IGNORED_TARGET
from ..errors import Errors, Warnings
from .builders import BuilderKind, DistanceBuilder, MaskBuilder, MissingParseError, build_matrix, builder_punct_rule
from .doc_parses import FLAT_TREE_TOKENS, DocParses
from .punctuation import PunctRule, authors_punctuation_pieces
from .wordpieces import expand_to_pieces, parent_pieces, span_piece_pairs, wordpiece_visibility

if TYPE_CHECKING:
    import torch

__all__ = ["ON_MISSING_PARSE", "SyntaxInputs", "WholeDocBuilder", "build_syntax_inputs", "check_on_missing_parse"]

ON_MISSING_PARSE = ("error", "global")
_INPUT_NAMES = ("local_mask", "local_buckets", "guide_mask", "parent_attention_targets")


@dataclass
class SyntaxInputs:
    """The syntax inputs of a padded batch of transformer spans, at wordpiece
    level; each is None when the model does not use it.

    local_mask: bool (n_spans, n_pieces, n_pieces), True where piece q of
        span s may attend to piece k in the local branch.
    local_buckets: int16 (n_spans, n_pieces, n_pieces), the tree-distance
        bucket of each piece pair, for a learned local bias.
    guide_mask: bool (n_spans, n_pieces, n_pieces), SG-Net's mask.
    parent_attention_targets: int64 (n_spans, n_pieces), the piece each piece's token
        depends on (LISA), IGNORED_TARGET where there is none.

    Special pieces ([CLS], [SEP], ...) see and are seen by everything (their
    own bucket for distances); padding is left to the transformer's ordinary
    attention mask, which every branch applies.
    """

    lengths: List[int]  # wordpieces per span, padding excluded
    local_mask: Optional[numpy.ndarray] = None
    local_buckets: Optional[numpy.ndarray] = None
    guide_mask: Optional[numpy.ndarray] = None
    parent_attention_targets: Optional[numpy.ndarray] = None

    def __post_init__(self) -> None:
        n_spans = len(self.lengths)
        for name in _INPUT_NAMES:
            array = getattr(self, name)
            if array is not None and (array.shape[0] != n_spans or (array.ndim == 3 and array.shape[1] != array.shape[2])):
                raise ValueError(
                    f"SyntaxInputs.{name} must have one (n_pieces, n_pieces) matrix (or row, for "
                    f"parent_attention_targets) per span; got shape {array.shape} for {n_spans} spans."
                )

    def __len__(self) -> int:
        return len(self.lengths)

    def local_matrices(self) -> List[numpy.ndarray]:
        """The local mask (or buckets) of every span, padding excluded."""
        local = self.local_mask if self.local_mask is not None else self.local_buckets
        if local is None:
            return []
        return [local[i, :n, :n] for i, n in enumerate(self.lengths)]

    def locally_restricted(self) -> Optional[numpy.ndarray]:
        """bool (n_spans,): whether the local mask hides some piece from some
        piece of the span (padding excluded: every branch hides it anyway);
        None without a boolean local mask. Where it hides nothing, the local
        branch computes exactly the global attention, which prediction need
        not compute twice (layers/prediction.py)."""
        if self.local_mask is None:
            return None
        restricted = (not self.local_mask[i, :n, :n].all() for i, n in enumerate(self.lengths))
        return numpy.fromiter(restricted, dtype=bool, count=len(self))

    def to_torch(self, device: "torch.device") -> Dict[str, Optional["torch.Tensor"]]:
        """The forward arguments of SyntaxAwareTransformer: one host-to-device
        copy per input and batch; every layer reuses the tensors. The
        per-span flags of locally_restricted stay on the CPU: the forward
        pass decides from them, without waiting for the device, which rows
        need a local branch, and copies only their index."""
        # Imported here: the masks and their wordpiece expansion need numpy
        # only, and so does everything else in syntax/.
        import torch

        tensors: Dict[str, Optional["torch.Tensor"]] = {}
        for name in _INPUT_NAMES:
            array = getattr(self, name)
            if array is None:
                tensors[name] = None
            else:
                tensor = torch.from_numpy(numpy.ascontiguousarray(array)).to(device)
                tensors[name] = tensor.long() if name == "local_buckets" else tensor
        restricted = self.locally_restricted()
        tensors["local_restricted"] = None if restricted is None else torch.from_numpy(restricted)
        return tensors


@runtime_checkable
class WholeDocBuilder(Protocol):
    """A mask builder that computes the masks of whole Docs together, where
    calling it span by span would cost more Python than arithmetic (the SLA
    mask): for each Doc its mask, or None where the builder's own call must
    answer."""

    def whole_docs(self, docs: Sequence[Doc]) -> List[Optional[numpy.ndarray]]: ...


def check_on_missing_parse(value: str) -> str:
    if value not in ON_MISSING_PARSE:
        raise ValueError(Errors.E004.format(value=value))
    return value


class _MissingParsePolicy:
    """Applies on_missing_parse to the builders' calls and warns once per
    batch; the builders read the parses of the batch's Docs from `parses`."""

    def __init__(self, on_missing_parse: str, parses: DocParses):
        self.on_missing_parse = on_missing_parse
        self.parses = parses
        self.unparsed_docs: Set[int] = set()

    def call(self, builder: MaskBuilder, span: Span) -> Optional[numpy.ndarray]:
        """The builder's matrix, or None for an unparsed Doc under "global"."""
        try:
            return build_matrix(builder, span, self.parses)
        except MissingParseError:
            if self.on_missing_parse == "error":
                raise
            self.unparsed_docs.add(id(span.doc))
            return None

    def has_parse(self, span: Span) -> bool:
        if len(span) == 0 or self.parses.has_complete_parse(span.doc):
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
    Docs computed together, where the builder can (a WholeDocBuilder): a
    span's mask is the part of its Doc's mask between its tokens, since
    hops and neighbours are the Doc's.
    None for the spans of the Docs that path leaves to the builder's call.
    The Docs go in chunks of at most CHUNK_CELLS matrix cells, so that only
    a few Docs' matrices are held at a time."""
    masks: List[Optional[numpy.ndarray]] = [None] * len(spans)
    if not isinstance(builder, WholeDocBuilder):
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


def _punctuation_pieces(
    builder: MaskBuilder, rule: PunctRule, piece_strings: Optional[Sequence[str]], n_pieces: int
) -> Optional[numpy.ndarray]:
    """The pieces the builder's punctuation rule makes visible per
    wordpiece (AUTHORS), or None under another rule."""
    if rule is not PunctRule.AUTHORS:
        return None
    if piece_strings is None:
        raise ValueError(
            f"The mask builder {builder!r} has the per-wordpiece \"authors\" punctuation rule, "
            "so build_syntax_inputs needs the wordpiece strings (piece_strings)."
        )
    return authors_punctuation_pieces(piece_strings, n_pieces)


def _checked(matrix: numpy.ndarray, builder: MaskBuilder, span: Span, kind: BuilderKind) -> numpy.ndarray:
    expected_dtype = numpy.bool_ if kind is BuilderKind.MASK else numpy.integer
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
    # Each Doc's parse is read once for all the spans and builders of the batch.
    parses = DocParses()
    policy = _MissingParsePolicy(on_missing_parse, parses)
    inputs = _build(spans, align, lengths, n_pieces, local, guide, parents, policy, piece_strings)
    n_non_forest = parses.non_forest_docs()
    # once the component has warned of a degenerate parse, its batches are not checked again
    n_flat_docs, n_flat_trees = (0, 0) if warned is not None and "SLA-W016" in warned else \
        parses.flat_parses({id(span.doc): span.doc for span in spans}.values())
    if n_non_forest:
        _warn_once("SLA-W003", Warnings.W003.format(n_docs=n_non_forest), warned)
    if n_flat_docs:
        _warn_once("SLA-W016", Warnings.W016.format(n_docs=n_flat_docs, n_trees=n_flat_trees,
                                                    min_tokens=FLAT_TREE_TOKENS), warned)
    return inputs


def _warn_once(code: str, message: str, warned: Optional[Set[str]]) -> None:
    if warned is None or code not in warned:
        warnings.warn(message)
        if warned is not None:
            warned.add(code)


def _build(
    spans: Sequence[Span],
    align: Ragged,
    lengths: List[int],
    n_pieces: int,
    local: Optional[MaskBuilder],
    guide: Optional[MaskBuilder],
    parents: bool,
    policy: _MissingParsePolicy,
    piece_strings: Optional[Sequence[Sequence[str]]],
) -> SyntaxInputs:
    pairs = span_piece_pairs(spans, align, n_pieces) if spans else []
    n_spans = len(spans)
    inputs = SyntaxInputs(lengths=list(lengths))
    if local is not None:
        rule = builder_punct_rule(local)
        # A bucket used by every pair of a row adds the same bias to the
        # whole row, which softmax ignores: "special" everywhere is global
        # attention.
        special = local.n_buckets - 1 if isinstance(local, DistanceBuilder) else None
        if special is None:
            local_mask = inputs.local_mask = numpy.ones((n_spans, n_pieces, n_pieces), dtype=bool)
        else:
            local_buckets = inputs.local_buckets = numpy.full((n_spans, n_pieces, n_pieces), special, dtype=numpy.int16)
        batched = _whole_doc_masks(local, spans)
        for i, span in enumerate(spans):
            matrix = batched[i] if batched[i] is not None else policy.call(local, span)
            if matrix is None:
                continue
            matrix = _checked(matrix, local, span, BuilderKind.MASK if special is None else BuilderKind.DISTANCE)
            punctuation = _punctuation_pieces(local, rule, None if piece_strings is None else piece_strings[i], n_pieces)
            if special is None:
                local_mask[i] = wordpiece_visibility(matrix, pairs[i], n_pieces)
                if punctuation is not None:
                    local_mask[i][:, punctuation] = True
            else:
                local_buckets[i] = expand_to_pieces(matrix.astype(numpy.int16), pairs[i], n_pieces, special)
                if punctuation is not None:
                    local_buckets[i][:, punctuation] = 0
    if guide is not None:
        guide_mask = inputs.guide_mask = numpy.ones((n_spans, n_pieces, n_pieces), dtype=bool)
        for i, span in enumerate(spans):
            matrix = policy.call(guide, span)
            if matrix is not None:
                guide_mask[i] = wordpiece_visibility(_checked(matrix, guide, span, BuilderKind.MASK), pairs[i], n_pieces)
    if parents:
        parent_attention_targets = inputs.parent_attention_targets = numpy.full((n_spans, n_pieces), IGNORED_TARGET, dtype=numpy.int64)
        for i, span in enumerate(spans):
            if policy.has_parse(span):
                parent_attention_targets[i] = parent_pieces(span, pairs[i], n_pieces, policy.parses)
    policy.warn()
    return inputs
