"""A Doc's parse, read once per batch however many spans and builders ask.

The model makes one DocParses for each batch (build_syntax_inputs) and
passes it to every builder that reads the parse (ParseReadingBuilder in
builders.py) and to LISA's parent targets: each Doc's HEAD and DEP are read,
and its graph built, once for all the spans, builders and layers of the
batch. Nothing outlives the table: a builder called on its own reads its
Doc's parse anew, so a changed Doc is always answered from its new parse.
"""
from typing import Dict, Iterable, Optional, Tuple

import numpy
from spacy.attrs import DEP, HEAD
from spacy.tokens import Doc

from .dependency_tree import NO_TOKEN, DocGraph, IntArray, absolute_heads, build_doc_graph, forest_roots

__all__ = ["FLAT_TREE_TOKENS", "DocParse", "DocParses", "doc_trees", "has_complete_parse"]

# A sentence this long in which one token heads all others is taken as a
# degenerate parse ([SLA-W016]) when all such sentences of a batch are:
# 0.4% of UD English EWT's gold trees are such stars, a parser that reads
# nothing makes every sentence one.
FLAT_TREE_TOKENS = 7


class DocParse:
    """A Doc's parse as read once: the HEAD and DEP of every token, whether
    every token has a label ([SLA-E001] otherwise), and the graph, built on
    first use."""

    def __init__(self, parse: IntArray):
        self.parse = parse  # (n_tokens, 2) uint64: spaCy's relative HEAD, DEP
        self.heads = absolute_heads(parse[:, 0])
        # the test of Doc.has_annotation("DEP", require_complete=True), on the copy
        self.complete_parse = bool(parse[:, 1].all())
        self._graph: Optional[DocGraph] = None

    @classmethod
    def of(cls, doc: Doc) -> "DocParse":
        return cls(doc.to_array([HEAD, DEP]))

    @property
    def graph(self) -> DocGraph:
        if self._graph is None:
            self._graph = build_doc_graph(self.heads)
        return self._graph

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


class DocParses:
    """The parses of one batch's Docs, each read on first use: keyed on the
    Doc's id, with the Doc held so that no other Doc takes its id while the
    table lives. The Docs must not change while the table is used (within a
    batch they do not); a new batch gets a new table."""

    def __init__(self) -> None:
        self._entries: Dict[int, Tuple[Doc, DocParse]] = {}

    def get(self, doc: Doc) -> DocParse:
        entry = self._entries.get(id(doc))
        if entry is None:
            entry = self._entries[id(doc)] = (doc, DocParse.of(doc))
        return entry[1]

    def graph(self, doc: Doc) -> DocGraph:
        """The Doc's dependency graph: a Forest (the usual case) or a
        GeneralGraph (head cycles)."""
        return self.get(doc).graph

    def has_complete_parse(self, doc: Doc) -> bool:
        """Whether every token of the Doc has a dependency label."""
        return len(doc) == 0 or self.get(doc).complete_parse

    def __len__(self) -> int:
        return len(self._entries)

    def non_forest_docs(self) -> int:
        """How many of the Docs whose graph was built are not a forest ([SLA-W003])."""
        return sum(parse.has_graph() and not parse.graph.is_forest for _, parse in self._entries.values())

    def flat_parses(self, docs: Iterable[Doc]) -> Tuple[int, int]:
        """(Docs, trees) of a degenerate batch of Docs, whose every tree of
        at least FLAT_TREE_TOKENS tokens is flat ([SLA-W016]); (0, 0)
        otherwise. Each Doc's parse is read once, here or by the builders."""
        counts = [self.get(doc).long_trees() for doc in docs]
        n_long, n_flat = sum(long for long, _ in counts), sum(flat for _, flat in counts)
        return (sum(flat > 0 for _, flat in counts), n_flat) if 0 < n_long == n_flat else (0, 0)


def doc_trees(doc: Doc) -> DocGraph:
    """The Doc's dependency graph, read anew (DocParses.graph reads it once
    for a batch)."""
    return DocParse.of(doc).graph


def has_complete_parse(doc: Doc) -> bool:
    """Whether every token has a dependency label: a Doc joined from parsed
    and unparsed Docs reports DEP annotation but has tokens without a head
    of their own."""
    return len(doc) == 0 or bool(doc.to_array([DEP]).all())
