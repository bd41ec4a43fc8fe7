"""A batch of four sequences (two padded) whose local masks hide real pieces
only in the sequences chosen, and one SLA layer to attend over it: the
inputs of the tests of the prediction paths."""
from dataclasses import replace
from typing import List

import pytest
import torch
from torch.nn import functional as F

from spacy_sla.layers import AttentionBatch, AttentionPaths, SyntaxAwareAttention, SyntaxAwareTransformer, attending
from spacy_sla.variants.softbias import DistanceBucketBias

from util import tiny_encoder

N_SEQUENCES, N_HEADS, HEAD_SIZE, N_PIECES = 4, 4, 8, 9
HIDDEN = N_HEADS * HEAD_SIZE
# sequences 1 and 3 are padded; what a mask says about padding never counts
LENGTHS = [9, 6, 9, 4]
# Two SDPA calls, no groups by width: the tests count the calls of the
# plain path (the groups by width: tests/layers/test_width_groups.py).
PATHS = AttentionPaths(materialise_up_to=0, width_groups_min_saving=1.0)


class SdpaCalls:
    """Records the batch size of every fused attention call."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.batch_sizes: List[int] = []
        original = F.scaled_dot_product_attention

        def recorded(query, *args, **kwargs):
            self.batch_sizes.append(query.shape[0])
            return original(query, *args, **kwargs)

        monkeypatch.setattr(F, "scaled_dot_product_attention", recorded)


def attention_mask() -> torch.Tensor:
    mask = torch.zeros(N_SEQUENCES, N_PIECES, dtype=torch.long)
    for i, length in enumerate(LENGTHS):
        mask[i, :length] = 1
    return mask


def local_mask(restricted: List[int]) -> torch.Tensor:
    """Hides real pieces from each other only in the `restricted`
    sequences; every other sequence hides nothing but padding pairs."""
    generator = torch.Generator().manual_seed(2)
    mask = (torch.rand(N_SEQUENCES, N_PIECES, N_PIECES, generator=generator) < 0.4) | torch.eye(N_PIECES, dtype=torch.bool)
    for i, length in enumerate(LENGTHS):
        if i not in restricted:
            mask[i, :length, :length] = True
        assert bool(mask[i, :length, :length].all()) != (i in restricted)
    return mask


def batch_of(*args, paths: AttentionPaths = PATHS, **kwargs) -> AttentionBatch:
    """AttentionBatch.from_inputs computing by `paths`."""
    return AttentionBatch.from_inputs(*args, paths=paths, **kwargs)


def make_module(bias: bool = False, dropout: float = 0.3) -> SyntaxAwareAttention:
    torch.manual_seed(7)
    local_bias = None
    if bias:
        local_bias = DistanceBucketBias(N_HEADS, 5)
        torch.nn.init.normal_(local_bias.bias, std=2.0)
    module = SyntaxAwareAttention(HIDDEN, N_HEADS, dropout, local_bias=local_bias)
    with torch.no_grad():
        module.gate.weight.normal_(std=0.5)
        module.gate.bias.fill_(0.2)
    return module.eval()


def make_inputs():
    generator = torch.Generator().manual_seed(3)
    hidden = torch.randn(N_SEQUENCES, N_PIECES, HIDDEN, generator=generator)
    qkv = [torch.randn(N_SEQUENCES, N_HEADS, N_PIECES, HEAD_SIZE, generator=generator) for _ in range(3)]
    return hidden, qkv


def attend(module: SyntaxAwareAttention, batch: AttentionBatch, skip: bool, grad: bool = False):
    """The context (and the batch's recorded gates) with or without the skip."""
    batch.paths = replace(batch.paths, skip_fully_visible=skip)
    hidden, qkv = make_inputs()
    if grad:
        qkv = [tensor.requires_grad_() for tensor in qkv]
    with torch.set_grad_enabled(grad), attending(batch):
        context, _ = module.attend(hidden, *qkv)
    return context, qkv


def encoder_outputs(skip: bool, restricted: List[int], paths: AttentionPaths = PATHS):
    sla = SyntaxAwareTransformer(tiny_encoder("bert"), attention_paths=replace(paths, skip_fully_visible=skip)).eval()
    input_ids = torch.randint(5, 50, (N_SEQUENCES, N_PIECES), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        output = sla(input_ids, attention_mask(), local_mask=local_mask(restricted), record_gates=True)
    return output.last_hidden_state, output.gates
