"""Vectorised distances in a dependency forest.

A parse is a forest (one tree per sentence). Every path between two tokens of
a tree goes up from the first token to their lowest common ancestor and down
to the second one, so the tree distance is

    D(i, j) = min { u + k : up(i, u) == up(j, k) }

where up(t, u) is the u-th ancestor of t. With the ancestor table of a Doc
(computed once, O(n * depth)), the distances of any block of rows and columns
are a few vectorised comparisons, with no per-token graph search and no
n_doc x n_doc matrix.
"""
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Dict, Iterator, Optional, Tuple, Union

import numpy
from spacy.attrs import HEAD
from spacy.tokens import Doc, Span

NO_TOKEN = -1

IntArray = numpy.ndarray
BoolArray = numpy.ndarray


def head_indices(doclike: Union[Doc, Span]) -> IntArray:
    """Absolute head index of every token of the whole Doc; roots get NO_TOKEN.

    The Doc's forest is used even for a Span, because the paths between two
    tokens of the span may leave it.
    """
    doc = doclike.doc if isinstance(doclike, Span) else doclike
    relative = doc.to_array([HEAD]).astype(numpy.int64).reshape(-1)
    heads = numpy.arange(len(doc), dtype=numpy.int64) + relative
    heads[relative == 0] = NO_TOKEN
    return heads


def tree_roots(heads: IntArray) -> IntArray:
    """The root of every token's tree (one tree per sentence), by pointer
    jumping: O(n log depth), vectorised."""
    roots = numpy.where(heads == NO_TOKEN, numpy.arange(heads.shape[0]), heads)
    while True:
        jumped = roots[roots]
        if numpy.array_equal(jumped, roots):
            return roots
        roots = jumped


def ancestor_table(heads: IntArray, depth: int) -> IntArray:
    """Row u holds the u-th ancestor of every token (row 0: the token itself),
    or NO_TOKEN where the tree is less deep, for u = 0..depth."""
    n_tokens = heads.shape[0]
    table = numpy.full((depth + 1, n_tokens), NO_TOKEN, dtype=numpy.int64)
    table[0] = numpy.arange(n_tokens)
    # A trailing NO_TOKEN slot lets NO_TOKEN index itself: no branch per step.
    parent = numpy.append(heads, NO_TOKEN)
    for u in range(1, depth + 1):
        table[u] = parent[table[u - 1]]
    return table


def _meeting_points(ancestors: IntArray, rows: IntArray, cols: IntArray, max_distance: int):
    """For every (u, k) with u + k <= max_distance, shortest first: whether
    u steps up from each row token and k steps up from each column token end
    on the same token, as one (n_pairs, n_rows, n_cols) comparison."""
    ups, downs = zip(*[(u, total - u) for total in range(max_distance + 1) for u in range(total + 1)])
    ups, downs = numpy.array(ups), numpy.array(downs)
    up_rows = ancestors[ups][:, rows]
    meets = (up_rows[:, :, None] == ancestors[downs][:, cols][:, None, :]) & (up_rows != NO_TOKEN)[:, :, None]
    return meets, (ups + downs).astype(numpy.int16)


def tree_reach(ancestors: IntArray, rows: IntArray, cols: IntArray, threshold: int) -> BoolArray:
    """[r, c] is True iff the tree distance of the tokens is <= threshold."""
    meets, _ = _meeting_points(ancestors, rows, cols, threshold)
    return meets.any(axis=0)


def tree_distances(
    ancestors: IntArray, rows: IntArray, cols: IntArray, max_distance: int
) -> IntArray:
    """Tree distance between every row token and column token, for distances
    up to max_distance; farther pairs and pairs in different trees get
    max_distance + 1.

    ancestors must have at least max_distance + 1 rows (ancestor_table with
    depth >= max_distance).
    """
    unreachable = numpy.int16(max_distance + 1)
    meets, lengths = _meeting_points(ancestors, rows, cols, max_distance)
    if meets.size == 0:
        return numpy.full((len(rows), len(cols)), unreachable, dtype=numpy.int16)
    return numpy.where(meets, lengths[:, None, None], unreachable).min(axis=0)


