"""The local modules of distance inputs: bias tables and the soft threshold
follow their formulas, and a zero bias is global attention; the
dependency scale of the authors' released code follows its formula."""
import math

import torch

from spacy_sla.layers import SyntaxAwareTransformer
from spacy_sla.layers.local_bias import FAR_DISTANCE, DependencyScale, DistanceBucketBias, SoftThresholdLogBias

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


def test_the_scale_follows_the_formula_by_hand():
    module = DependencyScale(hidden_size=2, n_heads=2, max_distance=2)
    with torch.no_grad():
        module.dense.weight.copy_(torch.eye(2))
        module.dense.bias.zero_()
        module.threshold.weight.copy_(torch.tensor([[2.0, 0.0], [0.0, 4.0]]))
        module.threshold.bias.copy_(torch.tensor([1.0, 0.0]))
    a = math.atanh(0.5)
    hidden = torch.tensor([[[a, 0.0], [0.0, a], [0.0, 0.0]]])
    # tanh(dense(h)) = (0.5, 0), (0, 0.5), (0, 0): tau head 0 = (2, 1, 1), head 1 = (0, 2, 0)
    assert torch.allclose(module.thresholds(hidden)[0], torch.tensor([[2.0, 1.0, 1.0], [0.0, 2.0, 0.0]]), atol=1e-6)
    # buckets 0..2 are distances, 3 is "farther" (unreachable), 4 special (distance 0)
    buckets = torch.tensor([[[0, 1, 3], [1, 0, 2], [4, 4, 0]]])

    def s(x):
        return 0.5 + 0.5 * math.tanh(x)

    expected = torch.tensor(
        [
            [[s(2), s(1), 0.0], [s(0), s(1), s(-1)], [s(1), s(1), s(1)]],
            [[s(0), s(-1), 0.0], [s(1), s(2), s(0)], [s(0), s(0), s(0)]],
        ]
    )
    transform = module(buckets, hidden)
    assert torch.allclose(transform.scale[0], expected, atol=1e-6)
    scores = torch.arange(18.0).view(1, 2, 3, 3) - 9.0
    assert torch.allclose(transform(scores), scores * expected, atol=1e-5)


def test_the_initial_threshold_is_the_same_for_every_token():
    module = DependencyScale(hidden_size=8, n_heads=3, max_distance=4, initial_threshold=5.0)
    hidden = torch.randn(2, 5, 8)
    assert torch.equal(module.thresholds(hidden), torch.full((2, 3, 5), 5.0))
    buckets = torch.randint(0, 7, (2, 5, 5))
    distance = torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0, FAR_DISTANCE, 0.0])[buckets]
    expected = (0.5 + 0.5 * torch.tanh(5.0 - distance))[:, None].expand(-1, 3, -1, -1)
    assert torch.allclose(module(buckets, hidden).scale, expected)
    assert module.n_gates == 3


def test_a_span_without_syntax_keeps_its_scores():
    module = DependencyScale(hidden_size=4, n_heads=2, max_distance=1, initial_threshold=-3.0)
    buckets = torch.full((2, 3, 3), 3)  # all "special": a Doc without a parse
    buckets[1, 0, 0] = 0
    scale = module(buckets, torch.randn(2, 3, 4)).scale
    assert torch.equal(scale[0], torch.ones(2, 3, 3))
    assert (scale[1] < 0.1).all()
