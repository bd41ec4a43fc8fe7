"""The SLA mask (spacy-sla.syntax_mask.v1): by hand, against its definition
(breadth-first search) on random forests, and its batched path for whole
Docs against the mask Doc by Doc."""
from unittest.mock import patch

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Config

import spacy_sla.variants.syntax_mask as sla_module
from spacy_sla import MissingParseError, PunctRule, SyntaxMask

from reference import slow_syntax_mask
from strategies import random_forests
from util import english_vocab, parsed_doc, the_cat_sat


def rows(mask: numpy.ndarray):
    return [[int(cell) for cell in row] for row in mask]


def test_syntax_mask_threshold_1_by_hand():
    # vis(k) for m = 1: 0:{0,1} 1:{0,1,2} 2:{1,2,3,6} 3:{2,3,5} 4:{4,5} 5:{3,4,5} 6:{2,6};
    # row i = vis(i-1) | vis(i) | vis(i+1).
    mask = SyntaxMask(threshold=1, punct_rule="none")(the_cat_sat(english_vocab()))
    assert rows(mask) == [
        [1, 1, 1, 0, 0, 0, 0],
        [1, 1, 1, 1, 0, 0, 1],
        [1, 1, 1, 1, 0, 1, 1],
        [0, 1, 1, 1, 1, 1, 1],
        [0, 0, 1, 1, 1, 1, 0],
        [0, 0, 1, 1, 1, 1, 1],
        [0, 0, 1, 1, 1, 1, 1],
    ]


def test_threshold_0_sees_self_and_neighbours_only():
    mask = SyntaxMask(threshold=0, punct_rule="none")(the_cat_sat(english_vocab()))
    expected = numpy.abs(numpy.subtract.outer(numpy.arange(7), numpy.arange(7))) <= 1
    assert (mask == expected).all()


def test_punctuation_columns_are_visible_from_every_row():
    doc = the_cat_sat(english_vocab())
    with_punct = SyntaxMask(threshold=0, punct_rule="spacy")(doc)
    without = SyntaxMask(threshold=0, punct_rule="none")(doc)
    assert with_punct[:, 6].all()
    assert not without[:, 6].all()
    assert (with_punct[:, :6] == without[:, :6]).all()


def test_span_mask_uses_the_doc_forest_and_neighbours_outside_the_span():
    doc = the_cat_sat(english_vocab())
    full = SyntaxMask(threshold=1, punct_rule="none")(doc)
    span_mask = SyntaxMask(threshold=1, punct_rule="none")(doc[1:5])
    assert (span_mask == full[1:5, 1:5]).all()
    # row "cat" sees "on" only through its neighbour "sat", and "the"(0)
    # (outside the span) contributes nothing visible inside it.
    assert rows(span_mask) == [[1, 1, 1, 0], [1, 1, 1, 0], [1, 1, 1, 1], [0, 1, 1, 1]]


def test_sentences_are_not_connected_but_neighbours_are_taken_from_the_doc():
    # "a b" | "c d e": b and d are roots
    doc = parsed_doc(english_vocab(), list("abcde"), [1, 1, 3, 3, 3])
    mask = SyntaxMask(threshold=5, punct_rule="none")(doc)
    # row a: vis(a) | vis(b) = {a, b}; row b: vis(a) | vis(b) | vis(c) = everything
    assert rows(mask) == [
        [1, 1, 0, 0, 0],
        [1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1],
        [0, 0, 1, 1, 1],
        [0, 0, 1, 1, 1],
    ]


def test_non_projective_tree():
    # a b c d with arcs a->c, b->d, c root, d->a: crossing arcs (a,c) and (b,d)
    doc = parsed_doc(english_vocab(), list("abcd"), [2, 3, 2, 0])
    mask = SyntaxMask(threshold=1, punct_rule="none")(doc)
    # vis: a:{a,c,d} b:{b,d} c:{a,c} d:{a,b,d}
    assert rows(mask) == [[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]]
    mask0 = SyntaxMask(threshold=1, punct_rule="none")(doc[0:1])
    assert rows(mask0) == [[1]]
    two_hops_apart = SyntaxMask(threshold=0, punct_rule="none")(doc)
    assert rows(two_hops_apart) == [[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1]]


def test_empty_span_and_empty_doc():
    doc = the_cat_sat(english_vocab())
    assert SyntaxMask()(doc[3:3]).shape == (0, 0)
    assert SyntaxMask()(Doc(english_vocab(), words=[])).shape == (0, 0)


def test_missing_parse_raises_a_coded_error():
    unparsed = Doc(english_vocab(), words=["no", "parse", "here"])
    with pytest.raises(MissingParseError, match=r"\[SLA-E001\].*annotating_components"):
        SyntaxMask()(unparsed)


@pytest.mark.parametrize("value", [-1, 1.5, True])
def test_invalid_thresholds_are_refused(value):
    with pytest.raises(ValueError, match=r"\[SLA-E007\]"):
        SyntaxMask(threshold=value)


def test_the_builder_comes_from_the_registry_with_its_rule_parsed_once():
    config = Config().from_str(
        """
        [syntax]
        @misc = "spacy-sla.syntax_mask.v1"
        threshold = 2
        punct_rule = "spacy"
        neighbours = false

        [default]
        @misc = "spacy-sla.syntax_mask.v1"
        """
    )
    resolved = registry.resolve(config)
    assert isinstance(resolved["syntax"], SyntaxMask)
    assert (resolved["syntax"].threshold, resolved["syntax"].punct_rule, resolved["syntax"].neighbours) == (
        2, PunctRule.SPACY, False)
    default = resolved["default"]
    assert (default.threshold, default.punct_rule, default.neighbours) == (3, PunctRule.AUTHORS, True)
    assert repr(default) == "SyntaxMask(threshold=3, punct_rule='authors', neighbours=True)"


