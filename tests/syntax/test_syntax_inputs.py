"""SyntaxInputs, the per-span wordpiece matrices of a padded batch (checked
on construction, stripped of padding, copied to torch), and their making
from the spans' token matrices."""
import warnings
from unittest.mock import patch

import numpy
import pytest
import torch
from spacy.tokens import Doc, Span

import spacy_sla.syntax.syntax_inputs as syntax_inputs_module
from spacy_sla import MissingParseError, SyntaxMask
from spacy_sla.data_classes import IGNORED_TARGET
from spacy_sla.syntax.syntax_inputs import SyntaxInputs, build_syntax_inputs

from util import english_vocab, parsed_doc, sla_nlp


def identity_mask(span: Span) -> numpy.ndarray:
    return numpy.eye(len(span), dtype=bool)


def as_ints(mask):
    return mask.astype(int).tolist()


@pytest.fixture(scope="module")
def model(tiny_bert):
    return sla_nlp(tiny_bert).get_pipe("sla_transformer").model


def local_mask(model, spans, builder, on_missing_parse="error"):
    wordpieces, align = model.tokenize(spans)
    inputs = build_syntax_inputs(
        spans, align, wordpieces.lengths, wordpieces.input_ids.shape[1], local=builder, on_missing_parse=on_missing_parse
    )
    return wordpieces, inputs


def test_pieces_of_a_token_share_its_row_and_column(model):
    doc = parsed_doc(english_vocab(), ["she", "was", "walking", "."], [2, 2, 2, 2])
    wordpieces, mask = local_mask(model, [doc[:]], identity_mask)
    assert wordpieces.strings[0] == ["[CLS]", "she", "was", "walk", "##ing", ".", "[SEP]"]
    assert as_ints(mask.local_matrices()[0]) == [
        [1, 1, 1, 1, 1, 1, 1],
        [1, 1, 0, 0, 0, 0, 1],
        [1, 0, 1, 0, 0, 0, 1],
        [1, 0, 0, 1, 1, 0, 1],
        [1, 0, 0, 1, 1, 0, 1],
        [1, 0, 0, 0, 0, 1, 1],
        [1, 1, 1, 1, 1, 1, 1],
    ]


def test_a_piece_shared_by_two_tokens_sees_what_either_sees(model):
    # spaCy: she | do | n't ; BERT: she | don | ' | t  ("don" covers do and n't)
    doc = Doc(english_vocab(), words=["she", "do", "n't"], spaces=[True, False, False])

    def she_sees_do(span):
        visible = numpy.eye(len(span), dtype=bool)
        visible[0, 1] = True
        return visible

    wordpieces, mask = local_mask(model, [doc[:]], she_sees_do)
    assert wordpieces.strings[0] == ["[CLS]", "she", "don", "'", "t", "[SEP]"]
    assert as_ints(mask.local_matrices()[0]) == [
        [1, 1, 1, 1, 1, 1],
        [1, 1, 1, 0, 0, 1],  # she sees "do", hence the piece "don" only
        [1, 0, 1, 1, 1, 1],  # don = do | n't
        [1, 0, 1, 1, 1, 1],  # ' = n't: sees the pieces of n't, "don" among them
        [1, 0, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1],
    ]


def test_whitespace_tokens_emoji_and_padding(model):
    vocab = english_vocab()
    short = Doc(vocab, words=["a", "b"])
    odd = Doc(vocab, words=["a", "  ", "b", "😀", "walking"])
    wordpieces, mask = local_mask(model, [short[:], odd[:]], identity_mask)
    assert wordpieces.strings[1] == ["[CLS]", "a", "b", "[UNK]", "walk", "##ing", "[SEP]"]
    assert mask.lengths == [4, 7]
    assert mask.local_mask.shape == (2, 7, 7)
    odd_mask = mask.local_matrices()[1]
    # "a" sees only itself; the whitespace token has no piece; the emoji is [UNK]
    assert as_ints(odd_mask[1]) == [1, 1, 0, 0, 0, 0, 1]
    assert as_ints(odd_mask[3]) == [1, 0, 0, 1, 0, 0, 1]
    # padding rows and columns of the short span are left to the padding mask
    assert mask.local_mask[0, 4:, :].all() and mask.local_mask[0, :, 4:].all()


