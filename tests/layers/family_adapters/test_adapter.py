"""The adapters' contract and their table: every registered family's
encoder is wrapped layer by layer, gives the plain output with a mask that
hides nothing and another with a restrictive one, and an unsupported family
is refused with the supported ones named. What each adapter shape does of
its own (position terms, shared layers, windows): test_<shape>.py."""
import pytest
import torch
from transformers import BertConfig, DistilBertConfig, GPT2Config, GPT2Model, MPNetConfig

from spacy_sla.layers import ATTENTION_FAMILIES, FamilyAdapter, SyntaxAwareTransformer
from spacy_sla.layers.family_adapters import (
    AlbertStyleAttention,
    BertStyleSelfAttention,
    DebertaV2StyleSelfAttention,
    DistilBertStyleAttention,
    ModernBertStyleAttention,
    MPNetStyleAttention,
    attention_family,
    check_model_type,
    check_transformer_config,
)

from ..encoders import sla_output
from util import batch_inputs, tiny_encoder, vanilla_output

PLAIN_FAMILIES = ["bert", "roberta", "electra", "distilbert"]
POSITION_TERM_FAMILIES = ["bert-relative_key", "bert-relative_key_query", "mpnet", "albert-relative_key_query", "deberta-v2"]
# ModernBERT's rotary embeddings turn the queries and keys; its window is a score bias
SCORE_BIAS_FAMILIES = POSITION_TERM_FAMILIES + ["modernbert"]
FAMILIES = PLAIN_FAMILIES + SCORE_BIAS_FAMILIES + ["albert"]
SUPPORTED = "albert, bert, camembert, deberta-v2, distilbert, electra, modernbert, mpnet, roberta, xlm-roberta"


@pytest.mark.parametrize("family", FAMILIES)
def test_a_mask_that_hides_nothing_gives_the_plain_encoder_output(family):
    model = tiny_encoder(family)
    input_ids, attention_mask = batch_inputs()
    expected = vanilla_output(model, input_ids, attention_mask)
    everything = torch.ones(2, 9, 9, dtype=torch.bool)
    real = attention_mask.bool()[..., None]
    assert torch.allclose(sla_output(model, input_ids, attention_mask, everything) * real, expected * real, atol=1e-5)
    assert torch.allclose(sla_output(model, input_ids, attention_mask, None) * real, expected * real, atol=1e-5)


@pytest.mark.parametrize("family", PLAIN_FAMILIES + ["mpnet", "albert", "deberta-v2", "modernbert"])
def test_a_restrictive_mask_changes_the_output(family):
    model = tiny_encoder(family)
    input_ids, attention_mask = batch_inputs()
    expected = vanilla_output(model, input_ids, attention_mask)
    diagonal = torch.eye(9, dtype=torch.bool).expand(2, 9, 9)
    output = sla_output(model, input_ids, attention_mask, diagonal)
    assert (output[0] - expected[0]).abs().max() > 1e-3


def test_unsupported_architecture_names_the_supported_ones():
    model = GPT2Model(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=20))
    with pytest.raises(ValueError, match=rf"\[SLA-E002\].*gpt2.*Supported model types: {SUPPORTED}\."):
        SyntaxAwareTransformer(model)


@pytest.mark.parametrize("family", PLAIN_FAMILIES + ["mpnet", "deberta-v2", "modernbert"])
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
        "mpnet": MPNetStyleAttention,
        "albert": AlbertStyleAttention,
        "deberta-v2": DebertaV2StyleSelfAttention,
        "modernbert": ModernBertStyleAttention,
    }
    assert [BertStyleSelfAttention.attribute, DistilBertStyleAttention.attribute, MPNetStyleAttention.attribute] == [
        "self", "attention", "attn"
    ]
    assert AlbertStyleAttention.attribute == "attention"


