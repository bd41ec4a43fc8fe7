"""Prediction leaves out the local branch of the sequences whose boolean mask
hides nothing (their local context is the global one, whatever the gate):
the outputs, gates and gradients equal those of computing every branch, and
the skip happens only in prediction, only for boolean masks. These tests
count SDPA calls, so they turn off the materialised prediction of short
inputs (tests/test_attention_materialised.py) and the groups by width."""
from typing import List

import numpy
import pytest
import torch
from spacy.tokens import Doc
from torch.nn import functional as F

from spacy_sla.data_classes import SyntaxInputs
from spacy_sla.layers import AttentionBatch, SyntaxAwareAttention, SyntaxAwareTransformer, attending
from spacy_sla.layers import attention as attention_module
from spacy_sla.layers.local_bias import DistanceBucketBias

from util import english_vocab, parsed_doc, sla_nlp, the_cat_sat, tiny_encoder, trf_output

N_SEQUENCES, N_HEADS, HEAD_SIZE, N_PIECES = 4, 4, 8, 9
HIDDEN = N_HEADS * HEAD_SIZE
# sequences 1 and 3 are padded; what a mask says about padding never counts
LENGTHS = [9, 6, 9, 4]


@pytest.fixture(autouse=True)
def two_sdpa_calls(monkeypatch):
    monkeypatch.setattr(SyntaxAwareAttention, "materialise_up_to", 0)
    # the groups by width have their own tests (tests/test_attention_width_groups.py)
    monkeypatch.setattr(attention_module, "WIDTH_GROUPS_MIN_SAVING", 1.0)


class SdpaCalls:
    """Records the batch size of every fused attention call."""

    def __init__(self, monkeypatch):
        self.batch_sizes: List[int] = []
        original = F.scaled_dot_product_attention

        def recorded(query, *args, **kwargs):
            self.batch_sizes.append(query.shape[0])
            return original(query, *args, **kwargs)

        monkeypatch.setattr(attention_module.F, "scaled_dot_product_attention", recorded)


def attention_mask() -> torch.Tensor:
    mask = torch.zeros(N_SEQUENCES, N_PIECES, dtype=torch.long)
    for i, length in enumerate(LENGTHS):
        mask[i, :length] = 1
    return mask


def local_mask(restricted: List[int]) -> torch.Tensor:
    """Hides real pieces from each other only in the `restricted`
    sequences; every other sequence hides nothing but padding pairs."""
    generator = torch.Generator().manual_seed(2)
    mask = (torch.rand(N_SEQUENCES, N_PIECES, N_PIECES, generator=generator) < 0.4) | torch.eye(N_PIECES, dtype=torch.bool)
    for i, length in enumerate(LENGTHS):
        if i not in restricted:
            mask[i, :length, :length] = True
        assert bool(mask[i, :length, :length].all()) != (i in restricted)
    return mask


def make_module(bias: bool = False, dropout: float = 0.3) -> SyntaxAwareAttention:
    torch.manual_seed(7)
    local_bias = None
    if bias:
        local_bias = DistanceBucketBias(N_HEADS, 5)
        torch.nn.init.normal_(local_bias.bias, std=2.0)
    module = SyntaxAwareAttention(HIDDEN, N_HEADS, dropout, local_bias=local_bias)
    with torch.no_grad():
        module.gate.weight.normal_(std=0.5)
        module.gate.bias.fill_(0.2)
    return module.eval()


def make_inputs():
    generator = torch.Generator().manual_seed(3)
    hidden = torch.randn(N_SEQUENCES, N_PIECES, HIDDEN, generator=generator)
    qkv = [torch.randn(N_SEQUENCES, N_HEADS, N_PIECES, HEAD_SIZE, generator=generator) for _ in range(3)]
    return hidden, qkv


