"""The materialised probabilities (probabilities.py) of output_attentions
and of score transforms are the reference's (tests/reference.py), and each
local branch is normalised by its own largest visible score."""
import pytest
import torch

from spacy_sla.layers import AttentionBatch, SyntaxAwareAttention
from spacy_sla.variants.dependency_scale import DependencyScaleLayer

from .masked_batches import (
    HIDDEN,
    N_BUCKETS,
    N_HEADS,
    SHORT,
    SdpaCalls,
    attend,
    attention_mask,
    buckets,
    lengths_of,
    make_inputs,
    real_rows,
    reference_context,
    situation,
)
from reference import two_branch_attention


@pytest.mark.parametrize("name", ["short, some hidden", "long, by width", "short, position term and bias"])
def test_output_attentions_gives_the_reference_probabilities(name):
    module, batch, score_bias = situation(name)
    hidden, qkv = make_inputs(batch.global_mask.shape[-1])
    with torch.no_grad():
        context, probs = module.attend(batch, hidden, *qkv, output_attentions=True, score_bias=score_bias)
        gate = torch.sigmoid(module.gate(hidden)).transpose(1, 2)[..., None]
        expected, expected_probs = two_branch_attention(
            *qkv, batch.global_mask, gate, module.local_input(batch, torch.float32, hidden), score_bias
        )
    real = real_rows(batch)
    assert torch.allclose(context * real, module.merge_heads(expected) * real, atol=1e-5)
    assert torch.allclose(probs * real[:, None], expected_probs * real[:, None], atol=1e-6)
    assert torch.allclose(probs.sum(-1), torch.ones(probs.shape[:-1]), atol=1e-5)


def far_below_the_maximum_inputs(gap: float):
    """Queries and keys whose scores put key 0 `gap` above every other key of
    each row; the local mask hides key 0 from every row but its own, so each
    local branch only sees scores far below the row maximum."""
    generator = torch.Generator().manual_seed(4)
    head_size = 8
    query = torch.zeros(1, 2, 6, head_size)
    query[..., 0] = 1.0
    key = torch.randn(1, 2, 6, head_size, generator=generator) * 0.1
    key[..., 0] = torch.randn(1, 2, 6, generator=generator) * 0.1
    key[:, :, 0, 0] = gap * head_size**0.5  # score of key 0: gap / sqrt(d) * sqrt(d) = gap
    value = torch.randn(1, 2, 6, head_size, generator=generator)
    hidden = torch.randn(1, 6, 16, generator=generator)
    local_visible = torch.eye(6, dtype=torch.bool)[None] | torch.diag(torch.ones(5, dtype=torch.bool), 1)[None]
    return hidden, query, key, value, local_visible


@pytest.mark.parametrize("dtype,atol", [(torch.float32, 1e-5), (torch.bfloat16, 5e-2), (torch.float16, 1e-2)])
def test_the_local_branch_is_normalised_by_its_own_maximum(dtype, atol):
    """With every locally visible score ~200 below the row maximum (past
    exp's underflow in any float type), the local branch must still be a
    softmax over its visible keys, not zeros: in prediction (mixed
    probabilities in float32, SDPA in half precision) and with
    output_attentions."""
    torch.manual_seed(5)
    attention = SyntaxAwareAttention(hidden_size=16, n_heads=2, dropout_prob=0.0).eval()
    hidden, query, key, value, local_visible = far_below_the_maximum_inputs(gap=200.0)
    batch = AttentionBatch.from_inputs(torch.ones(1, 6, dtype=torch.long), local_visible)
    with torch.no_grad():
        gate = torch.sigmoid(attention.double().gate(hidden.double())).transpose(1, 2)[..., None]
        expected, _ = two_branch_attention(query.double(), key.double(), value.double(), batch.global_mask, gate, batch.local_mask)
    attention = attention.to(dtype)
    outputs = []
    try:
        with torch.no_grad():
            for output_attentions in (False, True):
                outputs.append(attention.attend(batch, *(x.to(dtype) for x in (hidden, query, key, value)), output_attentions))
    except RuntimeError as error:  # an operator this CPU build lacks for the type
        pytest.skip(f"{dtype} on this CPU: {error}")
    for context, _ in outputs:
        assert torch.allclose(context.double(), attention.merge_heads(expected), atol=atol)
    # row 1 cannot see key 0 locally: its local share (g) goes to keys 1 and 2
    assert outputs[1][1][0, :, 1, 1:3].float().sum(-1).min() > 0.3


def test_a_score_transform_materialises_the_probabilities_and_gives_the_references(monkeypatch):
    """The authors' soft threshold rescales the scores: no additive mask
    expresses it, so prediction and training take the probabilities."""
    torch.manual_seed(7)
    module = SyntaxAwareAttention(HIDDEN, N_HEADS, 0.0, local_bias=DependencyScaleLayer(HIDDEN, N_HEADS, N_BUCKETS - 3))
    with torch.no_grad():
        module.local_bias.threshold.weight.normal_(std=1.0)
    lengths = lengths_of(SHORT)
    batch = AttentionBatch.from_inputs(attention_mask(lengths), local_buckets=buckets(SHORT))
    calls = SdpaCalls(monkeypatch)
    for training in (False, True):
        context, qkv = attend(module.train(training), batch, grad=training)
        expected = reference_context(module, batch, qkv)
        assert torch.allclose(context * real_rows(batch), expected * real_rows(batch), atol=1e-5)
    assert calls.shapes == []