@pytest.mark.parametrize(
    "model_type,position_embedding_type,adapter",
    [
        ("bert", None, BertStyleSelfAttention),
        ("roberta", "absolute", BertStyleSelfAttention),
        ("bert", "relative_key", BertStyleSelfAttention),
        ("electra", "relative_key_query", BertStyleSelfAttention),
        ("albert", "relative_key", AlbertStyleAttention),
        ("mpnet", None, MPNetStyleAttention),
        ("distilbert", None, DistilBertStyleAttention),
        ("deberta-v2", None, DebertaV2StyleSelfAttention),
    ],
)
def test_check_model_type_gives_the_adapter_of_a_supported_type(model_type, position_embedding_type, adapter):
    assert check_model_type(model_type, position_embedding_type) is adapter


def test_check_model_type_names_the_supported_types_from_the_table(monkeypatch):
    with pytest.raises(ValueError, match=rf"^\[SLA-E002\] The transformer 'gpt2' has model type 'gpt2'.*types: {SUPPORTED}\.$"):
        check_model_type("gpt2")
    with pytest.raises(ValueError, match=r"\[SLA-E002\] The transformer 'my-model' has model type 't5'"):
        check_model_type("t5", name="my-model")
    monkeypatch.setitem(ATTENTION_FAMILIES, "new-family", BertStyleSelfAttention)
    with pytest.raises(ValueError, match=r"types: albert, bert, .*, new-family, roberta, xlm-roberta\.$"):
        check_model_type("gpt2")


@pytest.mark.parametrize("installed,model_type,refused", [
    ("4.38.0", "bert", False), ("4.38.0", "albert", False), ("4.38.0", "mpnet", False),
    ("4.46.3", "deberta-v2", True), ("4.47.0", "deberta-v2", False),
    ("4.47.1", "modernbert", True), ("4.48.0", "modernbert", False),
])
def test_a_family_newer_than_the_installed_transformers_is_refused_by_name(monkeypatch, installed, model_type,
                                                                            refused):
    from spacy_sla.layers import family_adapters

    monkeypatch.setattr(family_adapters, "installed_transformers", lambda: installed)
    if not refused:
        assert check_model_type(model_type) is ATTENTION_FAMILIES[model_type]
        return
    minimum = ATTENTION_FAMILIES[model_type].minimum_transformers
    with pytest.raises(ValueError, match=rf"\[SLA-E099\] The transformer 'm' has model type '{model_type}', which the SLA "
                                         rf"transformer wraps with transformers {minimum} or later; transformers "
                                         rf"{installed} is installed"):
        check_model_type(model_type, name="m")


@pytest.mark.parametrize(
    "model_type,position_embedding_type,supported",
    [
        ("bert", "rotary", "absolute, relative_key, relative_key_query"),
        ("distilbert", "relative_key", "absolute"),
    ],
)
def test_check_model_type_refuses_position_embeddings_the_adapter_does_not_compute(
    model_type, position_embedding_type, supported
):
    with pytest.raises(
        ValueError,
        match=rf"\[SLA-E009\] The transformer '{model_type}' .*'{position_embedding_type}' position embeddings.*"
        rf"'{model_type}'.*position_embedding_type {supported}; use a model with one of them",
    ):
        check_model_type(model_type, position_embedding_type)


def test_check_transformer_config_reads_the_type_and_positions_of_a_config():
    assert check_transformer_config(MPNetConfig()) is MPNetStyleAttention
    assert check_transformer_config(DistilBertConfig()) is DistilBertStyleAttention
    assert check_transformer_config(BertConfig(position_embedding_type="relative_key_query")) is BertStyleSelfAttention
    config = BertConfig(position_embedding_type="rotary")
    config.name_or_path = "some/bert"
    with pytest.raises(ValueError, match=r"\[SLA-E009\] The transformer 'some/bert' .*'rotary'"):
        check_transformer_config(config)
    with pytest.raises(ValueError, match=r"\[SLA-E002\].*'gpt2'"):
        check_transformer_config(GPT2Config())


def test_an_adapter_without_the_layout_of_its_family_cannot_be_made():
    class WithoutLayout(FamilyAdapter):
        attribute = "self"

    with pytest.raises(TypeError, match="abstract"):
        WithoutLayout(16, 2, 0.0)
