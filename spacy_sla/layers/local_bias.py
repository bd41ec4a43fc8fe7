"""Learned additive biases for the local branch, from tree-distance buckets
(one module per SLA layer, made by the distance builder)."""
import torch
from torch import nn
from torch.nn import functional as F


class DistanceBucketBias(nn.Module):
    """One learned bias per head and distance bucket, initialised to zero so
    that training starts from global attention."""

    def __init__(self, n_heads: int, n_buckets: int):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(n_heads, n_buckets))

    def forward(self, buckets: torch.Tensor) -> torch.Tensor:
        """(batch, n_pieces, n_pieces) bucket ids -> (batch, heads, n_pieces, n_pieces)."""
        return F.embedding(buckets, self.bias.t()).permute(0, 3, 1, 2)


class SoftThresholdBias(nn.Module):
    """log(0.5 + 0.5 * tanh(tau_h - D)) = logsigmoid(2 * (tau_h - D)), with a
    learned threshold tau_h per head. D is the bucket's distance; "farther"
    pairs count as max_distance + 1 and special pieces as distance 0."""

    def __init__(self, n_heads: int, max_distance: int, initial_threshold: float):
        super().__init__()
        self.threshold = nn.Parameter(torch.full((n_heads,), float(initial_threshold)))
        distances = torch.arange(max_distance + 3, dtype=torch.float32)
        distances[-1] = 0.0  # the special pieces' bucket
        self.register_buffer("bucket_distance", distances, persistent=False)

    def forward(self, buckets: torch.Tensor) -> torch.Tensor:
        distance = self.bucket_distance[buckets][:, None]  # (batch, 1, n, n)
        return F.logsigmoid(2.0 * (self.threshold[None, :, None, None] - distance))
