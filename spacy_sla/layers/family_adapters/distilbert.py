"""The adapter of DistilBERT's attention."""
from typing import Any, Optional, Tuple

import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel

from ...errors import Errors
from .adapter import FamilyAdapter, module_list


class DistilBertStyleAttention(FamilyAdapter):
    """Replaces DistilBERT's `attention` module, which also holds the output
    projection: the mixing happens before it."""

    attribute = "attention"

    @staticmethod
    def layers(model: PreTrainedModel) -> nn.ModuleList:
        return module_list(model, "transformer.layer")

    @staticmethod
    def holder(layer: nn.Module) -> nn.Module:
        return layer

    def __init__(self, original: Any, config: PretrainedConfig, **options: Any) -> None:
        super().__init__(original.dim, original.n_heads, config.attention_dropout, config.initializer_range, **options)
        self.q_lin: nn.Linear = original.q_lin
        self.k_lin: nn.Linear = original.k_lin
        self.v_lin: nn.Linear = original.v_lin
        self.out_lin: nn.Linear = original.out_lin

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: Optional[torch.Tensor] = None,
        head_mask: Optional[torch.Tensor] = None,
        output_attentions: bool = False,
        **kwargs: Any,
    ) -> Tuple[Optional[torch.Tensor], ...]:
        if head_mask is not None:
            raise ValueError(Errors.E010)
        context, probs = self.attend(
            self.batch,
            query,
            self.split_heads(self.q_lin(query)),
            self.split_heads(self.k_lin(key)),
            self.split_heads(self.v_lin(value)),
            output_attentions,
        )
        context = self.out_lin(context)
        return (context, probs) if output_attentions else (context,)
