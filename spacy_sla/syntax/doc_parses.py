"""A Doc's parse, read once per batch however many spans and builders ask.

The model makes one DocParses for each batch (build_syntax_inputs) and
passes it to every builder that reads the parse (ParseReadingBuilder in
builders.py) and to LISA's parent targets: each Doc's HEAD and DEP are read,
and its graph built, once for all the spans, builders and layers of the
batch. Nothing outlives the table: a builder called on its own reads its
Doc's parse anew, so a changed Doc is always answered from its new parse.
"""
from typing import Dict, Optional, Tuple

from spacy.attrs import DEP, HEAD
from spacy.tokens import Doc

from .dependency_tree import DocGraph, IntArray, absolute_heads, build_doc_graph

__all__ = ["DocParse", "DocParses", "doc_trees", "has_complete_parse"]


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


def doc_trees(doc: Doc) -> DocGraph:
    """The Doc's dependency graph, read anew (DocParses.graph reads it once
    for a batch)."""
    return DocParse.of(doc).graph


def has_complete_parse(doc: Doc) -> bool:
    """Whether every token has a dependency label: a Doc joined from parsed
    and unparsed Docs reports DEP annotation but has tokens without a head
    of their own."""
    return len(doc) == 0 or bool(doc.to_array([DEP]).all())
