"""Short inputs on the CPU (float32, no dropout, no gradients) are predicted
from one score matrix, the two probability matrices mixed, instead of two
SDPA calls: the outputs equal those of the SDPA path, and the other paths
are kept where they apply."""
import pytest
import torch
from test_attention_skip import (
    N_PIECES,
    N_SEQUENCES,
    SdpaCalls,
    attend,
    attention_mask,
    encoder_outputs,
    local_mask,
    make_inputs,
    make_module,
)
from torch.nn import functional as F

from spacy_sla.layers import AttentionBatch, SyntaxAwareAttention
from spacy_sla.layers import attention as attention_module


@pytest.fixture(autouse=True)
def without_width_groups(monkeypatch):
    """These tests count SDPA calls of the plain path (the groups by width:
    tests/test_attention_width_groups.py)."""
    monkeypatch.setattr(attention_module, "WIDTH_GROUPS_MIN_SAVING", 1.0)


def predicted(module, batch, materialise: bool, monkeypatch):
    monkeypatch.setattr(SyntaxAwareAttention, "materialise_up_to", N_PIECES if materialise else 0)
    return attend(module, batch, True, monkeypatch)[0]


@pytest.mark.parametrize("restricted", [[2], [0, 3], [0, 1, 2, 3]])
def test_short_inputs_mix_the_probabilities_with_the_outputs_of_two_sdpa_calls(restricted, monkeypatch):
    module = make_module()
    expected = predicted(module, AttentionBatch.from_inputs(attention_mask(), local_mask(restricted)), False, monkeypatch)
    calls = SdpaCalls(monkeypatch)
    batch = AttentionBatch.from_inputs(attention_mask(), local_mask(restricted), record_gates=True)
    context = predicted(module, batch, True, monkeypatch)
    assert calls.batch_sizes == []
    assert torch.allclose(context, expected, atol=1e-5), (context - expected).abs().max()
    assert len(batch.gates) == 1 and torch.isfinite(batch.gates[0]).all()
    # no restricted sequence: the global call alone, as before
    context = predicted(module, AttentionBatch.from_inputs(attention_mask(), local_mask([])), True, monkeypatch)
    assert calls.batch_sizes == [N_SEQUENCES]
    hidden, (query, key, value) = make_inputs()
    global_context = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask().bool()[:, None, None])
    assert torch.equal(context, module.merge_heads(global_context))


def test_the_materialised_prediction_of_an_empty_row_and_of_a_bias_equals_sdpa(monkeypatch):
    mask = local_mask([1])
    mask[1, 2] = False  # a row that sees no key: SDPA gives its local branch zeros
    buckets = torch.randint(0, 5, (N_SEQUENCES, N_PIECES, N_PIECES), generator=torch.Generator().manual_seed(4))
    for module, inputs in ((make_module(), {"local_mask": mask}), (make_module(bias=True), {"local_buckets": buckets})):
        expected = predicted(module, AttentionBatch.from_inputs(attention_mask(), **inputs), False, monkeypatch)
        calls = SdpaCalls(monkeypatch)
        context = predicted(module, AttentionBatch.from_inputs(attention_mask(), **inputs), True, monkeypatch)
        assert calls.batch_sizes == []
        assert torch.allclose(context, expected, atol=1e-5), (context - expected).abs().max()


def test_longer_inputs_dropout_and_gradients_keep_their_paths(monkeypatch):
    batch_of = lambda: AttentionBatch.from_inputs(attention_mask(), local_mask([0, 1, 2, 3]))  # noqa: E731
    calls = SdpaCalls(monkeypatch)
    monkeypatch.setattr(SyntaxAwareAttention, "materialise_up_to", N_PIECES - 1)
    attend(make_module(), batch_of(), True, monkeypatch)
    assert calls.batch_sizes == [N_SEQUENCES, N_SEQUENCES]
    monkeypatch.setattr(SyntaxAwareAttention, "materialise_up_to", N_PIECES)
    calls.batch_sizes.clear()
    attend(make_module(dropout=0.3).train(), batch_of(), True, monkeypatch)
    assert calls.batch_sizes == [N_SEQUENCES, N_SEQUENCES]
    calls.batch_sizes.clear()
    monkeypatch.setattr(SyntaxAwareAttention, "memory_saving_training", False)
    attend(make_module(dropout=0.0), batch_of(), True, monkeypatch, grad=True)
    assert calls.batch_sizes == [N_SEQUENCES, N_SEQUENCES]


@pytest.mark.parametrize("restricted", [[1], [0, 1, 2, 3]])
def test_the_encoder_output_is_the_same_materialised(restricted, monkeypatch):
    monkeypatch.setattr(SyntaxAwareAttention, "materialise_up_to", 0)
    expected, expected_gates = encoder_outputs(True, restricted, monkeypatch)
    monkeypatch.setattr(SyntaxAwareAttention, "materialise_up_to", N_PIECES)
    calls = SdpaCalls(monkeypatch)
    output, gates = encoder_outputs(True, restricted, monkeypatch)
    assert calls.batch_sizes == []
    assert torch.allclose(output, expected, atol=1e-5), (output - expected).abs().max()
    assert torch.allclose(gates, expected_gates, atol=1e-6)
