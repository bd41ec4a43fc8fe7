import copy

import pytest
import torch
from transformers import (
    BertConfig,
    BertModel,
    GPT2Config,
    GPT2Model,
)

from spacy_sla.layers import AttentionBatch, SyntaxAwareAttention, SyntaxAwareTransformer, attending
from spacy_sla.layers.attention import BertStyleSelfAttention

from util import ENCODER_SIZES as SIZES
from util import batch_inputs, random_local_mask, tiny_encoder, vanilla_output


def sla_output(model, input_ids, attention_mask, local_mask, sla_layers=None):
    sla = SyntaxAwareTransformer(copy.deepcopy(model), sla_layers).eval()
    with torch.no_grad():
        return sla(input_ids, attention_mask, local_mask=local_mask).last_hidden_state


def reference_attention(hidden, query, key, value, gate, key_is_real, local_visible):
    """The SLA formulas written out with an explicit softmax."""
    head_size = query.shape[-1]
    scores = query @ key.transpose(-1, -2) / head_size**0.5
    padding = torch.where(key_is_real[:, None, None, :], 0.0, float("-inf"))
    local = torch.where(local_visible[:, None] | ~key_is_real[:, None, :, None], 0.0, float("-inf"))
    global_probs = torch.softmax(scores + padding, -1)
    local_probs = torch.softmax(scores + padding + local, -1)
    g = torch.sigmoid(gate(hidden))  # (batch, pieces, 1)
    merge = lambda x: x.transpose(1, 2).reshape(hidden.shape[0], hidden.shape[1], -1)  # noqa: E731
    return g * merge(local_probs @ value) + (1 - g) * merge(global_probs @ value)


@pytest.mark.parametrize("output_attentions", [False, True])
def test_gated_attention_follows_the_formulas(output_attentions):
    torch.manual_seed(3)
    attention = SyntaxAwareAttention(hidden_size=16, n_heads=2, dropout_prob=0.5).eval()
    with torch.no_grad():
        attention.gate.weight.normal_(std=0.5)
        attention.gate.bias.fill_(0.3)
    hidden = torch.randn(2, 9, 16)
    query, key, value = (torch.randn(2, 2, 9, 8) for _ in range(3))
    _, attention_mask = batch_inputs()
    local_visible = random_local_mask()
    with torch.no_grad(), attending(AttentionBatch.from_inputs(attention_mask, local_visible)):
        context, probs = attention.attend(hidden, query, key, value, output_attentions)
        expected = reference_attention(
            hidden, query, key, value, attention.gate, attention_mask.bool(), local_visible
        )
    assert torch.allclose(context, expected, atol=1e-5)
    if output_attentions:
        assert torch.allclose(probs.sum(-1), torch.ones(2, 2, 9))
        hidden_by_both = ~local_visible[:, None] & torch.ones(2, 2, 9, 9, dtype=torch.bool)
        hidden_by_both &= ~attention_mask.bool()[:, None, None, :] | ~local_visible[:, None]
        # where the local mask hides a real key, only the global branch's
        # share (1 - g) of the probability remains
        g = torch.sigmoid(attention.gate(hidden))[:, None]
        assert (probs <= (1 - g) + 1e-6).masked_select(hidden_by_both).all()
    else:
        assert probs is None


def test_without_a_local_mask_only_global_attention_runs():
    attention = SyntaxAwareAttention(hidden_size=16, n_heads=2, dropout_prob=0.0).eval()
    hidden = torch.randn(2, 9, 16)
    query, key, value = (torch.randn(2, 2, 9, 8) for _ in range(3))
    _, attention_mask = batch_inputs()
    with torch.no_grad(), attending(AttentionBatch.from_inputs(attention_mask, None)):
        context, _ = attention.attend(hidden, query, key, value)
        everything = torch.ones(2, 9, 9, dtype=torch.bool)
        expected = reference_attention(hidden, query, key, value, attention.gate, attention_mask.bool(), everything)
    assert torch.allclose(context, expected, atol=1e-5)


def test_attention_outside_a_forward_pass_is_refused():
    attention = SyntaxAwareAttention(16, 2, 0.0)
    with pytest.raises(RuntimeError, match="outside"):
        attention.attend(torch.randn(1, 3, 16), *(torch.randn(1, 2, 3, 8) for _ in range(3)))


