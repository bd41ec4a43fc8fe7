"""The adapter of MPNet's attention."""
from typing import Any, Optional, Tuple

import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel

from ...errors import Errors
from .adapter import FamilyAdapter, module_list


class MPNetStyleAttention(FamilyAdapter):
    """Replaces the `attention.attn` module of MPNet layers, which also holds
    the output projection `o`: the mixing happens before it. The encoder's
    relative position bias (T5-style buckets, one table for all layers)
    arrives as `position_bias` and is the score bias of both branches, so
    the local mask is added to the biased scores."""

    attribute = "attn"

    @staticmethod
    def layers(model: PreTrainedModel) -> nn.ModuleList:
        return module_list(model, "encoder.layer")

    @staticmethod
    def holder(layer: nn.Module) -> nn.Module:
        return layer.get_submodule("attention")

    def __init__(self, original: Any, config: PretrainedConfig, **options: Any) -> None:
        super().__init__(
            original.all_head_size,
            original.num_attention_heads,
            config.attention_probs_dropout_prob,
            config.initializer_range,
            **options,
        )
        self.q: nn.Linear = original.q
        self.k: nn.Linear = original.k
        self.v: nn.Linear = original.v
        self.o: nn.Linear = original.o

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: Optional[torch.Tensor] = None,
        head_mask: Optional[torch.Tensor] = None,
        position_bias: Optional[torch.Tensor] = None,
        output_attentions: bool = False,
        **kwargs: Any,
    ) -> Tuple[Optional[torch.Tensor], ...]:
        if head_mask is not None:
            raise ValueError(Errors.E010)
        context, probs = self.attend(
            self.batch,
            hidden_states,
            self.split_heads(self.q(hidden_states)),
            self.split_heads(self.k(hidden_states)),
            self.split_heads(self.v(hidden_states)),
            output_attentions,
            score_bias=position_bias,
        )
        context = self.o(context)
        return (context, probs) if output_attentions else (context,)
