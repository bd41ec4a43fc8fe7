"""The registered architectures: what each builds from its config arguments,
without loading a Hugging Face model (the model is built lazily at
initialization)."""
from spacy.util import registry

from spacy_sla.architectures import create_parent_attention
from spacy_sla.data_classes import ParentAttention
from spacy_sla.variants.syntax_mask import create_syntax_mask
from spacy_sla.variants.window_mask import create_window_mask


def span_getter():
    return registry.span_getters.get("spacy-transformers.strided_spans.v1")(window=128, stride=96)


def test_the_model_keeps_its_settings():
    mask = create_syntax_mask(threshold=2)
    model = registry.architectures.get("spacy-sla.SLATransformerModel.v1")(
        name="some/model", get_spans=span_getter(), mask=mask, sla_layers=[0, 2], on_missing_parse="global")
    settings = model.settings
    assert (settings.name, settings.mask, settings.sla_layers, settings.on_missing_parse) == (
        "some/model", mask, [0, 2], "global")
    assert settings.ancestor_mask is None and settings.parent_attention is None


def test_the_model_keeps_the_sg_net_mask_and_the_parent_head():
    guide = create_window_mask(window=1)
    parents = create_parent_attention(layer=3, head=1, weight=0.5)
    model = registry.architectures.get("spacy-sla.SLATransformerModel.v1")(
        name="some/model", get_spans=span_getter(), ancestor_mask=guide, parent_attention=parents
    )
    assert model.settings.mask is None
    assert model.settings.ancestor_mask is guide
    assert model.settings.parent_attention == ParentAttention(layer=3, head=1, weight=0.5)


def test_parent_attention_defaults_to_the_middle_layer_and_the_first_head():
    assert registry.misc.get("spacy-sla.parent_attention.v1")() == ParentAttention(layer=None, head=0, weight=1.0)


def test_the_tok2vec_architecture_chains_transformer_split_and_pooling():
    build = registry.architectures.get("spacy-sla.SLATok2VecTransformer.v1")
    pooling = registry.layers.get("reduce_mean.v1")()
    mask = create_syntax_mask(threshold=1)
    model = build(name="some/model", get_spans=span_getter(), pooling=pooling, mask=mask, grad_factor=0.5)
    # a chain of a chain, the structure a listener has after replace_listeners
    assert [layer.name for layer in model.layers[0].layers] == ["sla_transformer", "split-trf-batch"]
    assert model.layers[0].layers[0].settings.name == "some/model"
    assert model.layers[0].layers[0].settings.mask is mask
    assert model.layers[1].name == "trfs2arrays" and model.layers[1].layers == [pooling]
    assert model.layers[1].attrs["grad_factor"] == 0.5

