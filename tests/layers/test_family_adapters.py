"""The model-family adapters: every registered family's encoder is wrapped
layer by layer, gives the plain output with a mask that hides nothing, and
an unsupported family is refused with the supported ones named.

The families whose scores carry a position term (BERT's relative_key and
relative_key_query, MPNet's relative bias, ALBERT with relative keys,
DeBERTa-v3's disentangled terms, ModernBERT's sliding window) give the
plain output with a mask that hides nothing and the reference's output
(tests/reference.py) with a restrictive one, in prediction at either side
of MATERIALISE_UP_TO and with output_attentions, and in training the
reference's gradients, the position parameters' included. ALBERT's one
layer module, run at every depth, gets one gate."""
import copy

import pytest
import torch
from torch.nn import functional as F
from transformers import (
    AlbertConfig,
    AlbertModel,
    BertConfig,
    DebertaV2Config,
    DebertaV2Model,
    DistilBertConfig,
    GPT2Config,
    GPT2Model,
    MPNetConfig,
)

from spacy_sla.data_classes import IGNORED_TARGET, ParentAttention
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

from .encoders import sla_output
from .masked_batches import LONG, SHORT, encoder_inputs, reference_encoder
from util import ENCODER_SIZES, batch_inputs, random_local_mask, tiny_encoder, vanilla_output

PLAIN_FAMILIES = ["bert", "roberta", "electra", "distilbert"]
POSITION_TERM_FAMILIES = ["bert-relative_key", "bert-relative_key_query", "mpnet", "albert-relative_key_query", "deberta-v2"]
# ModernBERT's rotary embeddings turn the queries and keys; its window is a score bias
SCORE_BIAS_FAMILIES = POSITION_TERM_FAMILIES + ["modernbert"]
FAMILIES = PLAIN_FAMILIES + SCORE_BIAS_FAMILIES + ["albert"]
# how prediction computes: (width, output_attentions)
PREDICTIONS = {"mixed probabilities": (SHORT, False), "SDPA": (LONG, False), "output_attentions": (SHORT, True)}
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


@pytest.mark.parametrize("prediction", PREDICTIONS)
@pytest.mark.parametrize("family", SCORE_BIAS_FAMILIES)
def test_with_a_position_term_prediction_gives_the_plain_output_and_the_references(family, prediction):
    n_pieces, output_attentions = PREDICTIONS[prediction]
    model = tiny_encoder(family)
    inputs = encoder_inputs(n_pieces, restricted=[0, 1, 3])
    input_ids, attention_mask = inputs["input_ids"], inputs["attention_mask"]
    expected = vanilla_output(model, input_ids, attention_mask)
    real = attention_mask.bool()[..., None]
    torch.manual_seed(4)
    sla = SyntaxAwareTransformer(copy.deepcopy(model)).eval()
    with torch.no_grad():
        for module in sla.sla_modules():
            module.gate.weight.normal_(std=0.5)
    everything = torch.ones(len(input_ids), n_pieces, n_pieces, dtype=torch.bool)
    with torch.no_grad():
        for mask in (everything, None):
            output = sla(input_ids, attention_mask, local_mask=mask, output_attentions=output_attentions)
            assert torch.allclose(output.last_hidden_state * real, expected * real, atol=1e-5)
        restricted = sla(**inputs, output_attentions=output_attentions).last_hidden_state
        reference = reference_encoder(sla, model)(**inputs).last_hidden_state
    assert (restricted * real - expected * real).abs().max() > 1e-3
    assert torch.allclose(restricted * real, reference * real, atol=1e-5)


def position_parameters(sla: SyntaxAwareTransformer):
    return {
        name: parameter
        for name, parameter in sla.named_parameters()
        if any(table in name for table in ("distance_embedding", "relative_attention_bias", "rel_embeddings"))
    }


def gradients(sla: SyntaxAwareTransformer, n_pieces: int):
    """The gradients of every parameter (gates and position tables
    included) for a restrictive mask, without dropout."""
    inputs = encoder_inputs(n_pieces, restricted=[0, 1, 3])
    output = sla(**inputs).last_hidden_state
    weights = torch.randn(output.shape, generator=torch.Generator().manual_seed(6))
    (output * weights * inputs["attention_mask"][..., None]).sum().backward()
    return {name: parameter.grad for name, parameter in sla.named_parameters() if parameter.grad is not None}


@pytest.mark.parametrize("n_pieces", [SHORT, LONG])
@pytest.mark.parametrize("family", SCORE_BIAS_FAMILIES)
def test_the_memory_saving_backward_gives_the_references_gradients_with_a_position_term(family, n_pieces):
    sla = SyntaxAwareTransformer(tiny_encoder(family)).eval()
    with torch.no_grad():
        for module in sla.sla_modules():
            module.gate.weight.normal_(std=0.5, generator=torch.Generator().manual_seed(5))
    reference = reference_encoder(sla, tiny_encoder(family))
    saving, expected = gradients(sla, n_pieces), gradients(reference, n_pieces)
    assert saving.keys() == expected.keys()
    positions = position_parameters(sla)
    assert (positions or family == "modernbert") and set(positions) <= saving.keys()
    assert any(".gate." in name for name in saving)
    for name in saving:
        # float32 sums over different orders: relative to the gradient's scale
        # (ALBERT's shared embedding projection collects gradients of ~100)
        scale = float(expected[name].abs().max())
        torch.testing.assert_close(saving[name], expected[name], rtol=1e-4, atol=1e-5 * max(scale, 1.0), msg=name)
    assert all(saving[name].abs().max() > 0 for name in positions)


