"""The MaskBuilder protocol: a plain callable is a mask builder, a builder
with n_buckets and make_layer_bias a distance builder, a punct_rule (the
member or its value) is read once into a PunctRule; and the syntax modules
need numpy only."""
import ast
from pathlib import Path

import numpy
import pytest

from spacy_sla import DistanceBuilder, PunctRule, SyntaxMask, ThresholdLogBias, TreeDistanceBias, WindowMask
from spacy_sla.syntax.builders import BuilderKind, builder_kind, builder_punct_rule, word_neighbours

from util import english_vocab, parsed_doc

PACKAGE = Path(__file__).parent.parent.parent / "spacy_sla"


def identity(doclike) -> numpy.ndarray:
    return numpy.eye(len(doclike), dtype=bool)


class UserDistances:
    n_buckets = 4

    def __call__(self, doclike) -> numpy.ndarray:
        return numpy.zeros((len(doclike), len(doclike)), dtype=numpy.int16)

    def make_layer_bias(self, transformer_config):
        return None


class NamedRule:
    punct_rule = "authors"

    def __call__(self, doclike) -> numpy.ndarray:
        return identity(doclike)


class BadRule(NamedRule):
    punct_rule = "unicode"


def test_the_kind_of_a_builder_is_its_protocol():
    assert builder_kind(identity) is builder_kind(SyntaxMask()) is builder_kind(WindowMask()) is BuilderKind.MASK
    for builder in (UserDistances(), TreeDistanceBias(), ThresholdLogBias()):
        assert isinstance(builder, DistanceBuilder) and builder_kind(builder) is BuilderKind.DISTANCE


def test_the_punctuation_rule_is_read_once_into_its_member():
    assert builder_punct_rule(identity) is PunctRule.NONE
    assert builder_punct_rule(SyntaxMask(punct_rule="spacy")) is PunctRule.SPACY
    assert builder_punct_rule(NamedRule()) is PunctRule.AUTHORS  # a user's builder may give the value
    with pytest.raises(ValueError, match=r"\[SLA-E014\] Invalid `punct_rule` value 'unicode'"):
        builder_punct_rule(BadRule())
    with pytest.raises(ValueError, match=r"\[SLA-E014\]"):
        PunctRule.parse(True, "a builder")
    assert PunctRule.parse("none", "a builder") is PunctRule.NONE


def test_the_neighbours_of_a_token_are_the_nearest_words():
    # "a  b" with a whitespace token between a and b, then c
    doc = parsed_doc(english_vocab(), ["a", " ", "b", "c"], [2, 2, 2, 2])
    left, right = word_neighbours(doc, 0, 4)
    assert left.tolist() == [-1, 0, 0, 2] and right.tolist() == [2, 2, 3, -1]
    left, right = word_neighbours(doc, 2, 3)
    assert (left.tolist(), right.tolist()) == ([0], [3])


def module_imports(path: Path):
    """The modules a file imports at its top level (not inside functions)."""
    for node in ast.parse(path.read_text(encoding="utf8")).body:
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            yield node.module or ""


def test_the_syntax_modules_need_numpy_only_and_the_core_numpy_modules_are_short():
    syntax = sorted((PACKAGE / "syntax").glob("*.py"))
    assert [path.name for path in syntax if any(name.split(".")[0] == "torch" for name in module_imports(path))] == []
    long = {path.name: n for path in [*syntax, *(PACKAGE / "variants").glob("*.py")]
            if (n := len(path.read_text(encoding="utf8").splitlines())) > 400}
    assert long == {}
