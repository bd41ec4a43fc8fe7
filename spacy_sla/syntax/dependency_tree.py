"""Hop distances in a Doc's dependency graph, for any head structure.

The local masks use the hop distance between two tokens in the undirected
graph whose edges join each token to its head (a root, whose head is itself,
has no edge): the authors' breadth-first search. Every head array a Doc can
hold is valid input, cycles included.

A parse is nearly always a forest (one tree per sentence), and `Forest`
answers it vectorised: every path between two tokens of a tree goes up from
the first token to their lowest common ancestor and down to the second one,
so the distance is

    D(i, j) = min { u + k : up(i, u) == up(j, k) }

where up(t, u) is the u-th ancestor of t. With the ancestor table of a Doc
(computed once, O(n * depth)), the distances of any block of rows and columns
are a few vectorised comparisons, with no graph search and no
n_doc x n_doc matrix.

Anything else (head cycles, which spaCy's parser leaves in Docs that already
carried a parse, or hand-built Docs) is detected cheaply (pointer jumping
converges within log2(n) + 2 rounds on a forest, never on a cycle) and
answered exactly by `GeneralGraph`, a bounded breadth-first search. Every
loop here has an explicit bound; exceeding it raises [SLA-E013] instead of
hanging. A Doc's parse is read and its graph built once for many spans in
doc_parses.py.
"""
import math
from typing import Any, Iterator, List, Optional, Tuple, Union, cast

import numpy
from spacy.attrs import HEAD
from spacy.tokens import Doc, Span
from thinc.types import Ints2d

from ..errors import Errors

__all__ = ["NO_TOKEN", "DocGraph", "Forest", "GeneralGraph", "absolute_heads", "ancestor_table", "as_ints2d", "build_doc_graph",
           "forest_roots", "head_indices", "padded_forest_reach", "span_array", "tree_distances", "tree_roots"]

NO_TOKEN = -1

IntArray = numpy.ndarray
BoolArray = numpy.ndarray


def head_indices(doclike: Union[Doc, Span]) -> IntArray:
    """Absolute head index of every token of the whole Doc; roots (tokens
    that are their own head) get NO_TOKEN.

    The Doc's graph is used even for a Span, because the paths between two
    tokens of the span may leave it.
    """
    doc = doclike.doc if isinstance(doclike, Span) else doclike
    return absolute_heads(doc.to_array([HEAD]).reshape(-1))


def span_array(doclike: Union[Doc, Span], attributes: List[int]) -> numpy.ndarray:
    """doclike.to_array(attributes), (n_tokens, n_attributes), for a Doc or a Span alike."""
    # spaCy's type stub of Span lacks to_array (spacy/tokens/span.pyx has it)
    values: numpy.ndarray = cast(Any, doclike).to_array(attributes)
    return values


def as_ints2d(values: numpy.ndarray) -> Ints2d:
    """An (n_tokens, n_attributes) array for Doc.from_array, whose stub names thinc's Ints2d."""
    return cast(Ints2d, values)


def absolute_heads(relative: numpy.ndarray) -> IntArray:
    # spaCy exports the relative offsets as uint64: the cast makes them signed again
    relative = relative.astype(numpy.int64)
    heads: IntArray = numpy.arange(len(relative), dtype=numpy.int64) + relative
    heads[relative == 0] = NO_TOKEN
    return heads


def _jump_bound(n_tokens: int) -> int:
    """Rounds of pointer jumping after which every pointer of a forest of
    n_tokens has reached its root (depth <= n - 1 < 2 ** rounds), plus one
    round to see that nothing changes any more."""
    return math.ceil(math.log2(max(n_tokens, 1))) + 2


def forest_roots(heads: IntArray) -> Optional[IntArray]:
    """The root of every token's tree if the heads form a forest, else None.

    Pointer jumping: O(n log depth), vectorised. On a forest it converges
    within _jump_bound rounds with every pointer on a real root; with a cycle
    it either never converges or settles on tokens of the cycle, which have
    a head."""
    n_tokens = heads.shape[0]
    roots = numpy.where(heads == NO_TOKEN, numpy.arange(n_tokens), heads)
    for _ in range(_jump_bound(n_tokens)):
        jumped = roots[roots]
        if numpy.array_equal(jumped, roots):
            break
        roots = jumped
    else:
        return None
    if n_tokens and (heads[roots] != NO_TOKEN).any():
        return None
    return roots