@pytest.mark.parametrize("family", SCORE_BIAS_FAMILIES + ["albert"])
def test_a_training_step_changes_the_gates_and_the_position_tables(family):
    torch.manual_seed(0)
    sla = SyntaxAwareTransformer(tiny_encoder(family)).train()
    before = {name: parameter.detach().clone() for name, parameter in sla.named_parameters()}
    optimizer = torch.optim.Adam(sla.parameters(), lr=1e-3)  # moves every parameter with a gradient
    input_ids, attention_mask = batch_inputs()
    output = sla(input_ids, attention_mask, local_mask=random_local_mask()).last_hidden_state
    loss = (output * attention_mask[..., None]).pow(2).mean()
    assert torch.isfinite(loss)
    loss.backward()
    optimizer.step()
    changed = {name for name, parameter in sla.named_parameters() if not torch.equal(parameter, before[name])}
    gates = {name for name in before if ".gate." in name}
    assert gates and gates <= changed
    assert set(position_parameters(sla)) <= changed


def test_the_supervised_head_learns_the_attention_of_the_model_with_its_position_term():
    model = tiny_encoder("mpnet")
    input_ids, attention_mask = batch_inputs()
    targets = torch.full((2, 9), IGNORED_TARGET)
    targets[0, :6] = torch.tensor([1, 2, 2, 2, 5, 3])
    targets[1, :4] = torch.tensor([3, 3, 0, 3])
    with torch.no_grad():
        attentions = copy.deepcopy(model)(input_ids, attention_mask=attention_mask, output_attentions=True).attentions
    expected = F.nll_loss(attentions[1][:, 2].log().flatten(0, 1), targets.flatten(), ignore_index=IGNORED_TARGET)
    sla = SyntaxAwareTransformer(model, [], parent_attention=ParentAttention(layer=1, head=2, weight=0.5)).eval()
    output = sla(input_ids, attention_mask, parent_targets=targets)
    assert float(output.auxiliary_loss.detach()) == pytest.approx(0.5 * float(expected), rel=1e-5)


def test_albert_gates_its_shared_layer_once_and_records_a_gate_per_depth():
    model = tiny_encoder("albert")
    assert model.config.num_hidden_layers == 3 and len(AlbertStyleAttention.layers(model)) == 1
    sla = SyntaxAwareTransformer(model).eval()
    assert len(sla.sla_modules()) == 1
    assert [name for name in sla.sla_parameter_names()] == [
        "transformer.encoder.albert_layer_groups.0.albert_layers.0.attention.gate.weight",
        "transformer.encoder.albert_layer_groups.0.albert_layers.0.attention.gate.bias",
    ]
    depths = []
    sla.sla_modules()[0].gate.register_forward_hook(lambda module, inputs, output: depths.append(torch.sigmoid(output[..., 0])))
    input_ids, attention_mask = batch_inputs()
    with torch.no_grad():
        output = sla(input_ids, attention_mask, local_mask=random_local_mask(), record_gates=True)
    # one row, as sla_layers has one module: the mean over the three depths,
    # whose inputs, and so gates, differ
    assert len(depths) == 3 and not torch.allclose(depths[0], depths[1])
    assert output.gates.shape == (1, 2, 9)
    assert torch.allclose(output.gates[0], torch.stack(depths).mean(0))


def test_modernbert_windows_only_the_layers_the_model_windows_and_refuses_unpadded_layers():
    model = tiny_encoder("modernbert")
    sla = SyntaxAwareTransformer(copy.deepcopy(model))
    windows = [module.window_bias(5, torch.float32, torch.device("cpu")) for module in sla.sla_modules()]
    assert windows[0] is None and windows[2] is None
    assert torch.equal(windows[1][0, 0] == 0, (torch.arange(5)[:, None] - torch.arange(5)[None, :]).abs() <= 2)
    model.config._attn_implementation = "flash_attention_2"
    with pytest.raises(ValueError, match=r"\[SLA-E009\].*flash_attention_2.*\"sdpa\" or \"eager\""):
        SyntaxAwareTransformer(model)


def test_deberta_heads_that_do_not_span_the_hidden_size_are_refused():
    config = DebertaV2Config(hidden_size=32, attention_head_size=4, **ENCODER_SIZES)
    with pytest.raises(ValueError, match=r"\[SLA-E009\].*attention_head_size 4\) do not span its hidden_size 32"):
        SyntaxAwareTransformer(DebertaV2Model(config))


def test_albert_with_a_module_per_depth_gates_each():
    model = AlbertModel(AlbertConfig(hidden_size=32, embedding_size=16, num_hidden_groups=3, **ENCODER_SIZES)).eval()
    sla = SyntaxAwareTransformer(model, sla_layers=[0, 2]).eval()
    assert len(AlbertStyleAttention.layers(model)) == 3 and len(sla.sla_modules()) == 2
    input_ids, attention_mask = batch_inputs()
    with torch.no_grad():
        output = sla(input_ids, attention_mask, local_mask=random_local_mask(), record_gates=True)
    assert output.gates.shape == (2, 2, 9)


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
