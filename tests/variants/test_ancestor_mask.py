"""SG-Net's ancestor mask (spacy-sla.ancestor_mask.v1): by hand on a
hand-built Doc, on a head cycle, for spans whose ancestors lie outside
them, against its definition (following heads up) on random forests, and
the variant `sgnet` that puts it in the syntax-guided layer."""
import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Config

from spacy_sla import AncestorMask, DocParses, MissingParseError
from spacy_sla.variants.registry import get_variant

from reference import slow_ancestor_mask
from strategies import random_forests
from util import english_vocab, parsed_doc, the_cat_sat


def rows(mask: numpy.ndarray) -> list:
    return [[int(cell) for cell in row] for row in mask]


def test_each_token_sees_itself_and_its_ancestors_by_hand():
    # The -> cat -> sat (root), on -> sat, the -> mat -> on -> sat, . -> sat
    mask = AncestorMask()(the_cat_sat(english_vocab()))
    assert rows(mask) == [
        [1, 1, 1, 0, 0, 0, 0],  # The: itself, cat, sat
        [0, 1, 1, 0, 0, 0, 0],  # cat: itself, sat
        [0, 0, 1, 0, 0, 0, 0],  # sat: the root, itself only
        [0, 0, 1, 1, 0, 0, 0],  # on: sat, itself
        [0, 0, 1, 1, 1, 1, 0],  # the: sat, on, itself, mat
        [0, 0, 1, 1, 0, 1, 0],  # mat: sat, on, itself
        [0, 0, 1, 0, 0, 0, 1],  # .: sat, itself
    ]
    assert mask.dtype == numpy.bool_


def test_a_span_keeps_the_ancestors_inside_it():
    # "the mat ." (tokens 4-6): the -> mat inside, mat -> on outside, . -> sat outside
    doc = the_cat_sat(english_vocab())
    assert rows(AncestorMask()(doc[4:7])) == [[1, 1, 0], [0, 1, 0], [0, 0, 1]]
    # an ancestor reached through a token outside the span: the -> mat -> on, span "the mat" misses on
    assert rows(AncestorMask()(doc[3:5])) == [[1, 0], [1, 1]]


def test_on_a_head_cycle_each_token_is_reached_once():
    # a -> b -> c -> a: every token is an ancestor of every other; d -> c
    doc = parsed_doc(english_vocab(), ["a", "b", "c", "d"], [1, 2, 0, 2])
    mask = AncestorMask()(doc)
    assert rows(mask) == [[1, 1, 1, 0], [1, 1, 1, 0], [1, 1, 1, 0], [1, 1, 1, 1]]
    assert (mask == slow_ancestor_mask(doc, 0, 4)).all()


def test_an_empty_span_and_a_doc_without_a_parse():
    doc = the_cat_sat(english_vocab())
    assert AncestorMask()(doc[2:2]).shape == (0, 0)
    with pytest.raises(MissingParseError, match=r"\[SLA-E001\]"):
        AncestorMask()(Doc(english_vocab(), words=["no", "parse"]))


@settings(max_examples=60, deadline=None)
@given(doc=random_forests(), data=st.data())
def test_matches_the_definition_on_random_forests_and_spans(doc, data):
    start = data.draw(st.integers(0, len(doc) - 1))
    end = data.draw(st.integers(start + 1, len(doc)))
    expected = slow_ancestor_mask(doc, start, end)
    assert (AncestorMask()(doc[start:end]) == expected).all()
    # the model's call, with the batch's parses, gives the same mask
    assert (AncestorMask().build(doc[start:end], DocParses()) == expected).all()


def test_the_registered_function_and_the_sgnet_variant():
    mask = registry.resolve(Config().from_str('[mask]\n@misc = "spacy-sla.ancestor_mask.v1"\n'))["mask"]
    assert isinstance(mask, AncestorMask) and repr(mask) == "AncestorMask()"
    block = get_variant("sgnet").transformer_block()
    assert block["model"]["mask"] is None
    assert block["model"]["ancestor_mask"] == {"@misc": "spacy-sla.ancestor_mask.v1"}
