"""SyntaxAwareAttention takes the computation of its situation: training
(dropout, or gradients to compute) goes through TwoBranchAttention and
gives the reference's context and gradients (tests/reference.py), a layer
without a local input attends globally, and the adapters attend with the
batch SyntaxAwareTransformer.forward binds, refusing to run outside one.
Prediction: test_prediction.py; the materialised probabilities:
test_probabilities.py."""
import pytest
import torch

from spacy_sla.layers import AttentionBatch, SyntaxAwareAttention, SyntaxAwareTransformer, two_branch
from spacy_sla.layers.family_adapters import BertStyleSelfAttention

from .masked_batches import SITUATIONS, SdpaCalls, attend, real_rows, reference_context, situation
from reference import two_branch_attention
from util import batch_inputs, tiny_encoder


@pytest.mark.parametrize("name", [name for name in SITUATIONS if "nothing" not in name])
def test_training_computes_the_reference_and_its_gradients_through_two_branch_attention(name, monkeypatch):
    module, batch, score_bias = situation(name)
    module.train()  # dropout_prob 0: the reference draws no dropout
    if score_bias is not None:
        score_bias.requires_grad_()
    applied = []
    original = two_branch.TwoBranchAttention.apply
    monkeypatch.setattr(two_branch.TwoBranchAttention, "apply", lambda *args: applied.append(1) or original(*args))
    calls = SdpaCalls(monkeypatch)
    context, qkv = attend(module, batch, grad=True, score_bias=score_bias)
    assert applied == [1] and calls.shapes == []
    expected = reference_context(module, batch, qkv, score_bias)
    inputs = qkv + list(module.parameters()) + ([] if score_bias is None else [score_bias])
    weights = torch.randn(context.shape, generator=torch.Generator().manual_seed(9)) * real_rows(batch)
    grads = torch.autograd.grad((context * weights).sum(), inputs)
    expected_grads = torch.autograd.grad((expected * weights).sum(), inputs)
    assert torch.allclose(context * real_rows(batch), expected * real_rows(batch), atol=1e-5)
    for grad, expected_grad in zip(grads, expected_grads):
        assert grad.abs().sum() > 0 and torch.allclose(grad, expected_grad, atol=1e-5), (grad - expected_grad).abs().max()


def test_with_dropout_each_branch_draws_its_own_mask_without_gradients(monkeypatch):
    """Training's dropout in prediction's mode (no gradients) still goes
    through TwoBranchAttention: a fully visible sequence's local context is
    not its global one."""
    module, batch, _ = situation("long, one gathered")
    module.dropout_prob = 0.3
    module.train()
    calls = SdpaCalls(monkeypatch)
    masks = []
    original = two_branch.drop_out_pair
    monkeypatch.setattr(two_branch, "drop_out_pair", lambda *args: masks.append(original(*args)) or masks[-1])
    attend(module, batch)
    assert calls.shapes == [] and len(masks) == 1
    global_keep, local_keep = masks[0]
    assert not torch.equal(global_keep[0], local_keep[0])


def test_without_a_local_input_only_global_attention_runs(monkeypatch):
    attention = SyntaxAwareAttention(hidden_size=16, n_heads=2, dropout_prob=0.0).eval()
    hidden = torch.randn(2, 9, 16)
    query, key, value = (torch.randn(2, 2, 9, 8) for _ in range(3))
    _, mask = batch_inputs()
    batch = AttentionBatch.from_inputs(mask, None, record_gates=True)
    calls = SdpaCalls(monkeypatch)
    with torch.no_grad():
        context, _ = attention.attend(batch, hidden, query, key, value)
    expected, _ = two_branch_attention(query, key, value, batch.global_mask)
    assert calls.shapes == [(2, 9)]
    assert torch.allclose(context, attention.merge_heads(expected), atol=1e-5)
    assert torch.isnan(batch.gates[0]).all()  # the layer's gate, unused


def test_an_adapter_called_outside_a_forward_pass_is_refused():
    sla = SyntaxAwareTransformer(tiny_encoder("bert")).eval()
    module = sla.wrapped_modules()[0]
    assert isinstance(module, BertStyleSelfAttention) and module.bound_batch is None
    with pytest.raises(RuntimeError, match="outside SyntaxAwareTransformer.forward"):
        module(torch.randn(2, 9, 32))