def test_overlapping_strided_spans_get_their_own_rows(model):
    vocab = english_vocab()
    words = ["the", "cat", "sat", "on", "the", "mat", "and", "ran"]
    doc = parsed_doc(vocab, words, [1, 2, 2, 2, 5, 3, 7, 2])
    spans = [doc[0:5], doc[3:8]]
    mask_builder = SyntaxMask(threshold=1, punct_rule="none")
    _, mask = local_mask(model, spans, mask_builder)
    for span, wordpiece_mask in zip(spans, mask.local_matrices()):
        # one piece per word here: the piece mask is the token mask framed by
        # the always-visible [CLS] and [SEP]
        assert (wordpiece_mask[1:-1, 1:-1] == mask_builder(span)).all()
        assert wordpiece_mask[0].all() and wordpiece_mask[-1].all()


def test_docs_are_numbered_like_the_alignment(model):
    # the alignment numbers the tokens of all Docs in one sequence
    vocab = english_vocab()
    first = parsed_doc(vocab, ["cat", "sat"], [1, 1])
    second = parsed_doc(vocab, ["dog", "ran", "on"], [1, 1, 1])
    spans = [first[:], second[:]]
    _, mask = local_mask(model, spans, identity_mask)
    assert as_ints(mask.local_matrices()[1][1:-1, 1:-1]) == numpy.eye(3, dtype=int).tolist()


def test_missing_parse_policy(model):
    unparsed = Doc(english_vocab(), words=["cat", "sat", "down"])
    with pytest.raises(MissingParseError, match=r"\[SLA-E001\]"):
        local_mask(model, [unparsed[:]], SyntaxMask())
    with pytest.warns(UserWarning, match=r"\[SLA-W001\]"):
        _, mask = local_mask(model, [unparsed[:]], SyntaxMask(), on_missing_parse="global")
    assert mask.local_matrices()[0].all()


def test_a_builder_with_a_wrong_result_is_refused(model):
    doc = parsed_doc(english_vocab(), ["cat", "sat"], [1, 1])
    with pytest.raises(ValueError, match=r"\[SLA-E008\]"):
        local_mask(model, [doc[:]], lambda span: numpy.ones((3, 3), dtype=bool))
    with pytest.raises(ValueError, match=r"\[SLA-E008\]"):
        local_mask(model, [doc[:]], lambda span: numpy.ones((2, 2), dtype=int))


def test_invalid_policy_is_refused(tiny_bert):
    with pytest.raises(ValueError, match=r"\[SLA-E004\]"):
        sla_nlp(tiny_bert, on_missing_parse="ignore")


class SpanBySpanSyntaxMask(SyntaxMask):
    """The same mask; being a subclass, it takes the span-by-span path."""


@pytest.mark.parametrize("punct_rule,chunk_cells", [("authors", 2**24), ("spacy", 2**24), ("authors", 1)])
def test_whole_docs_batched_give_the_inputs_of_the_span_by_span_path(model, punct_rule, chunk_cells):
    vocab = english_vocab()
    short = parsed_doc(vocab, ["the", "cat", "sat", ",", "yes", "."], [1, 2, 2, 2, 2, 2])
    spaced = Doc(vocab, words=["cat", "\n", "sat", "!"], heads=[2, 2, 2, 2], deps=["nsubj", "dep", "ROOT", "punct"])
    cyclic = Doc(vocab, words=["a", "b", "c"], heads=[1, 2, 0], deps=["dep", "dep", "dep"])
    unparsed = Doc(vocab, words=["cat", "sat"])
    long_doc = Doc.from_docs([short] * 25)  # 150 tokens: tree by tree, then sliced
    strided = [long_doc[0:60], long_doc[45:105], long_doc[90:150]]
    spans = [short[:], spaced[:], cyclic[:], unparsed[:], long_doc[:], long_doc[3:9], short[1:4], *strided]
    wordpieces, align = model.tokenize(spans)
    results = []
    for builder in (SyntaxMask(threshold=1, punct_rule=punct_rule), SpanBySpanSyntaxMask(threshold=1, punct_rule=punct_rule)):
        # chunk_cells 1: every Doc a chunk of its own
        with pytest.warns(UserWarning) as warned, patch.object(syntax_inputs_module, "CHUNK_CELLS", chunk_cells):
            inputs = build_syntax_inputs(
                spans, align, wordpieces.lengths, wordpieces.input_ids.shape[1], local=builder,
                on_missing_parse="global", piece_strings=wordpieces.strings,
            )
        codes = sorted(str(warning.message)[:10] for warning in warned)
        results.append((inputs.local_mask, codes))
    (batched, batched_codes), (span_by_span, span_codes) = results
    assert batched_codes == span_codes == ["[SLA-W001]", "[SLA-W003]"]
    assert batched.shape == span_by_span.shape and (batched == span_by_span).all()
    assert not batched[0].all()  # the short sentence's mask hides something at threshold 1


