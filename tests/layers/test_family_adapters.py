"""The model-family adapters: every registered family's encoder is wrapped
layer by layer, gives the plain output with a mask that hides nothing, and
an unsupported family is refused with the supported ones named."""
import pytest
import torch
from transformers import GPT2Config, GPT2Model

from spacy_sla.layers import ATTENTION_FAMILIES, FamilyAdapter, SyntaxAwareTransformer
from spacy_sla.layers.family_adapters import BertStyleSelfAttention, DistilBertStyleAttention, attention_family

from .encoders import sla_output
from util import batch_inputs, tiny_encoder, vanilla_output


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


def test_unsupported_architecture_names_the_supported_ones():
    model = GPT2Model(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=20))
    with pytest.raises(ValueError, match=r"\[SLA-E002\].*gpt2.*bert, camembert, distilbert, electra, roberta"):
        SyntaxAwareTransformer(model)


@pytest.mark.parametrize("family", ["bert", "roberta", "electra", "distilbert"])
def test_each_adapter_finds_the_layers_and_replaces_their_self_attention(family):
    model = tiny_encoder(family)
    adapter = attention_family(model.config)
    assert adapter is ATTENTION_FAMILIES[family]
    layers = adapter.layers(model)
    originals = [type(getattr(adapter.holder(layer), adapter.attribute)) for layer in layers]
    assert len(layers) == 3 and not any(issubclass(original, FamilyAdapter) for original in originals)
    sla = SyntaxAwareTransformer(model)
    replaced = [getattr(adapter.holder(layer), adapter.attribute) for layer in adapter.layers(sla.transformer)]
    assert [type(module) for module in replaced] == [adapter] * 3
    assert replaced == sla.sla_modules()


def test_the_table_maps_each_model_type_to_its_adapter():
    assert ATTENTION_FAMILIES == {
        "bert": BertStyleSelfAttention,
        "roberta": BertStyleSelfAttention,
        "xlm-roberta": BertStyleSelfAttention,
        "camembert": BertStyleSelfAttention,
        "electra": BertStyleSelfAttention,
        "distilbert": DistilBertStyleAttention,
    }
    assert {BertStyleSelfAttention.attribute, DistilBertStyleAttention.attribute} == {"self", "attention"}


def test_an_adapter_without_the_layout_of_its_family_cannot_be_made():
    class WithoutLayout(FamilyAdapter):
        attribute = "self"

    with pytest.raises(TypeError, match="abstract"):
        WithoutLayout(16, 2, 0.0)
