"""The window mask (spacy-sla.window_mask.v1): by hand, without a parse,
and from the registry."""
import numpy
import pytest
from spacy.tokens import Doc
from spacy.util import registry

from spacy_sla import PunctRule, WindowMask

from util import english_vocab, the_cat_sat


def rows(mask: numpy.ndarray):
    return [[int(cell) for cell in row] for row in mask]


def test_window_mask_by_hand():
    doc = the_cat_sat(english_vocab())
    mask = WindowMask(window=1, punct_rule="spacy")(doc[3:7])
    assert rows(mask) == [[1, 1, 0, 1], [1, 1, 1, 1], [0, 1, 1, 1], [0, 0, 1, 1]]
    assert rows(WindowMask(window=0, punct_rule="none")(doc[0:3])) == numpy.eye(3).tolist()


def test_the_window_needs_no_parse_and_an_empty_doc_has_an_empty_mask():
    unparsed = Doc(english_vocab(), words=["no", "parse", "here"])
    assert WindowMask(window=1)(unparsed).sum() == 7
    assert WindowMask()(Doc(english_vocab(), words=[])).shape == (0, 0)


@pytest.mark.parametrize("value", [-1, 1.5, True])
def test_invalid_windows_are_refused(value):
    with pytest.raises(ValueError, match=r"\[SLA-E007\]"):
        WindowMask(window=value)


def test_the_builder_comes_from_the_registry():
    window = registry.misc.get("spacy-sla.window_mask.v1")(window=4, punct_rule="none")
    assert isinstance(window, WindowMask) and (window.window, window.punct_rule) == (4, PunctRule.NONE)
    assert repr(registry.misc.get("spacy-sla.window_mask.v1")()) == "WindowMask(window=3, punct_rule='authors')"