def attend(module, batch, skip: bool, monkeypatch, grad: bool = False):
    """The context (and the batch's recorded gates) with or without the skip."""
    monkeypatch.setattr(SyntaxAwareAttention, "skip_fully_visible", skip)
    hidden, qkv = make_inputs()
    if grad:
        qkv = [tensor.requires_grad_() for tensor in qkv]
    with torch.set_grad_enabled(grad), attending(batch):
        context, _ = module.attend(hidden, *qkv)
    return context, qkv


@pytest.mark.parametrize(
    "restricted,local_batch_sizes",
    [
        ([], []),  # every sequence fully visible: no local call at all
        ([2], [1]),
        ([0, 3], [2]),
        ([0, 1, 3], [3]),  # 3 / 4 <= GATHER_MAX_SHARE
        ([0, 1, 2, 3], [N_SEQUENCES]),  # all: the plain batched call
    ],
)
def test_prediction_computes_the_local_branch_of_restricted_sequences_only(restricted, local_batch_sizes, monkeypatch):
    module = make_module()
    batch = AttentionBatch.from_inputs(attention_mask(), local_mask(restricted), record_gates=True)
    expected, _ = attend(module, AttentionBatch.from_inputs(attention_mask(), local_mask(restricted), record_gates=True), False, monkeypatch)
    calls = SdpaCalls(monkeypatch)
    context, _ = attend(module, batch, True, monkeypatch)
    assert calls.batch_sizes == [N_SEQUENCES] + local_batch_sizes
    assert torch.allclose(context, expected, atol=1e-5), (context - expected).abs().max()
    # the gates of every sequence, skipped or not, as before
    assert len(batch.gates) == 1 and batch.gates[0].shape == (N_SEQUENCES, N_PIECES)
    assert torch.isfinite(batch.gates[0]).all()
    hidden, _ = make_inputs()
    with torch.no_grad():
        assert torch.equal(batch.gates[0], torch.sigmoid(module.gate(hidden))[..., 0])


def test_skipped_sequences_get_exactly_their_global_context(monkeypatch):
    module = make_module()
    batch = AttentionBatch.from_inputs(attention_mask(), local_mask([2]))
    context, (query, key, value) = attend(module, batch, True, monkeypatch)
    global_context = module.merge_heads(F.scaled_dot_product_attention(query, key, value, attn_mask=batch.global_mask))
    skipped = [0, 1, 3]
    assert torch.equal(context[skipped], global_context[skipped])
    assert not torch.allclose(context[2], global_context[2], atol=1e-3)


def test_above_the_gather_share_every_sequence_takes_the_batched_call(monkeypatch):
    monkeypatch.setattr(attention_module, "GATHER_MAX_SHARE", 0.5)
    module = make_module()
    expected, _ = attend(module, AttentionBatch.from_inputs(attention_mask(), local_mask([0, 1, 3])), False, monkeypatch)
    batch = AttentionBatch.from_inputs(attention_mask(), local_mask([0, 1, 3]))
    assert batch.local_rows is None
    calls = SdpaCalls(monkeypatch)
    context, _ = attend(module, batch, True, monkeypatch)
    assert calls.batch_sizes == [N_SEQUENCES, N_SEQUENCES]
    assert torch.allclose(context, expected, atol=1e-5)
    # at or below the share it gathers
    assert AttentionBatch.from_inputs(attention_mask(), local_mask([0, 3])).local_rows.tolist() == [0, 3]


def test_a_mask_with_an_empty_row_keeps_the_boolean_form_when_gathered(monkeypatch):
    """No builder makes a row that sees no key; SDPA gives its local branch
    zeros with the boolean mask, gathered or not."""
    mask = local_mask([1])
    mask[1, 2] = False
    module = make_module()
    expected, _ = attend(module, AttentionBatch.from_inputs(attention_mask(), mask), False, monkeypatch)
    calls = SdpaCalls(monkeypatch)
    context, _ = attend(module, AttentionBatch.from_inputs(attention_mask(), mask), True, monkeypatch)
    assert calls.batch_sizes == [N_SEQUENCES, 1]
    assert torch.allclose(context, expected, atol=1e-5)


