"""LISA's parent loss: the cross-entropy of one head's attention against
the parent piece of each piece, on hand-made scores and in the encoder."""
import math

import torch
from torch.nn import functional as F

from spacy_sla.data_classes import IGNORED_TARGET, ParentAttention
from spacy_sla.layers import AttentionBatch, SyntaxAwareTransformer
from spacy_sla.layers.parent_attention import parent_attention_loss

from util import batch_inputs, tiny_encoder


def test_the_loss_is_the_cross_entropy_over_the_real_keys_with_the_position_term():
    torch.manual_seed(0)
    query, key = torch.randn(1, 3, 4), torch.randn(1, 3, 4)
    bias = torch.randn(1, 2, 3, 3)
    real = torch.tensor([[[[True, True, False]]]])  # the third piece is padding
    targets = torch.tensor([[1, IGNORED_TARGET, 0]])
    batch = AttentionBatch(global_mask=real, parent_attention_targets=targets)
    loss = parent_attention_loss(batch, query, key, head=1, score_bias=bias)
    scores = query[0] @ key[0].T / math.sqrt(4) + bias[0, 1]
    log_probs = scores[:, :2].log_softmax(-1)  # padding keys get no probability
    assert torch.allclose(loss, -(log_probs[0, 1] + log_probs[2, 0]) / 2, atol=1e-6)
    shared = parent_attention_loss(batch, query, key, head=1, score_bias=bias[:, :1])  # one term for all heads
    assert torch.allclose(shared, F.nll_loss(
        (query[0] @ key[0].T / 2 + bias[0, 0]).masked_fill(~real[0, 0], -1e9).log_softmax(-1), targets[0],
        ignore_index=IGNORED_TARGET), atol=1e-5)


def test_a_batch_without_parents_adds_a_zero_that_keeps_the_graph():
    query = torch.randn(2, 3, 4, requires_grad=True)
    batch = AttentionBatch(global_mask=torch.ones(2, 1, 1, 3, dtype=torch.bool),
                           parent_attention_targets=torch.full((2, 3), IGNORED_TARGET))
    loss = parent_attention_loss(batch, query, torch.randn(2, 3, 4), head=0)
    assert loss.item() == 0.0
    loss.backward()
    assert torch.equal(query.grad, torch.zeros_like(query))


def test_the_parent_loss_is_the_cross_entropy_of_the_supervised_head():
    input_ids, attention_mask = batch_inputs()
    lisa = SyntaxAwareTransformer(
        tiny_encoder("bert"), sla_layers=[], parent_attention=ParentAttention(layer=1, head=2, weight=0.5)
    ).train()
    for module in lisa.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    lisa.transformer.config.attention_probs_dropout_prob = 0.0
    for module in lisa.modules():
        if hasattr(module, "dropout_prob"):
            module.dropout_prob = 0.0
    targets = torch.full((2, 9), IGNORED_TARGET)
    targets[0, 1:4] = torch.tensor([2, 2, 2])
    targets[1, 1:3] = torch.tensor([1, 4])
    output = lisa(input_ids, attention_mask, parent_attention_targets=targets, output_attentions=True)
    probs = output.attentions[1][:, 2]  # layer 1, head 2
    chosen = [probs[0, 1, 2], probs[0, 2, 2], probs[0, 3, 2], probs[1, 1, 1], probs[1, 2, 4]]
    expected = -torch.log(torch.stack(chosen)).mean()
    assert torch.allclose(output.parent_attention_loss, 0.5 * expected, atol=1e-5)
    output.parent_attention_loss.backward()
    query = lisa.transformer.encoder.layer[1].attention.self.query.weight
    assert query.grad is not None and query.grad.abs().sum() > 0
    assert lisa.transformer.encoder.layer[2].attention.self.query.weight.grad is None
