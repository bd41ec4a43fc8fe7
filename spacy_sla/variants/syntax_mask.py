"""The SLA mask of Li et al. 2021 (spacy-sla.syntax_mask.v1) and the
variants init-config makes of it: `sla`, and the ablations
`sla-noneighbours` and `sla-nopunct`.

A boolean mask needs no module of its own in the layers: the local branch
applies it as it is.
"""
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy
from spacy.attrs import DEP, HEAD, IS_PUNCT, IS_SPACE
from spacy.tokens import Doc
from spacy.util import registry

from ..syntax.builders import DocLike, ParseReader, check_count, neighbour_table_rows, parsed_graph, span_bounds
from ..syntax.dependency_tree import NO_TOKEN, absolute_heads, forest_roots, padded_forest_reach
from ..syntax.doc_parses import DocParses
from ..syntax.punctuation import PunctRule, token_punctuation
from .registry import SLA_TRANSFORMER, register_variant

__all__ = ["SyntaxMask", "create_syntax_mask"]

BoolArray = numpy.ndarray
IntArray = numpy.ndarray


class SyntaxMask(ParseReader):
    """Syntax-aware local attention (Li et al. 2021): token j is visible from
    token i iff j is within `threshold` hops, in the undirected dependency
    graph of the Doc, of i or (with `neighbours`) of one of i's neighbours:
    the nearest words (not whitespace) on each side of i in the Doc. The
    punctuation rule (see syntax/punctuation.py) makes punctuation keys
    visible from every query: "authors" per wordpiece (applied where token
    masks become wordpiece masks), "spacy" per token, or "none".
    """

    name = "spacy-sla.syntax_mask.v1"

    def __init__(self, threshold: int = 3, punct_rule: Union[str, PunctRule] = "authors", neighbours: bool = True):
        self.threshold = check_count(self.name, "threshold", threshold, 0)
        self.punct_rule = PunctRule.parse(punct_rule, self.name)
        self.neighbours = neighbours

    def __repr__(self) -> str:
        return (f"SyntaxMask(threshold={self.threshold}, punct_rule={self.punct_rule.value!r}, "
                f"neighbours={self.neighbours})")

    def build(self, doclike: DocLike, parses: DocParses) -> BoolArray:
        doc, start, end = span_bounds(doclike)
        n_tokens = end - start
        if n_tokens == 0:
            return numpy.zeros((0, 0), dtype=bool)
        tokens = numpy.arange(start, end)
        if not self.neighbours:
            visible = parsed_graph(parses, doc, self).reach(tokens, tokens, self.threshold)
        else:
            # One row per distinct token of the union (the span's own tokens
            # and its outer neighbours), after an all-False row for "none".
            rows, left, own, right = neighbour_table_rows(doc, start, end)
            reach = numpy.zeros((len(rows) + 1, n_tokens), dtype=bool)
            reach[1:] = parsed_graph(parses, doc, self).reach(rows, tokens, self.threshold)
            visible = reach[left] | reach[own] | reach[right]
        punctuation = token_punctuation(doclike, self.punct_rule)
        if punctuation is not None:
            visible[:, punctuation] = True
        return visible

    def whole_docs(self, docs: Sequence[Doc]) -> List[Optional[BoolArray]]:
        """The masks of whole Docs, computed together: for each Doc what
        calling the mask on it gives, or None where this path does not apply
        (a Doc longer than MAX_WHOLE_DOC_TOKENS or with a tree longer than
        MAX_TREE_TOKENS, without a complete parse, or whose heads are not a
        forest): call the mask on those, which also raises or warns for them.

        Short sentences are the usual input, and Doc by Doc their masks cost
        more Python than arithmetic. Docs of up to MAX_BATCHED_TOKENS go in
        padded groups of similar length; longer Docs (articles, whose strided
        spans are slices of the Doc's mask) tree by tree, the trees of all of
        them in such groups, so that padding and memory stay small.

        A subclass with its own build gets None for every Doc: this path
        computes SyntaxMask's masks."""
        masks: List[Optional[BoolArray]] = [None] * len(docs)
        if type(self).build is not SyntaxMask.build:
            return masks
        short = [i for i, doc in enumerate(docs) if 0 < len(doc) <= MAX_BATCHED_TOKENS]
        for group in _similar_length_groups(short, [len(doc) for doc in docs]):
            for i, mask in zip(group, self._padded_masks([docs[i] for i in group])):
                masks[i] = mask
        long = [i for i, doc in enumerate(docs) if MAX_BATCHED_TOKENS < len(doc) <= MAX_WHOLE_DOC_TOKENS]
        for i, mask in zip(long, self._masks_by_tree([docs[i] for i in long])):
            masks[i] = mask
        return masks

    def _padded_masks(self, docs: Sequence[Doc]) -> List[Optional[BoolArray]]:
        width = max(len(doc) for doc in docs)
        heads = numpy.full((len(docs), width), NO_TOKEN, dtype=numpy.int64)
        is_space = numpy.ones((len(docs), width), dtype=bool)  # padding is never a neighbour
        is_punct = numpy.zeros((len(docs), width), dtype=bool)
        complete = numpy.zeros(len(docs), dtype=bool)
        for row, doc in enumerate(docs):
            parse = _DocArrays(doc)
            heads[row, : len(doc)] = parse.heads
            complete[row] = parse.complete
            is_space[row, : len(doc)] = parse.is_space
            is_punct[row, : len(doc)] = parse.is_punct
        reach, is_forest = padded_forest_reach(heads, self.threshold)
        visible = self._visible(reach, is_space, is_punct)
        return [
            visible[row, : len(doc), : len(doc)] if complete[row] and is_forest[row] else None
            for row, doc in enumerate(docs)
        ]

    def _visible(self, reach: BoolArray, is_space: BoolArray, is_punct: BoolArray) -> BoolArray:
        """The token masks of a batch of Docs from their reach."""
        if self.neighbours:
            reach = _with_neighbour_rows(reach, ~is_space)
        if self.punct_rule is PunctRule.SPACY:
            reach |= is_punct[:, None, :]
        return reach

    def _masks_by_tree(self, docs: Sequence[Doc]) -> List[Optional[BoolArray]]:
        """Whole-Doc masks of long Docs: hops never leave a tree, so the
        reach of each tree is computed on its own, the trees of all the
        Docs in padded groups, and put back at the tokens' positions."""
        parses: List[Optional[_DocArrays]] = []
        reach: Dict[int, BoolArray] = {}  # of each Doc this path answers
        trees: List[Tuple[int, IntArray, IntArray]] = []  # (Doc, its heads, the tree's tokens in order)
        for doc_index, doc in enumerate(docs):
            parse = _DocArrays(doc)
            tokens_by_tree = parse.trees() if parse.complete else None
            if tokens_by_tree is None or max(len(tokens) for tokens in tokens_by_tree) > MAX_TREE_TOKENS:
                parses.append(None)
                continue
            parses.append(parse)
            reach[doc_index] = numpy.zeros((len(doc), len(doc)), dtype=bool)
            trees.extend((doc_index, parse.heads, tokens) for tokens in tokens_by_tree)
        for group in _similar_length_groups(range(len(trees)), [len(tokens) for _, _, tokens in trees]):
            width = max(len(trees[i][2]) for i in group)
            heads = numpy.full((len(group), width), NO_TOKEN, dtype=numpy.int64)
            for row, i in enumerate(group):
                _, doc_heads, tokens = trees[i]
                tree_heads = doc_heads[tokens]
                # the head's position within the tree's (sorted) tokens
                heads[row, : len(tokens)] = numpy.where(
                    tree_heads == NO_TOKEN, NO_TOKEN, numpy.searchsorted(tokens, tree_heads)
                )
            tree_reach, _ = padded_forest_reach(heads, self.threshold)
            for row, i in enumerate(group):
                doc_index, _, tokens = trees[i]
                reach[doc_index][numpy.ix_(tokens, tokens)] = tree_reach[row, : len(tokens), : len(tokens)]
        return [
            None if parse is None else self._visible(reach[i][None], parse.is_space[None], parse.is_punct[None])[0]
            for i, parse in enumerate(parses)
        ]


