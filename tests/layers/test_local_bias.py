"""The local modules of distance inputs: bias tables and the soft threshold
follow their formulas, and a zero bias is global attention."""
import torch

from spacy_sla.layers import SyntaxAwareTransformer
from spacy_sla.layers.local_bias import DistanceBucketBias, SoftThresholdLogBias

from util import batch_inputs, tiny_encoder, vanilla_output


def test_bias_modules_follow_their_formulas():
    buckets = torch.tensor([[[0, 1], [4, 5]]])
    table = DistanceBucketBias(n_heads=2, n_buckets=6)
    assert torch.equal(table(buckets), torch.zeros(1, 2, 2, 2))
    with torch.no_grad():
        table.bias.copy_(torch.arange(12.0).view(2, 6))
    assert table(buckets)[0, 1].tolist() == [[6.0, 7.0], [10.0, 11.0]]
    soft = SoftThresholdLogBias(n_heads=2, max_distance=3, initial_threshold=2.0)
    # buckets 0..3 are distances, 4 is "farther" (distance 4), 5 special (distance 0)
    expected = torch.log(0.5 + 0.5 * torch.tanh(2.0 - torch.tensor([[0.0, 1.0], [4.0, 0.0]])))
    assert torch.allclose(soft(buckets)[0, 0], expected, atol=1e-6)


def test_a_zero_bias_starts_from_global_attention():
    model = tiny_encoder("bert")
    input_ids, attention_mask = batch_inputs()
    buckets = torch.randint(0, 5, (2, 9, 9))
    sla = SyntaxAwareTransformer(model, local_bias=lambda config: DistanceBucketBias(config.num_attention_heads, 5)).eval()
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
