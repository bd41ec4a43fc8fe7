"""The training path of SLA (TwoBranchAttention, which keeps for backward
only what the two softmaxes need) against the previous formulation: two
SDPA calls, one per branch, each with its own dropout, mixed by the gate."""
import math
from typing import List, Optional, Tuple

import pytest
import torch
from torch.nn import functional as F

from spacy_sla.layers import AttentionBatch, SyntaxAwareAttention, two_branch
from spacy_sla.variants.tree_distance_bias import TreeDistanceBiasLayer

N_HEADS, HEAD_SIZE, N_PIECES = 4, 8, 9
HIDDEN = N_HEADS * HEAD_SIZE


def two_sdpa_calls(batch, query, key, value, gate, local, score_bias, dropout: float) -> torch.Tensor:
    """The formulation before TwoBranchAttention (and before the cached
    additive mask), with the signature of the production's gated attention:
    two SDPA calls on the boolean mask or the bias, each with F.dropout's
    own draw, mixed with lerp before merging the heads."""
    assert score_bias is None
    global_context = F.scaled_dot_product_attention(query, key, value, attn_mask=batch.global_mask, dropout_p=dropout)
    local_context = F.scaled_dot_product_attention(query, key, value, attn_mask=local, dropout_p=dropout)
    return torch.lerp(global_context, local_context, gate.to(global_context.dtype))


def previous_attend(module: SyntaxAwareAttention, batch: AttentionBatch, hidden, query, key, value) -> torch.Tensor:
    """The layer's attention by two_sdpa_calls."""
    dropout = module.dropout_prob if module.training else 0.0
    local = module.local_input(batch, query.dtype, hidden)
    gate = torch.sigmoid(module.gate(hidden)).transpose(1, 2)[..., None]
    return module.merge_heads(two_sdpa_calls(batch, query, key, value, gate, local, None, dropout))


def explicit_with_masks(module, batch, hidden, query, key, value, keeps: List[torch.Tensor], dropout: float):
    """The two branches written out with given dropout masks (autograd
    differentiates this one)."""
    local = module.local_input(batch, query.dtype, hidden)
    scores = query @ key.transpose(-1, -2) / math.sqrt(HEAD_SIZE)
    global_probs = scores.masked_fill(~batch.global_mask, float("-inf")).softmax(-1)
    if local.dtype == torch.bool:
        local_probs = scores.masked_fill(~local, float("-inf")).softmax(-1)
    else:
        local_probs = (scores + local).softmax(-1)
    gate = torch.sigmoid(module.gate(hidden)).transpose(1, 2)[..., None]
    global_context = (global_probs * keeps[0] / (1 - dropout)) @ value
    local_context = (local_probs * keeps[1] / (1 - dropout)) @ value
    return module.merge_heads(torch.lerp(global_context, local_context, gate))


def make_module(kind: str, dropout: float, per_head_gates: bool = False) -> SyntaxAwareAttention:
    """A layer with a boolean local mask ("mask...") or a TreeDistanceBiasLayer
    ("bias"), gates that differ per token."""
    torch.manual_seed(7)
    bias = None
    if kind == "bias":
        bias = TreeDistanceBiasLayer(N_HEADS, 5)
        torch.nn.init.normal_(bias.bias, std=2.0)
        if per_head_gates:
            bias.n_gates = N_HEADS
    module = SyntaxAwareAttention(HIDDEN, N_HEADS, dropout, local_bias=bias)
    with torch.no_grad():
        module.gate.weight.normal_(std=0.5)
        module.gate.bias.fill_(0.2)
    return module


def make_batch(kind: str) -> AttentionBatch:
    generator = torch.Generator().manual_seed(2)
    attention_mask = torch.ones(2, N_PIECES, dtype=torch.long)
    attention_mask[1, 6:] = 0
    if kind.startswith("mask"):
        local = (torch.rand(2, N_PIECES, N_PIECES, generator=generator) < 0.4) | torch.eye(N_PIECES, dtype=torch.bool)
        if kind == "mask-empty-row":  # no builder makes one; SDPA gives the row's local branch zeros
            local[0, 3] = False
        return AttentionBatch.from_inputs(attention_mask, local)
    buckets = torch.randint(0, 5, (2, N_PIECES, N_PIECES), generator=generator)
    return AttentionBatch.from_inputs(attention_mask, local_buckets=buckets)


def make_inputs(seed: int = 3):
    generator = torch.Generator().manual_seed(seed)
    hidden = torch.randn(2, N_PIECES, HIDDEN, generator=generator)
    qkv = [torch.randn(2, N_HEADS, N_PIECES, HEAD_SIZE, generator=generator).requires_grad_() for _ in range(3)]
    return hidden, qkv


def real_rows(batch: AttentionBatch) -> torch.Tensor:
    return batch.global_mask[:, 0, 0, :, None]  # (batch, n, 1): padding rows are never used


