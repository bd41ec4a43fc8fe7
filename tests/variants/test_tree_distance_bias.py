"""The soft tree-distance bias: its table follows its formula, a zero bias
is global attention, and its builder makes the table for each layer."""
import torch
from transformers import BertConfig

from spacy_sla import TreeDistanceBias
from spacy_sla.layers import SyntaxAwareTransformer
from spacy_sla.variants.tree_distance_bias import TreeDistanceBiasLayer

from util import batch_inputs, tiny_encoder, vanilla_output


def test_the_bias_table_follows_its_formula():
    buckets = torch.tensor([[[0, 1], [4, 5]]])
    table = TreeDistanceBiasLayer(n_heads=2, n_buckets=6)
    assert torch.equal(table(buckets), torch.zeros(1, 2, 2, 2))
    with torch.no_grad():
        table.bias.copy_(torch.arange(12.0).view(2, 6))
    assert table(buckets)[0, 1].tolist() == [[6.0, 7.0], [10.0, 11.0]]


def test_the_builder_makes_a_table_per_head_and_bucket():
    bias = TreeDistanceBias(max_distance=4).make_layer_bias(BertConfig(num_attention_heads=3, hidden_size=12))
    assert isinstance(bias, TreeDistanceBiasLayer) and tuple(bias.bias.shape) == (3, 7)


def test_a_zero_bias_starts_from_global_attention():
    model = tiny_encoder("bert")
    input_ids, attention_mask = batch_inputs()
    buckets = torch.randint(0, 5, (2, 9, 9))
    sla = SyntaxAwareTransformer(model, local_bias=lambda config: TreeDistanceBiasLayer(config.num_attention_heads, 5)).eval()
    with torch.no_grad():
        output = sla(input_ids, attention_mask, local_buckets=buckets).last_hidden_state
    expected = vanilla_output(tiny_encoder("bert"), input_ids, attention_mask)
    real = attention_mask.bool()[..., None]
    assert torch.allclose(output * real, expected * real, atol=1e-5)
    with torch.no_grad():
        for module in sla.sla_modules():
            module.local_bias.bias.normal_(std=3.0)
        moved = sla(input_ids, attention_mask, local_buckets=buckets).last_hidden_state
    assert (moved - output).abs().max() > 1e-3