def padded_masks() -> numpy.ndarray:
    """Two spans of 3 and 2 pieces, padded to 3: the first hides piece 2
    from piece 0, the second hides nothing but its padding."""
    mask = numpy.ones((2, 3, 3), dtype=bool)
    mask[0, 0, 2] = False
    mask[1, 2, :] = mask[1, :, 2] = False
    return mask


def test_a_matrix_per_span_is_required():
    with pytest.raises(ValueError, match=r"local_mask.*\(2, 3, 4\) for 2 spans"):
        SyntaxInputs(lengths=[3, 2], local_mask=numpy.ones((2, 3, 4), dtype=bool))
    with pytest.raises(ValueError, match="parent_attention_targets"):
        SyntaxInputs(lengths=[3, 2], parent_attention_targets=numpy.zeros((1, 3), dtype=numpy.int64))


def test_local_matrices_leave_out_the_padding():
    inputs = SyntaxInputs(lengths=[3, 2], local_mask=padded_masks())
    shapes = [matrix.shape for matrix in inputs.local_matrices()]
    assert shapes == [(3, 3), (2, 2)]
    assert inputs.local_matrices()[1].all()
    assert len(inputs) == 2


def test_buckets_stand_in_for_a_mask_and_nothing_gives_no_matrices():
    buckets = numpy.arange(18, dtype=numpy.int16).reshape(2, 3, 3)
    assert numpy.array_equal(SyntaxInputs(lengths=[3, 2], local_buckets=buckets).local_matrices()[1], [[9, 10], [12, 13]])
    assert SyntaxInputs(lengths=[3, 2]).local_matrices() == []


def test_a_span_is_restricted_only_if_its_mask_hides_a_piece_within_its_length():
    assert SyntaxInputs(lengths=[3, 2], local_mask=padded_masks()).locally_restricted().tolist() == [True, False]
    assert SyntaxInputs(lengths=[3, 2], local_buckets=numpy.zeros((2, 3, 3), dtype=numpy.int16)).locally_restricted() is None


def test_to_torch_copies_each_input_with_its_dtype():
    targets = numpy.full((2, 3), IGNORED_TARGET, dtype=numpy.int64)
    buckets = numpy.ones((2, 3, 3), dtype=numpy.int16)
    tensors = SyntaxInputs(lengths=[3, 2], local_mask=padded_masks(), local_buckets=buckets,
                           parent_attention_targets=targets).to_torch(torch.device("cpu"))
    assert tensors["local_mask"].dtype == torch.bool and tensors["local_mask"].shape == (2, 3, 3)
    assert tensors["local_buckets"].dtype == torch.int64
    assert tensors["guide_mask"] is None
    assert tensors["parent_attention_targets"].tolist() == targets.tolist()
    assert tensors["local_restricted"].tolist() == [True, False]


def test_a_degenerate_parse_is_warned_of_once_per_component(model):
    """One head for every token of a long sentence (a parser sourced without
    the tok2vec it listens to gives that): [SLA-W016]; not for a real parse,
    nor for a short sentence whose correct parse is such a star."""
    vocab = english_vocab()
    words = ["The", "cat", "sat", "on", "the", "mat", "."]
    flat = Doc(vocab, words=words, heads=[1] * 7, deps=["nsubj", "ROOT", "dobj", "conj", "conj", "conj", "punct"])
    real = Doc(vocab, words=words, heads=[1, 2, 2, 2, 5, 3, 2], deps=["det", "nsubj", "ROOT", "prep", "det", "pobj",
                                                                       "punct"])
    short_star = Doc(vocab, words=["Go", "home", "now", "."], heads=[0, 0, 0, 0], deps=["ROOT", "advmod", "advmod",
                                                                                          "punct"])

    def build(spans, warned=None):
        wordpieces, align = model.tokenize(spans)
        build_syntax_inputs(spans, align, wordpieces.lengths, wordpieces.input_ids.shape[1],
                            local=SyntaxMask(punct_rule="spacy"), warned=warned)

    warned: set = set()
    with pytest.warns(UserWarning) as caught:
        build([flat[:]])
        build([flat[:], short_star[:]])
        build([flat[:]], warned)
        build([flat[:]], warned)  # the same component: warned already
    messages = [str(warning.message) for warning in caught]
    assert messages[0].startswith("[SLA-W016] The parse of 1 Doc(s) is degenerate: in each of its 1 sentence(s) of 7 "
                                  "or more tokens, one token heads all the others")
    assert messages == [messages[0]] * 3 and warned == {"SLA-W016"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for spans in ([real[:]], [real[:], flat[:]], [short_star[:]]):
            build(spans)