def tree_roots(heads: IntArray) -> IntArray:
    """The root of every token's tree; heads must form a forest."""
    roots = forest_roots(heads)
    if roots is None:
        raise ValueError(Errors.E013.format(what="tree_roots", bound=_jump_bound(heads.shape[0])))
    return roots


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


def _meeting_points(
    ancestors: IntArray, rows: IntArray, cols: IntArray, max_distance: int
) -> Tuple[BoolArray, IntArray]:
    """For every (u, k) with u + k <= max_distance, shortest first: whether
    u steps up from each row token and k steps up from each column token end
    on the same token, as one (n_pairs, n_rows, n_cols) comparison; and the
    length u + k of each."""
    steps = [(u, total - u) for total in range(max_distance + 1) for u in range(total + 1)]
    ups = numpy.array([up for up, _ in steps], dtype=numpy.int64)
    downs = numpy.array([down for _, down in steps], dtype=numpy.int64)
    # Select the tokens before the steps: the arrays stay the size of the
    # block, whatever the length of the Doc.
    up_rows = ancestors[: max_distance + 1, rows][ups]
    down_cols = ancestors[: max_distance + 1, cols][downs]
    meets = (up_rows[:, :, None] == down_cols[:, None, :]) & (up_rows != NO_TOKEN)[:, :, None]
    return meets, (ups + downs).astype(numpy.int16)


def tree_reach(ancestors: IntArray, rows: IntArray, cols: IntArray, threshold: int) -> BoolArray:
    """[r, c] is True iff the tree distance of the tokens is <= threshold."""
    meets, _ = _meeting_points(ancestors, rows, cols, threshold)
    reach: BoolArray = meets.any(axis=0).astype(bool, copy=False)
    return reach


def tree_distances(ancestors: IntArray, rows: IntArray, cols: IntArray, max_distance: int) -> IntArray:
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
    distances: IntArray = numpy.where(meets, lengths[:, None, None], unreachable).min(axis=0)
    return distances


def _positions_in(tokens: IntArray, cols: IntArray) -> IntArray:
    """The position of each token in cols, or -1 where it is not a column:
    O(len(tokens) log len(cols)), no array of the Doc's length."""
    if len(cols) == 0:
        return numpy.full(len(tokens), -1, dtype=numpy.int64)
    order = numpy.argsort(cols, kind="stable")
    sorted_cols = cols[order]
    found = numpy.minimum(numpy.searchsorted(sorted_cols, tokens), len(cols) - 1)
    return numpy.where(sorted_cols[found] == tokens, order[found], -1)


class Forest:
    """A parse whose heads form a forest: vectorised distances from ancestor
    tables (built lazily, once per depth), ancestors from preorder
    intervals."""

    is_forest = True

    def __init__(self, heads: IntArray, roots: IntArray):
        self.heads = heads
        self.roots = roots
        self._ancestors: Optional[IntArray] = None
        self._intervals: Optional[Tuple[IntArray, IntArray]] = None

    def ancestors(self, depth: int) -> IntArray:
        """The ancestor table with at least depth + 1 rows."""
        # Outside a batch, threads share the graph of a Doc (DocParses): the
        # table is returned from a local, since another thread may store a
        # shallower one in the meantime (which only costs a later rebuild).
        table = self._ancestors
        if table is None or table.shape[0] < depth + 1:
            table = ancestor_table(self.heads, depth)
            self._ancestors = table
        return table

    def per_tree(self, rows: IntArray, cols: IntArray) -> Iterator[Tuple[IntArray, IntArray]]:
        """Positions in rows and in cols of the tokens of each tree that both
        contain: distances are only ever computed within a sentence."""
        row_roots, col_roots = self.roots[rows], self.roots[cols]
        first = row_roots[0] if len(row_roots) else None
        if first is not None and (row_roots == first).all() and (col_roots == first).all():
            # one sentence: the usual case for short inputs
            yield numpy.arange(len(rows)), numpy.arange(len(cols))
            return
        for root in numpy.intersect1d(row_roots, col_roots):
            yield numpy.flatnonzero(row_roots == root), numpy.flatnonzero(col_roots == root)

    def reach(self, rows: IntArray, cols: IntArray, threshold: int) -> BoolArray:
        reach = numpy.zeros((len(rows), len(cols)), dtype=bool)
        ancestors = self.ancestors(threshold)
        for row_positions, col_positions in self.per_tree(rows, cols):
            reach[numpy.ix_(row_positions, col_positions)] = tree_reach(
                ancestors, rows[row_positions], cols[col_positions], threshold
            )
        return reach

    def distances(self, rows: IntArray, cols: IntArray, max_distance: int) -> IntArray:
        distances = numpy.full((len(rows), len(cols)), max_distance + 1, dtype=numpy.int16)
        ancestors = self.ancestors(max_distance)
        for row_positions, col_positions in self.per_tree(rows, cols):
            distances[numpy.ix_(row_positions, col_positions)] = tree_distances(
                ancestors, rows[row_positions], cols[col_positions], max_distance
            )
        return distances

    def preorder_intervals(self) -> Tuple[IntArray, IntArray]:
        """(first, end) per token: its subtree is the tokens whose preorder
        number lies in [first[t], end[t]). O(n) whatever the depth, where a
        full ancestor table would be O(n * depth)."""
        intervals = self._intervals
        if intervals is None:
            intervals = self._intervals = _preorder_intervals(self.heads)
        return intervals

    def ancestor_or_self(self, rows: IntArray, cols: IntArray) -> BoolArray:
        first, end = self.preorder_intervals()
        row_first = first[rows][:, None]
        visible: BoolArray = (first[cols][None, :] <= row_first) & (row_first < end[cols][None, :])
        return visible