def test_the_active_batch_belongs_to_the_call_and_is_restored_afterwards():
    sla = SyntaxAwareTransformer(tiny_encoder("bert")).eval()
    attention = sla.sla_modules()[0]
    input_ids, attention_mask = batch_inputs()
    outer = AttentionBatch.from_inputs(attention_mask, random_local_mask(), record_gates=True)
    hidden = torch.randn(2, 9, 32)
    query, key, value = (torch.randn(2, 4, 9, 8) for _ in range(3))
    with torch.no_grad(), attending(outer):
        # a nested forward pass has its own batch and leaves the outer one active
        inner = sla(input_ids, attention_mask, local_mask=torch.eye(9, dtype=torch.bool).expand(2, 9, 9), record_gates=True)
        assert inner.gates.shape == (3, 2, 9) and outer.gates == []
        attention.attend(hidden, query, key, value)
    assert len(outer.gates) == 1
    with pytest.raises(RuntimeError, match="outside"):
        attention.attend(hidden, query, key, value)


@pytest.mark.parametrize("family", ["bert", "roberta", "electra", "distilbert"])
def test_a_mask_that_hides_nothing_gives_the_plain_encoder_output(family):
    model = tiny_encoder(family)
    input_ids, attention_mask = batch_inputs()
    expected = vanilla_output(model, input_ids, attention_mask)
    everything = torch.ones(2, 9, 9, dtype=torch.bool)
    real = attention_mask.bool()[..., None]
    assert torch.allclose(sla_output(model, input_ids, attention_mask, everything) * real, expected * real, atol=1e-5)
    assert torch.allclose(sla_output(model, input_ids, attention_mask, None) * real, expected * real, atol=1e-5)


@pytest.mark.parametrize("family", ["bert", "roberta", "electra", "distilbert"])
def test_a_restrictive_mask_changes_the_output(family):
    model = tiny_encoder(family)
    input_ids, attention_mask = batch_inputs()
    expected = vanilla_output(model, input_ids, attention_mask)
    diagonal = torch.eye(9, dtype=torch.bool).expand(2, 9, 9)
    output = sla_output(model, input_ids, attention_mask, diagonal)
    assert (output[0] - expected[0]).abs().max() > 1e-3


def test_every_layer_gets_its_own_gate_and_keeps_its_projections():
    model = tiny_encoder("bert")
    query_weight = model.encoder.layer[1].attention.self.query.weight
    sla = SyntaxAwareTransformer(model)
    assert sla.sla_layers == [0, 1, 2]
    modules = sla.sla_modules()
    assert len(modules) == 3
    assert len({id(m.gate) for m in modules}) == 3
    assert all(m.gate.weight.shape == (1, 32) and m.gate.bias.shape == (1,) for m in modules)
    assert sla.transformer.encoder.layer[1].attention.self.query.weight is query_weight
    assert sla.sla_parameter_names() == [
        f"transformer.encoder.layer.{i}.attention.self.gate.{p}" for i in range(3) for p in ("weight", "bias")
    ]


def test_sla_layers_picks_a_subset():
    model = tiny_encoder("bert")
    original_type = type(model.encoder.layer[1].attention.self)
    sla = SyntaxAwareTransformer(model, sla_layers=[0, -1])
    assert sla.sla_layers == [0, 2]
    layers = sla.transformer.encoder.layer
    assert isinstance(layers[0].attention.self, BertStyleSelfAttention)
    assert type(layers[1].attention.self) is original_type
    assert isinstance(layers[2].attention.self, BertStyleSelfAttention)


def test_a_subset_only_changes_its_layers():
    model = tiny_encoder("bert")
    input_ids, attention_mask = batch_inputs()
    diagonal = torch.eye(9, dtype=torch.bool).expand(2, 9, 9)
    last_only = sla_output(model, input_ids, attention_mask, diagonal, sla_layers=[2])
    every = sla_output(model, input_ids, attention_mask, diagonal)
    vanilla = vanilla_output(model, input_ids, attention_mask)
    assert not torch.allclose(last_only, every, atol=1e-4)
    assert not torch.allclose(last_only, vanilla, atol=1e-4)


@pytest.mark.parametrize("sla_layers", [[3], [-4], [0, 0], ["1"], [True]])
def test_invalid_layers_are_refused(sla_layers):
    with pytest.raises(ValueError, match=r"\[E003\]"):
        SyntaxAwareTransformer(tiny_encoder("bert"), sla_layers)


def test_unsupported_architecture_names_the_supported_ones():
    model = GPT2Model(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=20))
    with pytest.raises(ValueError, match=r"\[E002\].*gpt2.*bert, camembert, distilbert, electra, roberta"):
        SyntaxAwareTransformer(model)


def test_relative_position_attention_is_refused():
    config = BertConfig(hidden_size=32, position_embedding_type="relative_key", **SIZES)
    with pytest.raises(ValueError, match=r"\[E009\].*relative_key"):
        SyntaxAwareTransformer(BertModel(config))


