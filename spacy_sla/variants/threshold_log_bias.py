"""The threshold log-bias (spacy-sla.threshold_log_bias.v1), our own variant
beyond the paper, and its variant `logthreshold`: the local branch adds
log(0.5 + 0.5 * tanh(tau_h - D(i, j))) to the scores, with one learned
threshold tau_h per head and layer, the same for every token. It is not the
authors' soft threshold (spacy-sla.dependency_scale.v1, variants/dependency_scale.py),
which scales the scores by a threshold predicted per token."""
from typing import Optional

import torch
from spacy.util import registry
from torch import nn
from torch.nn import functional as F
from transformers import PretrainedConfig

from .registry import SLA_TRANSFORMER, register_variant
from .tree_distance_bias import TreeDistanceBias

__all__ = ["ThresholdLogBias", "ThresholdLogBiasLayer", "create_threshold_log_bias"]


class ThresholdLogBias(TreeDistanceBias):
    """The clipped tree distances of the soft tree-distance bias (no
    neighbour minimum, no punctuation rule), turned into the threshold
    log-bias by each SLA layer."""

    name = "spacy-sla.threshold_log_bias.v1"

    def __init__(self, initial_threshold: float = 3.0, max_distance: int = 8):
        super().__init__(max_distance)
        self.initial_threshold = float(initial_threshold)

    def __repr__(self) -> str:
        return f"ThresholdLogBias(initial_threshold={self.initial_threshold}, max_distance={self.max_distance})"

    def make_layer_bias(self, transformer_config: PretrainedConfig) -> nn.Module:
        return ThresholdLogBiasLayer(transformer_config.num_attention_heads, self.max_distance, self.initial_threshold)


class ThresholdLogBiasLayer(nn.Module):
    """The additive bias log(0.5 + 0.5 * tanh(tau_h - D)) =
    logsigmoid(2 * (tau_h - D)), with one learned threshold tau_h per head.
    D is the bucket's distance; "farther" pairs count as max_distance + 1
    and special pieces as distance 0. As a log-bias it rescales the
    attention probabilities, whereas the authors (DependencyScaleLayer) rescale
    the logits."""

    bucket_distance: torch.Tensor  # a buffer: the distance of each bucket

    def __init__(self, n_heads: int, max_distance: int, initial_threshold: float):
        super().__init__()
        self.threshold = nn.Parameter(torch.full((n_heads,), float(initial_threshold)))
        distances = torch.arange(max_distance + 3, dtype=torch.float32)
        distances[-1] = 0.0  # the special pieces' bucket
        self.register_buffer("bucket_distance", distances, persistent=False)

    def forward(self, buckets: torch.Tensor, hidden_states: Optional[torch.Tensor] = None) -> torch.Tensor:
        distance = self.bucket_distance[buckets][:, None]  # (batch, 1, n, n)
        return F.logsigmoid(2.0 * (self.threshold[None, :, None, None] - distance))


@registry.misc("spacy-sla.threshold_log_bias.v1")
def create_threshold_log_bias(initial_threshold: float = 3.0, max_distance: int = 8) -> ThresholdLogBias:
    """The threshold log-bias: an additive log(0.5 + 0.5 tanh(tau_h - D))
    with one learned threshold per head (not the authors' formulation)."""
    return ThresholdLogBias(initial_threshold=initial_threshold, max_distance=max_distance)


register_variant("logthreshold", "Threshold log-bias (ours, beyond the paper; not the authors' soft threshold, which is "
                 "depscale): the local branch\nadds log(0.5 + 0.5 tanh(tau_h - D)) to the scores, one fixed learned "
                 "tau per head and layer.", SLA_TRANSFORMER + """
[components.transformer.model.mask]
@misc = "spacy-sla.threshold_log_bias.v1"
initial_threshold = 3.0
max_distance = 8
""")