def _preorder_intervals(heads: IntArray) -> Tuple[IntArray, IntArray]:
    n_tokens = heads.shape[0]
    order = numpy.argsort(heads, kind="stable")
    sorted_heads = heads[order]
    child_starts = numpy.searchsorted(sorted_heads, numpy.arange(n_tokens), side="left").tolist()
    child_ends = numpy.searchsorted(sorted_heads, numpy.arange(n_tokens), side="right").tolist()
    children = order.tolist()
    preorder: List[int] = []
    stack = numpy.flatnonzero(heads == NO_TOKEN)[::-1].tolist()
    while stack:
        if len(preorder) >= n_tokens:
            # Only reachable if the heads were not a forest after all.
            raise ValueError(Errors.E013.format(what="preorder_intervals", bound=n_tokens))
        token = stack.pop()
        preorder.append(token)
        stack.extend(reversed(children[child_starts[token] : child_ends[token]]))
    first = numpy.empty(n_tokens, dtype=numpy.int64)
    first[preorder] = numpy.arange(len(preorder))
    # Subtree sizes, children before parents (reverse preorder).
    sizes = numpy.ones(n_tokens, dtype=numpy.int64)
    size_list = sizes.tolist()
    head_list = heads.tolist()
    for token in reversed(preorder):
        head = head_list[token]
        if head != NO_TOKEN:
            size_list[head] += size_list[token]
    return first, first + numpy.asarray(size_list, dtype=numpy.int64)