def ancestor_or_self(ancestors: IntArray, rows: IntArray, cols: IntArray) -> BoolArray:
    """[r, c] is True iff column token c is row token r or one of r's
    ancestors (the SG-Net mask), given the full-depth ancestor table."""
    return (ancestors[:, rows][:, :, None] == cols[None, None, :]).any(axis=0)


def tree_depth(heads: IntArray) -> int:
    """The largest number of steps from a token up to its root."""
    parent = numpy.append(heads, NO_TOKEN)
    current = numpy.arange(heads.shape[0], dtype=numpy.int64)
    # A forest over n tokens is at most n - 1 deep; the bound also stops a
    # malformed (cyclic) head array.
    for depth in range(heads.shape[0] + 1):
        current = parent[current]
        current = current[current != NO_TOKEN]
        if current.size == 0:
            return depth
    raise ValueError("The head indices contain a cycle.")


@dataclass
class DocTrees:
    """What the mask builders need of a Doc's parse, computed once."""

    heads: IntArray
    roots: IntArray
    ancestors: IntArray  # ancestor_table(heads, depth)

    @property
    def depth(self) -> int:
        return self.ancestors.shape[0] - 1


_BATCH_TREES: ContextVar[Optional[Dict[Tuple[int, int], DocTrees]]] = ContextVar("sla_batch_trees", default=None)


@contextmanager
def shared_doc_trees() -> Iterator[None]:
    """Within the block, doc_trees computes each Doc's trees once, however
    many spans and builders ask (the Docs stay alive for the whole block, so
    their ids cannot be reused)."""
    token = _BATCH_TREES.set({})
    try:
        yield
    finally:
        _BATCH_TREES.reset(token)


def doc_trees(doc: Doc, depth: Optional[int]) -> DocTrees:
    """The Doc's heads, roots and ancestor table up to `depth` steps (None:
    the whole depth of its trees)."""
    cache = _BATCH_TREES.get()
    key = (id(doc), depth)
    if cache is not None and key in cache:
        return cache[key]
    heads = head_indices(doc)
    trees = DocTrees(heads, tree_roots(heads), ancestor_table(heads, tree_depth(heads) if depth is None else depth))
    if cache is not None:
        cache[key] = trees
    return trees


def per_tree(roots: IntArray, rows: IntArray, cols: IntArray) -> Iterator[Tuple[IntArray, IntArray]]:
    """Positions in rows and in cols of the tokens of each tree that both
    contain: distances are only ever computed within a sentence."""
    row_roots, col_roots = roots[rows], roots[cols]
    first = row_roots[0] if len(row_roots) else None
    if first is not None and (row_roots == first).all() and (col_roots == first).all():
        # one sentence: the usual case for short inputs
        yield numpy.arange(len(rows)), numpy.arange(len(cols))
        return
    for root in numpy.intersect1d(row_roots, col_roots):
        yield numpy.flatnonzero(row_roots == root), numpy.flatnonzero(col_roots == root)


def blockwise_reach(trees: DocTrees, rows: IntArray, cols: IntArray, threshold: int) -> BoolArray:
    """tree_reach, computed per sentence."""
    reach = numpy.zeros((len(rows), len(cols)), dtype=bool)
    for row_positions, col_positions in per_tree(trees.roots, rows, cols):
        reach[numpy.ix_(row_positions, col_positions)] = tree_reach(
            trees.ancestors, rows[row_positions], cols[col_positions], threshold
        )
    return reach


def blockwise_distances(trees: DocTrees, rows: IntArray, cols: IntArray, max_distance: int) -> IntArray:
    """tree_distances, computed per sentence."""
    distances = numpy.full((len(rows), len(cols)), max_distance + 1, dtype=numpy.int16)
    for row_positions, col_positions in per_tree(trees.roots, rows, cols):
        distances[numpy.ix_(row_positions, col_positions)] = tree_distances(
            trees.ancestors, rows[row_positions], cols[col_positions], max_distance
        )
    return distances