def test_the_flags_given_from_the_cpu_equal_those_read_from_the_mask():
    for restricted in ([], [2], [0, 3], [0, 1, 2, 3]):
        mask = local_mask(restricted)
        flags = torch.tensor([i in restricted for i in range(N_SEQUENCES)])
        given = AttentionBatch.from_inputs(attention_mask(), mask, local_restricted=flags).local_rows
        read = AttentionBatch.from_inputs(attention_mask(), mask).local_rows
        if len(restricted) == N_SEQUENCES:
            assert given is None and read is None
        else:
            assert given.tolist() == read.tolist() == restricted
    # no boolean mask, no rows: the bias variants always compute every branch
    buckets = torch.zeros(N_SEQUENCES, N_PIECES, N_PIECES, dtype=torch.long)
    assert AttentionBatch.from_inputs(attention_mask(), local_buckets=buckets).local_rows is None


def test_syntax_inputs_flag_what_the_mask_hides_within_each_span():
    mask = numpy.ones((3, 5, 5), dtype=bool)
    mask[1, 3:, :] = False  # padding rows of a 3-piece span: hides nothing real
    mask[1, :, 4] = False
    mask[2, 0, 1] = False  # a real pair
    inputs = SyntaxInputs(lengths=[5, 3, 5], local_mask=mask)
    assert inputs.locally_restricted().tolist() == [False, False, True]
    tensors = inputs.to_torch(torch.device("cpu"))
    assert tensors["local_restricted"].tolist() == [False, False, True]
    buckets = SyntaxInputs(lengths=[5], local_buckets=numpy.zeros((1, 5, 5), dtype=numpy.int16))
    assert buckets.locally_restricted() is None and buckets.to_torch(torch.device("cpu"))["local_restricted"] is None


def test_bias_variants_compute_every_local_branch(monkeypatch):
    module = make_module(bias=True)
    buckets = torch.randint(0, 5, (N_SEQUENCES, N_PIECES, N_PIECES), generator=torch.Generator().manual_seed(4))
    expected, _ = attend(module, AttentionBatch.from_inputs(attention_mask(), local_buckets=buckets), False, monkeypatch)
    calls = SdpaCalls(monkeypatch)
    context, _ = attend(module, AttentionBatch.from_inputs(attention_mask(), local_buckets=buckets), True, monkeypatch)
    assert calls.batch_sizes == [N_SEQUENCES, N_SEQUENCES]
    assert torch.equal(context, expected)


def test_with_dropout_every_local_branch_is_computed(monkeypatch):
    """Each branch draws its own dropout mask, so a fully visible sequence's
    local context is not its global one."""
    module = make_module(dropout=0.3).train()
    calls = SdpaCalls(monkeypatch)
    attend(module, AttentionBatch.from_inputs(attention_mask(), local_mask([2])), True, monkeypatch)
    assert calls.batch_sizes == [N_SEQUENCES, N_SEQUENCES]
    # without dropout (p = 0) in train mode and no gradients, it skips
    calls.batch_sizes.clear()
    attend(make_module(dropout=0.0).train(), AttentionBatch.from_inputs(attention_mask(), local_mask([2])), True, monkeypatch)
    assert calls.batch_sizes == [N_SEQUENCES, 1]


@pytest.mark.parametrize("memory_saving", [True, False])
def test_with_gradients_nothing_is_skipped_and_the_gradients_are_unchanged(memory_saving, monkeypatch):
    monkeypatch.setattr(SyntaxAwareAttention, "memory_saving_training", memory_saving)
    results = {}
    for skip in (True, False):
        module = make_module(dropout=0.0)
        calls = SdpaCalls(monkeypatch)
        context, qkv = attend(module, AttentionBatch.from_inputs(attention_mask(), local_mask([2])), skip, monkeypatch, grad=True)
        weights = torch.randn(context.shape, generator=torch.Generator().manual_seed(9))
        (context * weights).sum().backward()
        results[skip] = (context.detach(), [t.grad for t in qkv] + [module.gate.weight.grad, module.gate.bias.grad])
        assert calls.batch_sizes == ([] if memory_saving else [N_SEQUENCES, N_SEQUENCES])
    assert torch.equal(results[True][0], results[False][0])
    for with_skip, without in zip(results[True][1], results[False][1]):
        assert with_skip.abs().sum() > 0 and torch.equal(with_skip, without)