class GeneralGraph:
    """Any head structure (cycles, tokens on several paths to a root): exact
    hop distances by a breadth-first search bounded by the largest distance
    asked for, vectorised over (source, token) pairs."""

    is_forest = False

    def __init__(self, heads: IntArray):
        self.heads = heads
        n_tokens = heads.shape[0]
        children = numpy.flatnonzero(heads != NO_TOKEN)
        sources = numpy.concatenate([children, heads[children]])
        targets = numpy.concatenate([heads[children], children])
        order = numpy.lexsort((targets, sources))
        self.neighbours = targets[order]
        self.offsets = numpy.searchsorted(sources[order], numpy.arange(n_tokens + 1))

    def _reached(self, rows: IntArray, max_distance: int) -> Tuple[IntArray, IntArray, IntArray]:
        """(row position, token, distance) for every token within
        max_distance hops of each row token, each pair once, at its shortest
        distance."""
        n_tokens = self.heads.shape[0]
        frontier_rows = numpy.arange(len(rows), dtype=numpy.int64)
        frontier_tokens = rows.astype(numpy.int64)
        seen = numpy.unique(frontier_rows * n_tokens + frontier_tokens)
        found = [(frontier_rows, frontier_tokens, numpy.zeros(len(rows), dtype=numpy.int16))]
        for distance in range(1, max_distance + 1):
            starts, stops = self.offsets[frontier_tokens], self.offsets[frontier_tokens + 1]
            counts = stops - starts
            if counts.sum() == 0:
                break
            next_rows = numpy.repeat(frontier_rows, counts)
            within = numpy.arange(counts.sum()) - numpy.repeat(numpy.cumsum(counts) - counts, counts)
            next_tokens = self.neighbours[numpy.repeat(starts, counts) + within]
            keys = numpy.unique(next_rows * n_tokens + next_tokens)
            keys = keys[~numpy.isin(keys, seen, assume_unique=True)]
            if keys.size == 0:
                break
            seen = numpy.union1d(seen, keys)
            frontier_rows, frontier_tokens = keys // n_tokens, keys % n_tokens
            found.append((frontier_rows, frontier_tokens, numpy.full(keys.size, distance, dtype=numpy.int16)))
        return tuple(numpy.concatenate(parts) for parts in zip(*found))  # type: ignore[return-value]

    def distances(self, rows: IntArray, cols: IntArray, max_distance: int) -> IntArray:
        distances = numpy.full((len(rows), len(cols)), max_distance + 1, dtype=numpy.int16)
        row_positions, tokens, lengths = self._reached(rows, max_distance)
        col_positions = _positions_in(tokens, cols)
        hit = col_positions >= 0
        distances[row_positions[hit], col_positions[hit]] = lengths[hit]
        return distances

    def reach(self, rows: IntArray, cols: IntArray, threshold: int) -> BoolArray:
        return self.distances(rows, cols, threshold) <= threshold

    def ancestor_or_self(self, rows: IntArray, cols: IntArray) -> BoolArray:
        """Each row token and the tokens reached by following heads up from
        it, each once: a walk that enters a cycle stops when it has been
        round it (Brent's cycle detection: compare with the token saved at
        every power of two steps)."""
        n_tokens = self.heads.shape[0]
        visible = numpy.zeros((len(rows), len(cols)), dtype=bool)
        parent = numpy.append(self.heads, NO_TOKEN)
        positions = numpy.arange(len(rows))
        current = rows.astype(numpy.int64).copy()
        saved = numpy.full(len(rows), NO_TOKEN, dtype=numpy.int64)
        active = numpy.ones(len(rows), dtype=bool)
        step, next_save = 0, 1
        while True:
            col_positions = _positions_in(current[active], cols)
            hit = col_positions >= 0
            visible[positions[active][hit], col_positions[hit]] = True
            current[active] = parent[current[active]]
            step += 1
            active &= (current != NO_TOKEN) & (current != saved)
            if not active.any():
                return visible
            if step > 4 * n_tokens + 4:
                raise ValueError(Errors.E013.format(what="ancestor_or_self", bound=4 * n_tokens + 4))
            if step == next_save:
                saved[active] = current[active]
                next_save *= 2


DocGraph = Union[Forest, GeneralGraph]


def build_doc_graph(heads: IntArray) -> DocGraph:
    roots = forest_roots(heads)
    return GeneralGraph(heads) if roots is None else Forest(heads, roots)


def padded_forest_reach(heads: IntArray, threshold: int) -> Tuple[BoolArray, BoolArray]:
    """Reach within `threshold` hops for a batch of short Docs at once.

    heads: (n_docs, width), each Doc's head indices within the Doc (NO_TOKEN
    for roots and for the padding after its last token).
    Returns (reach, is_forest): reach[d, i, j] is True iff tokens i and j of
    Doc d are at most `threshold` hops apart; it holds only for the Docs
    whose heads form a forest (is_forest[d]), the others need a GeneralGraph.

    The same tree-distance formula as Forest, on padded arrays: a few
    vectorised operations for the whole batch, where the per-Doc path costs
    a few dozen small numpy calls per Doc, which dominate on short sentences.
    Memory is n_docs * width**2 booleans: meant for short Docs."""
    n_docs, width = heads.shape
    none = width  # one slot past the tokens: "no ancestor", its own parent
    parent = numpy.full((n_docs, width + 1), none, dtype=numpy.int64)
    parent[:, :width] = numpy.where(heads == NO_TOKEN, none, heads)
    # Pointer doubling: after r rounds every token points 2**r steps up. In a
    # forest every path leaves the tokens within width steps; on a cycle never.
    jumped = parent
    for _ in range(max(1, math.ceil(math.log2(width + 1)))):
        jumped = numpy.take_along_axis(jumped, jumped, axis=1)
    is_forest = (jumped[:, :width] == none).all(axis=1)
    ancestors = [numpy.broadcast_to(numpy.arange(width), (n_docs, width))]
    for _ in range(threshold):
        ancestors.append(numpy.take_along_axis(parent, ancestors[-1], axis=1))
    reach = numpy.zeros((n_docs, width, width), dtype=bool)
    for total in range(threshold + 1):
        for up in range(total + 1):
            rows, cols = ancestors[up], ancestors[total - up]
            reach |= (rows[:, :, None] == cols[:, None, :]) & (rows != none)[:, :, None]
    return reach, is_forest
