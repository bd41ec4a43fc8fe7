"""The registered architectures: what each version builds from its config
arguments, without loading a Hugging Face model (the model is built lazily
at initialization)."""
import pytest
from spacy.util import registry

from spacy_sla.architectures import create_parent_attention
from spacy_sla.data_classes import ParentAttention
from spacy_sla.masks import create_syntax_mask_v3, create_window_mask_v2


def span_getter():
    return registry.span_getters.get("spacy-transformers.strided_spans.v1")(window=128, stride=96)


def test_v1_builds_what_v2_builds_without_the_sg_net_and_lisa_options():
    mask = create_syntax_mask_v3(threshold=2)
    arguments = dict(name="some/model", get_spans=span_getter(), mask=mask, sla_layers=[0, 2], on_missing_parse="global")
    v1 = registry.architectures.get("spacy-sla.SLATransformerModel.v1")(**arguments).settings
    v2 = registry.architectures.get("spacy-sla.SLATransformerModel.v2")(**arguments).settings
    assert v1 == v2
    assert (v1.name, v1.mask, v1.sla_layers, v1.on_missing_parse) == ("some/model", mask, [0, 2], "global")
    assert v1.syntax_guided_mask is None and v1.parent_attention is None


def test_v2_keeps_the_sg_net_mask_and_the_parent_head():
    guide = create_window_mask_v2(window=1)
    parents = create_parent_attention(layer=3, head=1, weight=0.5)
    model = registry.architectures.get("spacy-sla.SLATransformerModel.v2")(
        name="some/model", get_spans=span_getter(), mask=None, syntax_guided_mask=guide, parent_attention=parents
    )
    assert model.settings.mask is None
    assert model.settings.syntax_guided_mask is guide
    assert model.settings.parent_attention == ParentAttention(layer=3, head=1, weight=0.5)


def test_parent_attention_defaults_to_the_middle_layer_and_the_first_head():
    assert registry.misc.get("spacy-sla.parent_attention.v1")() == ParentAttention(layer=None, head=0, weight=1.0)


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_the_tok2vec_architecture_chains_transformer_split_and_pooling(version):
    build = registry.architectures.get(f"spacy-sla.SLATok2VecTransformer.{version}")
    pooling = registry.layers.get("reduce_mean.v1")()
    arguments = dict(name="some/model", get_spans=span_getter(), pooling=pooling, grad_factor=0.5)
    if version == "v1":
        arguments["mask"] = create_syntax_mask_v3(threshold=1)
    model = build(**arguments)
    # a chain of a chain, the structure a listener has after replace_listeners
    assert [layer.name for layer in model.layers[0].layers] == ["sla_transformer", "split-trf-batch"]
    assert model.layers[0].layers[0].settings.name == "some/model"
    assert model.layers[1].name == "trfs2arrays" and model.layers[1].layers == [pooling]
    assert model.layers[1].attrs["grad_factor"] == 0.5