class _DocArrays:
    """What the batched masks read of a Doc, in one to_array call."""

    def __init__(self, doc: Doc):
        values = doc.to_array([HEAD, DEP, IS_SPACE, IS_PUNCT])
        self.heads = absolute_heads(values[:, 0])
        self.complete = bool(values[:, 1].all())
        self.is_space = values[:, 2].astype(bool)
        self.is_punct = values[:, 3].astype(bool)

    def trees(self) -> Optional[List[IntArray]]:
        """The tokens of each tree in increasing order, or None where the
        heads are not a forest."""
        roots = forest_roots(self.heads)
        if roots is None:
            return None
        tokens = numpy.argsort(roots, kind="stable")
        return numpy.split(tokens, numpy.flatnonzero(numpy.diff(roots[tokens])) + 1)


def _similar_length_groups(items: Sequence[int], lengths: Sequence[int]) -> Iterator[List[int]]:
    """The items in groups of similar length: at most BATCHED_DOCS, and at
    most BATCHED_CELLS padded cells of a (group, width, width) array."""
    group: List[int] = []
    for item in sorted(items, key=lambda item: lengths[item]):
        if group and (len(group) == BATCHED_DOCS or (len(group) + 1) * lengths[item] ** 2 > BATCHED_CELLS):
            yield group
            group = []
        group.append(item)
    if group:
        yield group