@pytest.mark.parametrize("kind", ["mask", "mask-empty-row", "bias"])
def test_eval_outputs_equal_the_previous_formulation(kind):
    module = make_module(kind, dropout=0.3).eval()
    batch = make_batch(kind)
    hidden, (query, key, value) = make_inputs()
    with torch.no_grad():
        context, _ = module.attend(batch, hidden, query, key, value)
        expected = previous_attend(module, batch, hidden, query, key, value)
    assert torch.allclose(context, expected, atol=1e-6)


@pytest.mark.parametrize("kind,per_head_gates", [("mask", False), ("mask-empty-row", False), ("bias", False), ("bias", True)])
def test_training_gradients_equal_the_previous_formulation_without_dropout(kind, per_head_gates):
    results = {}
    for formulation in ("new", "previous"):
        module = make_module(kind, dropout=0.0, per_head_gates=per_head_gates).train()
        batch = make_batch(kind)
        hidden, (query, key, value) = make_inputs()
        if formulation == "new":
            context, _ = module.attend(batch, hidden, query, key, value)
        else:
            context = previous_attend(module, batch, hidden, query, key, value)
        weights = torch.randn(context.shape, generator=torch.Generator().manual_seed(9))
        (context * weights * real_rows(batch)).sum().backward()
        grads = [query.grad, key.grad, value.grad, module.gate.weight.grad, module.gate.bias.grad]
        if kind == "bias":
            grads.append(module.local_bias.bias.grad)
        results[formulation] = (context.detach(), grads)
    assert torch.allclose(results["new"][0], results["previous"][0], atol=1e-6)
    for new, previous in zip(results["new"][1], results["previous"][1]):
        assert new.abs().sum() > 0
        assert torch.allclose(new, previous, atol=1e-5), (new - previous).abs().max()


class RecordedKeepMasks:
    """Wraps _drop_out_pair to record the dropout masks it draws."""

    def __init__(self, monkeypatch):
        self.masks: List[torch.Tensor] = []
        original = two_branch.drop_out_pair

        def recorded(global_probs, local_probs, dropout: float) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
            masks = original(global_probs, local_probs, dropout)
            self.masks.extend(mask.clone() for mask in masks)
            return masks

        monkeypatch.setattr(two_branch, "drop_out_pair", recorded)


@pytest.mark.parametrize("kind", ["mask", "bias"])
def test_with_dropout_each_branch_draws_its_own_mask_and_backward_uses_them(kind, monkeypatch):
    dropout = 0.4
    recorded = RecordedKeepMasks(monkeypatch)
    module = make_module(kind, dropout).train()
    batch = make_batch(kind)
    hidden, (query, key, value) = make_inputs()
    context, _ = module.attend(batch, hidden, query, key, value)
    weights = torch.randn(context.shape, generator=torch.Generator().manual_seed(9))
    (context * weights).sum().backward()
    new_grads = [t.grad.clone() for t in (query, key, value, module.gate.weight)]
    # two independent draws, one per branch, each keeping ~1 - p
    assert len(recorded.masks) == 2
    global_keep, local_keep = recorded.masks
    assert global_keep.shape == local_keep.shape == (2, N_HEADS, N_PIECES, N_PIECES)
    assert not torch.equal(global_keep, local_keep)
    assert abs(global_keep.float().mean().item() - (1 - dropout)) < 0.1
    assert abs(local_keep.float().mean().item() - (1 - dropout)) < 0.1
    # the same masks through plain autograd give the same output and gradients
    for tensor in (query, key, value, module.gate.weight):
        tensor.grad = None
    expected = explicit_with_masks(module, batch, hidden, query, key, value, [global_keep, local_keep], dropout)
    (expected * weights).sum().backward()
    assert torch.allclose(context, expected, atol=1e-5)
    for new, reference in zip(new_grads, (query.grad, key.grad, value.grad, module.gate.weight.grad)):
        assert torch.allclose(new, reference, atol=1e-5), (new - reference).abs().max()


def saved_square_bytes(attention, n_pieces: int) -> int:
    """Bytes of the (.., n, n)-shaped tensors autograd keeps for backward in
    one call of attention(hidden, query, key, value), each storage counted
    once."""
    hidden, (query, key, value) = make_inputs()
    storages = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        if tensor.dim() >= 3 and tensor.shape[-2:] == (n_pieces, n_pieces) and tensor.shape[1] == N_HEADS:
            storage = tensor.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        attention(hidden, query, key, value)
    return sum(storages.values())


