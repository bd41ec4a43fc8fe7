"""Modules that turn the tree-distance buckets of a batch into the local
branch's attention (one module per SLA layer; local_module_factory says
which module a distance builder gets).

A local module maps (buckets, hidden_states) to either
- an additive bias, a tensor (batch, heads, n_pieces, n_pieces) added to the
  scaled dot-product scores (DistanceBucketBias, SoftThresholdLogBias), or
- a LocalScoresTransform, a callable from the raw scaled dot-product scores
  to the local branch's logits, for what no additive mask can express
  (DependencyScale multiplies the scores).
A module with an `n_gates` attribute asks its layer for that many gates
(one per head) instead of one gate shared by the heads.
"""
from typing import Callable, Optional

import torch
from torch import nn
from torch.nn import functional as F
from transformers import PretrainedConfig

from ..masks import DependencyScaleDistances, SoftThresholdBias, TreeDistanceBuckets

# What the authors' breadth-first search leaves on pairs it does not reach;
# 0.5 + 0.5 * tanh(tau - FAR_DISTANCE) is exactly 0 in float32 for any
# threshold a Linear layer plausibly predicts.
FAR_DISTANCE = 1000.0


class DistanceBucketBias(nn.Module):
    """One learned bias per head and distance bucket, initialised to zero so
    that training starts from global attention."""

    def __init__(self, n_heads: int, n_buckets: int):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(n_heads, n_buckets))

    def forward(self, buckets: torch.Tensor, hidden_states: Optional[torch.Tensor] = None) -> torch.Tensor:
        """(batch, n_pieces, n_pieces) bucket ids -> (batch, heads, n_pieces, n_pieces)."""
        return F.embedding(buckets, self.bias.t()).permute(0, 3, 1, 2)


class SoftThresholdLogBias(nn.Module):
    """The soft threshold bias (spacy-sla.soft_threshold.v1, our own variant,
    not the authors' formulation): the additive bias
    log(0.5 + 0.5 * tanh(tau_h - D)) = logsigmoid(2 * (tau_h - D)), with one
    fixed learned threshold tau_h per head and layer. D is the bucket's
    distance; "farther" pairs count as max_distance + 1 and special pieces
    as distance 0. As a log-bias it rescales the attention probabilities,
    whereas the authors (DependencyScale) rescale the logits."""

    def __init__(self, n_heads: int, max_distance: int, initial_threshold: float):
        super().__init__()
        self.threshold = nn.Parameter(torch.full((n_heads,), float(initial_threshold)))
        distances = torch.arange(max_distance + 3, dtype=torch.float32)
        distances[-1] = 0.0  # the special pieces' bucket
        self.register_buffer("bucket_distance", distances, persistent=False)

    def forward(self, buckets: torch.Tensor, hidden_states: Optional[torch.Tensor] = None) -> torch.Tensor:
        distance = self.bucket_distance[buckets][:, None]  # (batch, 1, n, n)
        return F.logsigmoid(2.0 * (self.threshold[None, :, None, None] - distance))


class LocalScoresTransform:
    """Multiplies the scaled dot-product scores by `scale` (batch, heads,
    n_pieces, n_pieces). Applied to the scores before padding is masked: a
    zero scale on a masked (-inf) score would give NaN."""

    def __init__(self, scale: torch.Tensor):
        self.scale = scale

    def __call__(self, scores: torch.Tensor) -> torch.Tensor:
        return scores * self.scale.to(scores.dtype)


class DependencyScale(nn.Module):
    """The soft threshold of Li et al. 2021's released code (their
    DepAttentionScale), for spacy-sla.dependency_scale.v1.

    The local branch's logits are the attention scores scaled by

        0.5 + 0.5 * tanh(tau[h, i] - D[i, j]),
        tau[:, i] = W_tau . tanh(W_d . h_i + b_d) + b_tau,

    a threshold per head predicted from each query's layer input h_i, and D
    the tree distance of the pair (the minimum over the query's neighbours,
    see DependencyScaleDistances). W_tau starts at zero and b_tau at
    `initial_threshold` (5.0 in their code), so every query starts with the
    same threshold; W_d is drawn like the transformer's own weights.
    The layer mixes the branches with one gate per head (`n_gates`), as
    their AttentionSelector does.

    Bucket b <= max_distance is distance b, max_distance + 1 ("farther or
    another sentence") is FAR_DISTANCE, max_distance + 2 (special pieces) is
    0. A span whose buckets are all "special" carries no syntax (a Doc
    without a parse under on_missing_parse = "global"): its scale is 1, so
    its local branch is the global attention.
    """

    def __init__(
        self,
        hidden_size: int,
        n_heads: int,
        max_distance: int,
        initial_threshold: float = 5.0,
        initializer_range: float = 0.02,
    ):
        super().__init__()
        self.n_gates = n_heads
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.threshold = nn.Linear(hidden_size, n_heads)
        nn.init.normal_(self.dense.weight, std=initializer_range)
        nn.init.zeros_(self.dense.bias)
        nn.init.zeros_(self.threshold.weight)
        nn.init.constant_(self.threshold.bias, float(initial_threshold))
        distances = torch.arange(max_distance + 3, dtype=torch.float32)
        distances[max_distance + 1] = FAR_DISTANCE
        distances[max_distance + 2] = 0.0
        self.special_bucket = max_distance + 2
        self.register_buffer("bucket_distance", distances, persistent=False)

    def thresholds(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(batch, n_pieces, hidden) -> tau, (batch, heads, n_pieces)."""
        return self.threshold(torch.tanh(self.dense(hidden_states))).transpose(1, 2)

    def scale(self, buckets: torch.Tensor, hidden_states: torch.Tensor) -> torch.Tensor:
        """(batch, heads, n_pieces, n_pieces): the factor of each score."""
        distance = self.bucket_distance[buckets][:, None]  # (batch, 1, n, n)
        tau = self.thresholds(hidden_states)[..., None]  # (batch, heads, n, 1)
        scale = 0.5 + 0.5 * torch.tanh(tau - distance.to(tau.dtype))
        has_syntax = (buckets != self.special_bucket).flatten(1).any(1)
        return torch.where(has_syntax[:, None, None, None], scale, torch.ones_like(scale))

    def forward(self, buckets: torch.Tensor, hidden_states: torch.Tensor) -> LocalScoresTransform:
        return LocalScoresTransform(self.scale(buckets, hidden_states))


LocalModuleFactory = Callable[[PretrainedConfig], nn.Module]


def local_module_factory(builder: object) -> Optional[LocalModuleFactory]:
    """How each SLA layer makes the module that turns the distance builder's
    buckets into its local attention: the builder's own make_layer_bias (a
    user's builder), or the module of a built-in builder; None for boolean
    mask builders."""
    own = getattr(builder, "make_layer_bias", None)
    if own is not None:
        return own
    # Most specific first: the soft threshold bias is a TreeDistanceBuckets.
    if isinstance(builder, DependencyScaleDistances):
        return lambda config: DependencyScale(
            config.hidden_size,
            config.num_attention_heads,
            builder.max_distance,
            builder.initial_threshold,
            getattr(config, "initializer_range", 0.02),
        )
    if isinstance(builder, SoftThresholdBias):
        return lambda config: SoftThresholdLogBias(config.num_attention_heads, builder.max_distance, builder.initial_threshold)
    if isinstance(builder, TreeDistanceBuckets):
        return lambda config: DistanceBucketBias(config.num_attention_heads, builder.n_buckets)
    return None
