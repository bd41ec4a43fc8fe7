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
hanging.

A Doc's parse is read and its graph built once for many spans (`DocParses`):
per batch in the component, and between the mask builders' own calls
outside a batch, where each call first compares the part of the parse it
reads with the Doc, so that a changed Doc gets a new graph.
"""
import math
import threading
import weakref
from collections import OrderedDict
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from typing import Iterator, List, Optional, Tuple, Union

import numpy
from spacy.attrs import DEP, HEAD
from spacy.tokens import Doc, Span

from .errors import Errors

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


def absolute_heads(relative: numpy.ndarray) -> IntArray:
    # spaCy exports the relative offsets as uint64: the cast makes them signed again
    relative = relative.astype(numpy.int64)
    heads = numpy.arange(len(relative), dtype=numpy.int64) + relative
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


def _meeting_points(ancestors: IntArray, rows: IntArray, cols: IntArray, max_distance: int):
    """For every (u, k) with u + k <= max_distance, shortest first: whether
    u steps up from each row token and k steps up from each column token end
    on the same token, as one (n_pairs, n_rows, n_cols) comparison."""
    ups, downs = zip(*[(u, total - u) for total in range(max_distance + 1) for u in range(total + 1)])
    ups, downs = numpy.array(ups), numpy.array(downs)
    # Select the tokens before the steps: the arrays stay the size of the
    # block, whatever the length of the Doc.
    up_rows = ancestors[: max_distance + 1, rows][ups]
    down_cols = ancestors[: max_distance + 1, cols][downs]
    meets = (up_rows[:, :, None] == down_cols[:, None, :]) & (up_rows != NO_TOKEN)[:, :, None]
    return meets, (ups + downs).astype(numpy.int16)


def tree_reach(ancestors: IntArray, rows: IntArray, cols: IntArray, threshold: int) -> BoolArray:
    """[r, c] is True iff the tree distance of the tokens is <= threshold."""
    meets, _ = _meeting_points(ancestors, rows, cols, threshold)
    return meets.any(axis=0)


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
    return numpy.where(meets, lengths[:, None, None], unreachable).min(axis=0)


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
        return (first[cols][None, :] <= row_first) & (row_first < end[cols][None, :])


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


# The most ancestor steps a check of a cached parse follows for a question
# of unbounded depth (SG-Net's ancestors) before it compares the whole Doc.
_MAX_CHECKED_STEPS = 64


class DocParse:
    """A Doc's parse as read once: the HEAD and DEP of every token, whether
    every token has a label ([SLA-E001] otherwise), and the graph, built on
    first use."""

    def __init__(self, doc_ref: "weakref.ref[Doc]", parse: numpy.ndarray):
        self.doc_ref = doc_ref
        self.parse = parse  # (n_tokens, 2) uint64: spaCy's relative HEAD, DEP
        self.heads = absolute_heads(parse[:, 0])
        # the test of Doc.has_annotation("DEP", require_complete=True), on the copy
        self.complete_parse = bool(parse[:, 1].all())
        self._graph: Optional[DocGraph] = None

    @property
    def graph(self) -> DocGraph:
        graph = self._graph
        if graph is None:
            # Two threads may both get here for one Doc: each builds the same graph.
            graph = self._graph = build_doc_graph(self.heads)
        return graph

    def has_graph(self) -> bool:
        return self._graph is not None

    def _read_tokens(self, tokens: Optional[IntArray], depth: Optional[int]) -> Optional[IntArray]:
        """The tokens whose HEAD and DEP decide every path of at most
        `depth` hops from `tokens`, or None for the whole Doc.

        In this graph every token has at most one head, so a shortest path
        goes up from one end and down to the other (down then up would
        return to the same token): the tokens on it are the ancestors of its
        two ends within depth hops, found from the heads of the ancestors
        within depth - 1 hops. Where these are unchanged, so are every
        distance up to depth and every "farther", whatever changed elsewhere
        in the Doc."""
        if tokens is None:
            return None
        current = numpy.asarray(tokens, dtype=numpy.int64)
        found = [current]
        steps = _MAX_CHECKED_STEPS if depth is None else min(depth - 1, _MAX_CHECKED_STEPS)
        for _ in range(max(steps, 0)):
            current = self.heads[current]
            current = current[current != NO_TOKEN]
            if current.size == 0:
                break
            found.append(current)
        else:
            if current.size and (depth is None or depth - 1 > _MAX_CHECKED_STEPS):
                return None
        return numpy.unique(numpy.concatenate(found))

    def holds_for(self, doc: Doc, tokens: Optional[IntArray], depth: Optional[int]) -> bool:
        """Whether what a question about `tokens` within `depth` hops reads
        of the Doc is unchanged since it was read. For a parse this reads
        about as many tokens as the span has, not the whole Doc: span by
        span over a long Doc, a whole-Doc comparison would keep the cost
        quadratic (spaCy's to_array alone takes milliseconds at 100k tokens)."""
        if len(doc) != self.parse.shape[0] or not self.complete_parse:
            # An incomplete parse is read again: completing it anywhere matters.
            return False
        read = self._read_tokens(tokens, depth)
        if read is None:
            return numpy.array_equal(doc.to_array([HEAD, DEP]), self.parse)
        if read.size == 0:
            return True
        lo, hi = int(read[0]), int(read[-1]) + 1
        return numpy.array_equal(doc[lo:hi].to_array([HEAD, DEP])[read - lo], self.parse[read])


class DocParses:
    """Each Doc's parse and graph, read once however many spans and builders
    ask: per batch (shared_doc_trees, `check=False`: its Docs stay alive and
    unchanged for the block) or, outside a batch, for the last `max_docs`
    Docs (`check=True`: what a call reads is compared with the Doc first, so
    that a Doc whose parse changed gets a new graph).

    Entries are keyed on id(doc) and hold the Doc only weakly: an entry for
    another Doc at a recycled id is never served, and an entry goes when its
    Doc does. Thread-safe: the lock guards the table, a graph is built
    outside it."""

    def __init__(self, max_docs: Optional[int] = None, check: bool = False):
        self.max_docs = max_docs
        self.check = check
        self._entries: "OrderedDict[int, DocParse]" = OrderedDict()
        self._lock = threading.Lock()
        # Docs released while the table was busy, removed by the next call
        self._released: List[Tuple[int, "weakref.ref[Doc]"]] = []

    def get(self, doc: Doc, tokens: Optional[IntArray] = None, depth: Optional[int] = None) -> DocParse:
        """The Doc's parse; a question about `tokens` within `depth` hops
        (None: unbounded) tells a checking table what to compare."""
        key = id(doc)
        with self._lock:
            self._forget_released()
            entry = self._entries.get(key)
            if entry is not None and entry.doc_ref() is not doc:
                del self._entries[key]
                entry = None
            if entry is not None:
                self._entries.move_to_end(key)
        if entry is not None and (not self.check or entry.holds_for(doc, tokens, depth)):
            return entry
        # The callback holds the table weakly: a batch's table, with its
        # graphs, goes as soon as the batch ends, not at the next collection.
        on_release = partial(_release_entry, weakref.ref(self), key)
        entry = DocParse(weakref.ref(doc, on_release), doc.to_array([HEAD, DEP]))
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while self.max_docs is not None and len(self._entries) > self.max_docs:
                self._entries.popitem(last=False)
        return entry

    def release(self, key: int, ref: "weakref.ref[Doc]") -> None:
        """Drop the entry of a Doc that has gone."""
        # Called from a weakref callback, which runs wherever the Doc dies,
        # possibly inside get() on this thread: never wait for the lock here.
        if self._lock.acquire(blocking=False):
            try:
                self._forget(key, ref)
            finally:
                self._lock.release()
        else:
            self._released.append((key, ref))

    def _forget(self, key: int, ref: "weakref.ref[Doc]") -> None:
        entry = self._entries.get(key)
        if entry is not None and entry.doc_ref is ref:
            del self._entries[key]

    def _forget_released(self) -> None:
        while self._released:
            self._forget(*self._released.pop())

    def __len__(self) -> int:
        with self._lock:
            self._forget_released()
            return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._released.clear()

    def non_forest_docs(self) -> int:
        with self._lock:
            entries = list(self._entries.values())
        return sum(entry.has_graph() and not entry.graph.is_forest for entry in entries)


def _release_entry(table_ref: "weakref.ref[DocParses]", key: int, ref: "weakref.ref[Doc]") -> None:
    table = table_ref()
    if table is not None:
        table.release(key, ref)


_BATCH: ContextVar[Optional[DocParses]] = ContextVar("sla_batch_graphs", default=None)

# Outside a batch: the mask builders called span by span on a long Doc read
# its parse once, not once per span. A few Docs, so that a caller holding
# many Docs does not hold a graph for each.
BUILDER_PARSES = DocParses(max_docs=16, check=True)


@contextmanager
def shared_doc_trees() -> Iterator[DocParses]:
    """Within the block, doc_trees and has_complete_parse look at each Doc
    once, however many spans and builders ask (the Docs stay alive for the
    whole block, so their ids cannot be reused)."""
    batch = DocParses()
    token = _BATCH.set(batch)
    try:
        yield batch
    finally:
        _BATCH.reset(token)


def doc_parse(doc: Doc, tokens: Optional[IntArray] = None, depth: Optional[int] = None) -> DocParse:
    """The Doc's parse, from the batch's table or, outside a batch, the
    builders' one. `tokens` and `depth` say which part the caller reads:
    the paths of at most `depth` hops (None: any) from `tokens` (None: the
    whole Doc); only that part is compared with a cached copy."""
    batch = _BATCH.get()
    return (BUILDER_PARSES if batch is None else batch).get(doc, tokens, depth)


def doc_trees(doc: Doc, depth: Optional[int] = None, tokens: Optional[IntArray] = None) -> DocGraph:
    """The Doc's dependency graph: a Forest (the usual case) or a
    GeneralGraph, for paths of at most `depth` hops from `tokens` (see
    doc_parse); the forest builds its tables for the depths asked."""
    return doc_parse(doc, tokens, depth).graph


def has_complete_parse(doc: Doc, tokens: Optional[IntArray] = None, depth: Optional[int] = None) -> bool:
    """Whether every token has a dependency label: a Doc joined from parsed
    and unparsed Docs reports DEP annotation but has tokens without a head
    of their own. Cached like doc_trees: a parse found complete is checked
    again only where `tokens` read it."""
    return len(doc) == 0 or doc_parse(doc, tokens, depth).complete_parse


def blockwise_reach(graph: DocGraph, rows: IntArray, cols: IntArray, threshold: int) -> BoolArray:
    """[r, c] is True iff tokens rows[r] and cols[c] are at most threshold
    hops apart."""
    return graph.reach(rows, cols, threshold)


def blockwise_distances(graph: DocGraph, rows: IntArray, cols: IntArray, max_distance: int) -> IntArray:
    """Hop distances up to max_distance; farther or unconnected pairs get
    max_distance + 1."""
    return graph.distances(rows, cols, max_distance)


def ancestor_or_self(graph: DocGraph, rows: IntArray, cols: IntArray) -> BoolArray:
    """[r, c] is True iff cols[c] is rows[r] or one of its ancestors."""
    return graph.ancestor_or_self(rows, cols)


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
