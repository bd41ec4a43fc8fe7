"""SyntaxAwareTransformer: which layers it wraps, what it refuses, its outputs
(attentions, gradients), and the computation it gives its layers."""
import pytest
import torch
from transformers import BertConfig, BertModel

from spacy_sla.data_classes import ParentAttention
from spacy_sla.layers import SyntaxAwareTransformer, gated_attention
from spacy_sla.layers.family_adapters import BertStyleSelfAttention
from spacy_sla.variants.tree_distance_bias import TreeDistanceBiasLayer

from .encoders import sla_output
from .masked_batches import reference_encoder
from reference import reference_gated_attention
from util import ENCODER_SIZES as SIZES
from util import batch_inputs, random_local_mask, tiny_encoder, vanilla_output


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
    with pytest.raises(ValueError, match=r"\[SLA-E003\]"):
        SyntaxAwareTransformer(tiny_encoder("bert"), sla_layers)


def test_position_embeddings_the_adapter_does_not_compute_are_refused():
    config = BertConfig(hidden_size=32, position_embedding_type="rotary", **SIZES)
    with pytest.raises(ValueError, match=r"\[SLA-E009\].*'rotary' position embeddings.*absolute, relative_key, relative_key_query"):
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
def test_the_outputs_are_the_references_with_and_without_attentions(local, output_attentions):
    """The layers' own computation, and the materialised probabilities of
    output_attentions, give what the reference gives."""
    bias = (lambda config: TreeDistanceBiasLayer(config.num_attention_heads, 5)) if local == "bias" else None
    sla = SyntaxAwareTransformer(tiny_encoder("bert"), local_bias=bias).eval()
    if local == "bias":
        for module in sla.sla_modules():
            torch.nn.init.normal_(module.local_bias.bias, std=2.0)
    reference = reference_encoder(sla, tiny_encoder("bert"), local_bias=bias)
    input_ids, attention_mask = batch_inputs()
    inputs = {"mask": {"local_mask": random_local_mask()}, "bias": {"local_buckets": torch.randint(0, 5, (2, 9, 9))}, "none": {}}[local]
    with torch.no_grad():
        output = sla(input_ids, attention_mask, output_attentions=output_attentions, **inputs).last_hidden_state
        expected = reference(input_ids, attention_mask, **inputs).last_hidden_state
    real = attention_mask.bool()[..., None]
    assert torch.allclose(output * real, expected * real, atol=1e-5)


def test_the_layers_compute_by_the_function_given_at_construction():
    sla = SyntaxAwareTransformer(tiny_encoder("bert"), sla_layers=[0, 2], gated_attention=reference_gated_attention)
    assert [module.gated_attention for module in sla.wrapped_modules()] == [reference_gated_attention] * 2
    assert all(module.gated_attention is gated_attention for module in SyntaxAwareTransformer(tiny_encoder("bert")).wrapped_modules())


def test_invalid_parent_attention_is_refused():
    with pytest.raises(ValueError, match=r"\[SLA-E012\]"):
        SyntaxAwareTransformer(tiny_encoder("bert"), parent_attention=ParentAttention(layer=5))
    with pytest.raises(ValueError, match=r"\[SLA-E012\]"):
        SyntaxAwareTransformer(tiny_encoder("bert"), parent_attention=ParentAttention(head=4))
    middle = SyntaxAwareTransformer(tiny_encoder("bert"), sla_layers=[], parent_attention=ParentAttention())
    assert middle.parent_attention.layer == 1  # 3 layers