def test_an_unknown_punctuation_rule_is_refused():
    with pytest.raises(ValueError, match=r"\[SLA-E014\]"):
        SyntaxMask(punct_rule="unicode")


@settings(max_examples=200, deadline=None)
@given(
    doc=random_forests(),
    threshold=st.integers(0, 4),
    spacy_punct=st.booleans(),
    data=st.data(),
)
def test_syntax_mask_matches_the_definition_on_random_forests(doc, threshold, spacy_punct, data):
    start = data.draw(st.integers(0, len(doc)))
    end = data.draw(st.integers(start, len(doc)))
    fast = SyntaxMask(threshold=threshold, punct_rule="spacy" if spacy_punct else "none")(doc[start:end])
    assert fast.dtype == bool
    assert (fast == slow_syntax_mask(doc, start, end, threshold, spacy_punct)).all()


@settings(max_examples=150, deadline=None)
@given(
    docs=st.lists(random_forests(max_tokens=20, space_tokens=True), min_size=1, max_size=5),
    threshold=st.integers(0, 4),
    punct_rule=st.sampled_from(["authors", "spacy", "none"]),
    neighbours=st.booleans(),
)
def test_the_batched_masks_of_whole_docs_equal_the_mask_doc_by_doc(docs, threshold, punct_rule, neighbours):
    mask = SyntaxMask(threshold=threshold, punct_rule=punct_rule, neighbours=neighbours)
    for doc, batched in zip(docs, mask.whole_docs(docs)):
        assert batched is not None and batched.dtype == bool
        assert (batched == mask(doc)).all()


def test_the_batched_path_leaves_cycles_missing_parses_and_very_long_docs_to_the_doc_by_doc_one():
    vocab = english_vocab()
    sentence = the_cat_sat(vocab)
    cyclic = Doc(vocab, words=["a", "b", "c"], heads=[1, 2, 0], deps=["dep", "dep", "dep"])
    unparsed = Doc(vocab, words=["a", "b"])
    long_doc = Doc.from_docs([the_cat_sat(vocab) for _ in range(19)])  # 133 tokens: tree by tree
    too_long = Doc.from_docs([the_cat_sat(vocab) for _ in range(586)])  # 4,102 tokens > MAX_WHOLE_DOC_TOKENS
    long_tree = Doc(vocab, words=["a"] * 600, heads=[0] * 600, deps=["ROOT"] + ["dep"] * 599)  # one 600-token tree
    long_cycle = Doc.from_docs([the_cat_sat(vocab)] * 20 + [cyclic])
    empty = Doc(vocab, words=[])
    docs = [sentence, cyclic, unparsed, long_doc, too_long, long_tree, long_cycle, empty, sentence]
    masks = SyntaxMask().whole_docs(docs)
    assert [mask is None for mask in masks] == [False, True, True, False, True, True, True, True, False]
    assert (masks[0] == SyntaxMask()(sentence)).all() and (masks[8] == masks[0]).all()
    assert (masks[3] == SyntaxMask()(long_doc)).all()
    # by hand: "a -> b -> c -> a" is a cycle, pointer doubling never leaves it
    assert len(cyclic) == 3 and SyntaxMask()(cyclic).all()


@settings(max_examples=100, deadline=None)
@given(
    docs=st.lists(random_forests(max_tokens=30, max_sentences=5, space_tokens=True), min_size=1, max_size=4),
    threshold=st.integers(0, 4),
    punct_rule=st.sampled_from(["authors", "spacy", "none"]),
    neighbours=st.booleans(),
)
def test_the_masks_of_long_docs_tree_by_tree_equal_the_mask_doc_by_doc(docs, threshold, punct_rule, neighbours):
    mask = SyntaxMask(threshold=threshold, punct_rule=punct_rule, neighbours=neighbours)
    # Every Doc counts as long here; groups of two trees at most.
    with patch.multiple(sla_module, MAX_BATCHED_TOKENS=0, BATCHED_DOCS=2):
        batched = mask.whole_docs(docs)
    for doc, doc_mask in zip(docs, batched):
        assert doc_mask is not None and doc_mask.dtype == bool
        assert (doc_mask == mask(doc)).all()


def test_trees_that_interleave_are_put_back_at_their_tokens():
    # two trees whose tokens alternate: a <- c -> e and b <- d -> f; every
    # pair of a tree is within 2 hops, no pair across trees is
    vocab = english_vocab()
    doc = Doc(vocab, words=list("abcdef"), heads=[2, 3, 2, 3, 2, 3], deps=["dep", "dep", "ROOT", "ROOT", "dep", "dep"])
    mask = SyntaxMask(threshold=2, punct_rule="none", neighbours=False)
    with patch.object(sla_module, "MAX_BATCHED_TOKENS", 0):
        (batched,) = mask.whole_docs([doc])
    same_tree = numpy.equal.outer(numpy.arange(6) % 2, numpy.arange(6) % 2)
    assert rows(batched) == rows(same_tree) == rows(mask(doc))