def encoder_outputs(skip: bool, restricted: List[int], monkeypatch):
    monkeypatch.setattr(SyntaxAwareAttention, "skip_fully_visible", skip)
    sla = SyntaxAwareTransformer(tiny_encoder("bert")).eval()
    input_ids = torch.randint(5, 50, (N_SEQUENCES, N_PIECES), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        output = sla(input_ids, attention_mask(), local_mask=local_mask(restricted), record_gates=True)
    return output.last_hidden_state, output.gates


@pytest.mark.parametrize("restricted", [[], [1], [0, 2, 3], [0, 1, 2, 3]])
def test_the_encoder_output_and_gates_are_unchanged(restricted, monkeypatch):
    expected, expected_gates = encoder_outputs(False, restricted, monkeypatch)
    calls = SdpaCalls(monkeypatch)
    output, gates = encoder_outputs(True, restricted, monkeypatch)
    local_size = len(restricted) if len(restricted) < N_SEQUENCES else N_SEQUENCES
    assert calls.batch_sizes == ([N_SEQUENCES] + ([local_size] if restricted else [])) * 3
    assert torch.allclose(output, expected, atol=1e-5), (output - expected).abs().max()
    assert gates.shape == (3, N_SEQUENCES, N_PIECES)
    assert torch.allclose(gates, expected_gates, atol=1e-6)


def test_the_pipeline_passes_the_flags_and_its_outputs_and_gates_are_unchanged(tiny_bert, monkeypatch):
    """Two Docs the syntax mask hides nothing in (3 words; one sentence of
    m + 1 tokens), two it restricts (two sentences, which never see each
    other; a chain longer than m)."""
    vocab = english_vocab()
    chain = parsed_doc(vocab, "a b c d e f g".split(), [1, 2, 3, 4, 5, 6, 6])
    short = parsed_doc(vocab, ["she", "ran", "home"], [1, 1, 1])
    two_sentences = Doc.from_docs([the_cat_sat(vocab), short])
    docs = [short, two_sentences, chain, parsed_doc(vocab, "she ran .".split(), [1, 1, 1])]
    mask = {"@misc": "spacy-sla.syntax_mask.v3", "threshold": 3, "punct_rule": "spacy"}
    component = sla_nlp(tiny_bert, mask=mask).get_pipe("sla_transformer")
    component.store_gates = True
    flags = []
    original = AttentionBatch.from_inputs.__func__

    def recorded(cls, *args, **kwargs):
        flags.append(args[5].tolist() if len(args) > 5 else kwargs.get("local_restricted"))
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(AttentionBatch, "from_inputs", classmethod(recorded))
    results = {}
    calls = SdpaCalls(monkeypatch)
    for skip in (False, True):
        monkeypatch.setattr(SyntaxAwareAttention, "skip_fully_visible", skip)
        calls.batch_sizes = []
        predicted = list(component.pipe([doc.copy() for doc in docs]))
        results[skip] = ([trf_output(doc) for doc in predicted], [doc._.sla_gates for doc in predicted], calls.batch_sizes)
    assert flags == [[False, True, True, False]] * 2
    assert results[False][2] == [4, 4] * 2
    assert results[True][2] == [4, 2] * 2
    for with_skip, without in zip(results[True][0], results[False][0]):
        assert numpy.allclose(with_skip, without, atol=1e-5)
    for with_skip, without in zip(results[True][1], results[False][1]):
        assert with_skip.shape == without.shape and numpy.isfinite(with_skip).all()
        assert numpy.allclose(with_skip, without, atol=1e-6)

