"""A Doc's parse, read once however many spans and builders ask.

Per batch in the component (shared_doc_trees), and between the mask
builders' own calls outside a batch (BUILDER_PARSES), where each call first
compares the part of the parse it reads with the Doc, so that a changed Doc
gets a new graph.
"""
import threading
import weakref
from collections import OrderedDict
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from typing import Iterable, Iterator, List, Optional, Tuple

import numpy
from spacy.attrs import DEP, HEAD
from spacy.tokens import Doc

from .dependency_tree import NO_TOKEN, DocGraph, IntArray, absolute_heads, build_doc_graph, forest_roots

__all__ = ["BUILDER_PARSES", "DocParse", "DocParses", "doc_parse", "doc_trees", "has_complete_parse",
           "shared_doc_trees"]

# The most ancestor steps a check of a cached parse follows for a question
# of unbounded depth (SG-Net's ancestors) before it compares the whole Doc.
_MAX_CHECKED_STEPS = 64
# A sentence this long in which one token heads all others is taken as a
# degenerate parse ([SLA-W016]) when all such sentences of a batch are:
# 0.4% of UD English EWT's gold trees are such stars, a parser that reads
# nothing makes every sentence one.
FLAT_TREE_TOKENS = 7


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

    def long_trees(self) -> Tuple[int, int]:
        """(trees of at least FLAT_TREE_TOKENS tokens, those of them in which
        the root heads every other token); (0, 0) without a complete forest."""
        roots = forest_roots(self.heads) if self.complete_parse else None
        if roots is None:
            return 0, 0
        long = numpy.bincount(roots, minlength=len(roots)) >= FLAT_TREE_TOKENS
        # A token is deep where its head has a head (NO_TOKEN indexes the appended NO_TOKEN).
        deep = numpy.append(self.heads, NO_TOKEN)[self.heads] != NO_TOKEN
        has_deep = numpy.bincount(roots[deep], minlength=len(roots)) > 0
        return int(long.sum()), int((long & ~has_deep).sum())

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

    def flat_parses(self, docs: Iterable[Doc]) -> Tuple[int, int]:
        """(Docs, trees) of a degenerate batch of Docs, whose every tree of
        at least FLAT_TREE_TOKENS tokens is flat ([SLA-W016]); (0, 0)
        otherwise. Each Doc's parse is read once, here or by the builders."""
        counts = [self.get(doc).long_trees() for doc in docs]
        n_long, n_flat = sum(long for long, _ in counts), sum(flat for _, flat in counts)
        return (sum(flat > 0 for _, flat in counts), n_flat) if 0 < n_long == n_flat else (0, 0)


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