def test_the_memory_saving_path_runs_in_training_and_keeps_less(monkeypatch):
    dropout = 0.1
    module = make_module("mask", dropout).train()
    batch = make_batch("mask")
    calls = []
    original_apply = two_branch.TwoBranchAttention.apply
    monkeypatch.setattr(two_branch.TwoBranchAttention, "apply", lambda *args: calls.append(1) or original_apply(*args))
    new = saved_square_bytes(lambda *inputs: module.attend(batch, *inputs), N_PIECES)
    assert calls == [1]
    previous = saved_square_bytes(lambda *inputs: previous_attend(module, batch, *inputs), N_PIECES)
    assert calls == [1]
    elements = 2 * N_HEADS * N_PIECES * N_PIECES
    # the float32 scores and two boolean dropout masks
    assert new == elements * (4 + 1 + 1)
    # two SDPA calls with dropout: per branch, two float tensors
    assert previous == elements * (4 + 4) * 2
    # prediction takes its own path
    module.eval()
    hidden, (query, key, value) = make_inputs()
    with torch.no_grad():
        module.attend(batch, hidden, query, key, value)
    assert calls == [1]


def test_under_autocast_the_training_path_matches_the_previous_formulation():
    """Half-precision projections (bfloat16 on the CPU, float16 on a GPU):
    the softmaxes run in float32, the products in the half type."""
    from transformers import BertConfig, BertModel

    from spacy_sla.layers import SyntaxAwareTransformer

    config = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48, vocab_size=50,
                        attention_probs_dropout_prob=0.0, hidden_dropout_prob=0.0)
    input_ids = torch.randint(5, 50, (2, N_PIECES), generator=torch.Generator().manual_seed(1))
    attention_mask = torch.ones(2, N_PIECES, dtype=torch.long)
    attention_mask[1, 6:] = 0
    local_mask = (torch.rand(2, N_PIECES, N_PIECES, generator=torch.Generator().manual_seed(2)) < 0.4) | torch.eye(
        N_PIECES, dtype=torch.bool
    )
    results = {}
    for memory_saving in (True, False):
        torch.manual_seed(0)
        options = {} if memory_saving else {"gated_attention": two_sdpa_calls}
        model = SyntaxAwareTransformer(BertModel(config, add_pooling_layer=False), **options).train()
        try:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                output = model(input_ids, attention_mask, local_mask=local_mask).last_hidden_state
        except RuntimeError as error:  # an operator this CPU build lacks for the type
            pytest.skip(f"bfloat16 autocast on this CPU: {error}")
        (output.float() * attention_mask[..., None]).sum().backward()
        results[memory_saving] = {name: p.grad.float() for name, p in model.named_parameters() if p.grad is not None}
    assert results[True].keys() == results[False].keys()
    for name, grad in results[True].items():
        assert torch.isfinite(grad).all(), name
        scale = results[False][name].abs().max().clamp(min=1.0)
        assert (grad - results[False][name]).abs().max() / scale < 0.1, name


def drop_out_pair(shape, rate: float):
    """two_branch.drop_out_pair on random probabilities: (dropped global, dropped local,
    the inputs, the keep masks)."""
    global_probs, local_probs = torch.rand(shape), torch.rand(shape)
    inputs = (global_probs.clone(), local_probs.clone())
    keeps = two_branch.drop_out_pair(global_probs, local_probs, rate)
    return global_probs, local_probs, inputs, keeps


@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_dropout_masks_are_independent_bernoulli_draws_at_the_rate(rate):
    """Both branches' masks from one uniform draw per element, a sequence at
    a time: each mask drops at the rate, the two masks are independent (all
    four joint outcomes at their product probabilities), and so are
    sequences, heads and pairs; the probabilities are zeroed exactly where
    the returned masks drop."""
    shape = (16, N_HEADS, 40, 40)
    torch.manual_seed(0)
    global_probs, local_probs, (global_input, local_input), keeps = drop_out_pair(shape, rate)
    for dropped, original, keep in ((global_probs, global_input, keeps[0]), (local_probs, local_input, keeps[1])):
        assert keep.dtype == torch.bool and keep.shape == shape
        assert torch.equal(dropped, original * keep)
    first, second = ~keeps[0], ~keeps[1]

    def assert_near(observed: torch.Tensor, probability: float) -> None:
        # within five standard errors
        tolerance = 5 * math.sqrt(probability * (1 - probability) / observed.numel())
        assert abs(observed.float().mean().item() - probability) < tolerance

    for mask in (first, second):
        assert_near(mask, rate)
    keep = 1 - rate
    for joint, probability in (
        (first & second, rate * rate), (first & ~second, rate * keep),
        (~first & second, keep * rate), (~first & ~second, keep * keep),
    ):
        assert_near(joint, probability)
    for mask in (first, second):
        for a, b in ((mask[:-1], mask[1:]), (mask[:, :-1], mask[:, 1:]), (mask[..., :-1], mask[..., 1:])):
            assert_near(a & b, rate**2)
    # a second call draws anew
    again = ~drop_out_pair(shape, rate)[3][0]
    assert_near(first & again, rate**2)
    global_probs, local_probs, (global_input, local_input), keeps = drop_out_pair(shape, 0.0)
    assert keeps is None and torch.equal(global_probs, global_input) and torch.equal(local_probs, local_input)