# The batched path holds a (group, width, width) array per step: Docs up to
# MAX_BATCHED_TOKENS go together, at most BATCHED_DOCS and BATCHED_CELLS
# cells at a time; a longer Doc tree by tree, with its (n, n) matrix, up to
# MAX_WHOLE_DOC_TOKENS (a 16 MB matrix) and trees of MAX_TREE_TOKENS; the
# rest span by span.
MAX_BATCHED_TOKENS = 128
BATCHED_DOCS = 64
BATCHED_CELLS = 2**21
MAX_WHOLE_DOC_TOKENS = 4096
MAX_TREE_TOKENS = 512


def _with_neighbour_rows(reach: BoolArray, is_word: BoolArray) -> BoolArray:
    """Each row OR the rows of the nearest word on its left and on its right
    within the Doc (see word_neighbours; none at the Doc's ends), for a batch
    of whole Docs."""
    n_docs, width = is_word.shape
    positions = numpy.arange(width)
    last_word = numpy.maximum.accumulate(numpy.where(is_word, positions, -1), axis=1)
    next_word = numpy.minimum.accumulate(numpy.where(is_word, positions, width)[:, ::-1], axis=1)[:, ::-1]
    left = numpy.full((n_docs, width), -1, dtype=numpy.int64)
    left[:, 1:] = last_word[:, :-1]
    right = numpy.full((n_docs, width), width, dtype=numpy.int64)
    right[:, :-1] = next_word[:, 1:]
    # One all-False row past the tokens stands for "no neighbour".
    padded = numpy.zeros((n_docs, width + 1, width), dtype=bool)
    padded[:, :width] = reach
    left = numpy.where(left < 0, width, left)
    docs = numpy.arange(n_docs)[:, None]
    return reach | padded[docs, left] | padded[docs, right]


@registry.misc("spacy-sla.syntax_mask.v1")
def create_syntax_mask(threshold: int = 3, punct_rule: str = "authors", neighbours: bool = True) -> SyntaxMask:
    """The SLA mask: tokens within `threshold` dependency hops of a token or
    of its neighbouring words, and punctuation by `punct_rule` ("authors",
    "spacy" or "none")."""
    return SyntaxMask(threshold=threshold, punct_rule=punct_rule, neighbours=neighbours)


def _mask_block(punct_rule: str, neighbours: str) -> str:
    return f"""
[components.transformer.model.mask]
@misc = "spacy-sla.syntax_mask.v1"
threshold = 3
punct_rule = "{punct_rule}"
neighbours = {neighbours}
"""


register_variant("sla", "Syntax-aware local attention (Li et al. 2021) in every layer.",
                 SLA_TRANSFORMER + _mask_block("authors", "true"))
register_variant("sla-noneighbours", "SLA ablation: without the neighbour union (token i sees vis(i) only).",
                 SLA_TRANSFORMER + _mask_block("authors", "false"))
register_variant("sla-nopunct", "SLA ablation: without the punctuation rule.",
                 SLA_TRANSFORMER + _mask_block("none", "true"))