def test_output_attentions_returns_mixed_probabilities():
    model = tiny_encoder("bert")
    sla = SyntaxAwareTransformer(model).eval()
    input_ids, attention_mask = batch_inputs()
    with torch.no_grad():
        fast = sla(input_ids, attention_mask, local_mask=random_local_mask()).last_hidden_state
        explicit = sla(input_ids, attention_mask, local_mask=random_local_mask(), output_attentions=True)
    assert torch.allclose(fast, explicit.last_hidden_state, atol=1e-5)
    assert len(explicit.attentions) == 3
    assert explicit.attentions[0].shape == (2, 4, 9, 9)
    # padding keys get no attention
    assert explicit.attentions[0][1, :, :, 6:].abs().max() == 0


def test_gradients_reach_the_gates_and_the_encoder():
    sla = SyntaxAwareTransformer(tiny_encoder("bert")).train()
    input_ids, attention_mask = batch_inputs()
    output = sla(input_ids, attention_mask, local_mask=random_local_mask()).last_hidden_state
    output.sum().backward()
    gates = [m.gate.weight.grad for m in sla.sla_modules()]
    assert all(g is not None and g.abs().sum() > 0 for g in gates)
    assert sla.transformer.embeddings.word_embeddings.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("local", ["mask", "bias", "none"])
@pytest.mark.parametrize("output_attentions", [False, True])
def test_the_fused_and_the_shared_exponent_paths_agree(local, output_attentions, monkeypatch):
    """Two fused SDPA calls and the materialised path (one score matrix with a
    shared exponent, used for output_attentions) compute the same attention."""
    from spacy_sla.layers.local_bias import DistanceBucketBias

    model = tiny_encoder("bert")
    bias = (lambda config: DistanceBucketBias(config.num_attention_heads, 5)) if local == "bias" else None
    sla = SyntaxAwareTransformer(model, local_bias=bias).eval()
    if local == "bias":
        for module in sla.sla_modules():
            torch.nn.init.normal_(module.local_bias.bias, std=2.0)
    input_ids, attention_mask = batch_inputs()
    inputs = {"mask": {"local_mask": random_local_mask()}, "bias": {"local_buckets": torch.randint(0, 5, (2, 9, 9))}, "none": {}}[local]
    outputs = {}
    for fused in (True, False):
        monkeypatch.setattr(SyntaxAwareAttention, "use_fused_attention", fused)
        with torch.no_grad():
            outputs[fused] = sla(input_ids, attention_mask, **inputs).last_hidden_state
    real = attention_mask.bool()[..., None]
    assert torch.allclose(outputs[True] * real, outputs[False] * real, atol=1e-5)


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
def test_the_materialised_path_normalises_the_local_branch_by_its_own_maximum(dtype, atol, monkeypatch):
    """With every locally visible score ~200 below the row maximum (past
    exp's underflow in any float type), the local branch must still be a
    softmax over its visible keys, as in the fused path, not zeros."""
    torch.manual_seed(5)
    attention = SyntaxAwareAttention(hidden_size=16, n_heads=2, dropout_prob=0.0).eval()
    hidden, query, key, value, local_visible = far_below_the_maximum_inputs(gap=200.0)
    attention_mask = torch.ones(1, 6, dtype=torch.long)
    with torch.no_grad():
        expected = reference_attention(
            hidden.double(), query.double(), key.double(), value.double(), attention.double().gate,
            attention_mask.bool(), local_visible,
        )
    attention = attention.to(dtype)
    outputs = {}
    for fused in (True, False):
        monkeypatch.setattr(SyntaxAwareAttention, "use_fused_attention", fused)
        batch = AttentionBatch.from_inputs(attention_mask, local_visible)
        try:
            with torch.no_grad(), attending(batch):
                outputs[fused], _ = attention.attend(*(x.to(dtype) for x in (hidden, query, key, value)))
        except RuntimeError as error:  # an operator this CPU build lacks for the type
            pytest.skip(f"{dtype} on this CPU: {error}")
    for fused, output in outputs.items():
        assert torch.allclose(output.double(), expected, atol=atol), (fused, (output.double() - expected).abs().max())
    with torch.no_grad(), attending(AttentionBatch.from_inputs(attention_mask, local_visible)):
        _, probs = attention.attend(*(x.to(dtype) for x in (hidden, query, key, value)), output_attentions=True)
    # row 1 cannot see key 0 locally: its local share (g) goes to keys 1 and 2
    assert probs[0, :, 1, 1:3].float().sum(-1).min() > 0.3
