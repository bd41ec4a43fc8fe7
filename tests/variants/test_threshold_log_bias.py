"""The threshold log-bias (spacy-sla.threshold_log_bias.v1): its layer
follows its formula, and its builder gives the soft bias's buckets and makes
that layer."""
import torch
from spacy.util import registry
from transformers import BertConfig

from spacy_sla import ThresholdLogBias, TreeDistanceBias
from spacy_sla.variants.threshold_log_bias import ThresholdLogBiasLayer

from util import english_vocab, the_cat_sat


def test_the_layer_follows_its_formula():
    buckets = torch.tensor([[[0, 1], [4, 5]]])
    layer = ThresholdLogBiasLayer(n_heads=2, max_distance=3, initial_threshold=2.0)
    # buckets 0..3 are distances, 4 is "farther" (distance 4), 5 special (distance 0)
    expected = torch.log(0.5 + 0.5 * torch.tanh(2.0 - torch.tensor([[0.0, 1.0], [4.0, 0.0]])))
    assert torch.allclose(layer(buckets)[0, 0], expected, atol=1e-6)
    assert torch.allclose(layer(buckets)[0, 1], expected, atol=1e-6)


def test_the_builder_gives_clipped_distances_and_makes_a_threshold_per_head():
    builder = registry.misc.get("spacy-sla.threshold_log_bias.v1")(initial_threshold=2.5, max_distance=3)
    assert isinstance(builder, ThresholdLogBias) and builder.n_buckets == 6
    doc = the_cat_sat(english_vocab())
    assert (builder(doc) == TreeDistanceBias(max_distance=3)(doc)).all()
    layer = builder.make_layer_bias(BertConfig(num_attention_heads=4, hidden_size=16))
    assert isinstance(layer, ThresholdLogBiasLayer) and layer.threshold.tolist() == [2.5] * 4
