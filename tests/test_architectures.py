"""The registered architectures: what each builds from its config arguments,
without loading a Hugging Face model (the model is built lazily at
initialization), and the retired names, refused with [SLA-E120] naming their
replacement."""
import pytest
import spacy
from spacy.util import registry
from thinc.api import Config

from spacy_sla.architectures import RETIRED_NAMES, create_parent_attention
from spacy_sla.data_classes import ParentAttention
from spacy_sla.variants.sla import create_syntax_mask
from spacy_sla.variants.window import create_window_mask


def span_getter():
    return registry.span_getters.get("spacy-transformers.strided_spans.v1")(window=128, stride=96)


def test_the_model_keeps_its_settings():
    mask = create_syntax_mask(threshold=2)
    model = registry.architectures.get("spacy-sla.SLATransformerModel.v1")(
        name="some/model", get_spans=span_getter(), mask=mask, sla_layers=[0, 2], on_missing_parse="global")
    settings = model.settings
    assert (settings.name, settings.mask, settings.sla_layers, settings.on_missing_parse) == (
        "some/model", mask, [0, 2], "global")
    assert settings.syntax_guided_mask is None and settings.parent_attention is None


def test_the_model_keeps_the_sg_net_mask_and_the_parent_head():
    guide = create_window_mask(window=1)
    parents = create_parent_attention(layer=3, head=1, weight=0.5)
    model = registry.architectures.get("spacy-sla.SLATransformerModel.v1")(
        name="some/model", get_spans=span_getter(), syntax_guided_mask=guide, parent_attention=parents
    )
    assert model.settings.mask is None
    assert model.settings.syntax_guided_mask is guide
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


RETIRED_BLOCKS = {
    "spacy-sla.syntax_mask.v3": '@misc = "spacy-sla.syntax_mask.v3"\nthreshold = 2\npunct_rule = "authors"',
    "spacy-sla.syntax_mask.v2": '@misc = "spacy-sla.syntax_mask.v2"\nthreshold = 2\npunct_visible = true',
    "spacy-sla.window_mask.v2": '@misc = "spacy-sla.window_mask.v2"\nwindow = 2',
    "spacy-sla.soft_threshold.v1": '@misc = "spacy-sla.soft_threshold.v1"\ninitial_threshold = 2.0',
    "spacy-sla.SLATransformerModel.v2": '@architectures = "spacy-sla.SLATransformerModel.v2"\nname = "x"',
    "spacy-sla.SLATok2VecTransformer.v2": '@architectures = "spacy-sla.SLATok2VecTransformer.v2"\nname = "x"',
}


@pytest.mark.parametrize("name", sorted(RETIRED_NAMES))
def test_a_retired_name_is_refused_with_its_replacement(name):
    replacement, _ = RETIRED_NAMES[name]
    with pytest.raises(ValueError, match=rf"\[SLA-E120\] The config names '{name}'.*write '{replacement}'"):
        registry.resolve(Config().from_str(f"[block]\n{RETIRED_BLOCKS[name]}\n"))
    assert registry.has("misc" if "mask" in name or "threshold" in name else "architectures", replacement)


def test_the_refusal_of_the_punct_visible_flag_says_how_to_rewrite_it():
    with pytest.raises(ValueError, match=r'`punct_visible = true` becomes `punct_rule = "spacy"`'):
        registry.resolve(Config().from_str(f"[block]\n{RETIRED_BLOCKS['spacy-sla.syntax_mask.v2']}\n"))


def test_a_saved_config_with_a_retired_name_is_refused_before_anything_is_built(tiny_bert):
    nlp = spacy.blank("en")
    nlp.add_pipe("sla_transformer", config={"model": {"name": str(tiny_bert)}})
    config = Config(nlp.config).copy()
    config["components"]["sla_transformer"]["model"]["mask"]["@misc"] = "spacy-sla.syntax_mask.v3"
    with pytest.raises(ValueError, match=r"\[SLA-E120\].*spacy-sla.syntax_mask.v1"):
        spacy.util.load_model_from_config(config, auto_fill=True)
