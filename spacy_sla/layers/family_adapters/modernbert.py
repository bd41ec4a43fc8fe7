"""The adapter of ModernBERT's attention, with its rotary embeddings and its
sliding windows."""
from typing import Any, Callable, Optional, Tuple

import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel

from ...errors import Errors
from ..attention_batch import hidden_offset
from .adapter import FamilyAdapter, module_list


def modernbert_rotary() -> Callable[..., Tuple[torch.Tensor, torch.Tensor]]:
    """ModernBERT's rotary embedding, imported when a ModernBERT layer is
    wrapped: transformers ships ModernBERT from 4.48 on, and `import
    spacy_sla` must work with every transformers version setup.cfg allows."""
    from transformers.models.modernbert.modeling_modernbert import apply_rotary_pos_emb

    return apply_rotary_pos_emb


class ModernBertStyleAttention(FamilyAdapter):
    """Replaces the `attn` module of ModernBERT layers (eager or SDPA; the
    unpadded Flash Attention layout is refused), which also holds the
    output projection `Wo`: the mixing happens before it. The rotary
    embeddings turn the queries and keys as in the model. In the layers
    that attend within a sliding window, the window is the model's global
    attention: it comes as a score bias (hidden_offset outside it) to
    both branches, so the local branch sees the window's keys that the
    local mask shows."""

    attribute = "attn"
    minimum_transformers = "4.48.0"  # the first with ModernBERT

    @staticmethod
    def layers(model: PreTrainedModel) -> nn.ModuleList:
        return module_list(model, "layers")

    @staticmethod
    def holder(layer: nn.Module) -> nn.Module:
        return layer

    def __init__(self, original: Any, config: PretrainedConfig, **options: Any) -> None:
        if config._attn_implementation == "flash_attention_2":
            raise ValueError(
                Errors.E009.format(
                    name=config.name_or_path,
                    reason="its flash_attention_2 layers attend over unpadded batches; load it with "
                    "attn_implementation \"sdpa\" or \"eager\"",
                )
            )
        super().__init__(original.all_head_size, original.num_heads, config.attention_dropout, config.initializer_range, **options)
        self.Wqkv: nn.Linear = original.Wqkv
        self.rotary_emb: nn.Module = original.rotary_emb
        self.Wo: nn.Linear = original.Wo
        self.out_drop: nn.Dropout = original.out_drop
        self.local_attention: Tuple[int, int] = original.local_attention
        self.apply_rotary = modernbert_rotary()

    def window_bias(self, length: int, dtype: torch.dtype, device: torch.device) -> Optional[torch.Tensor]:
        """(1, 1, n, n): 0 within the layer's sliding window, hidden_offset
        outside it (added to the scores, and to padding's offset, without
        overflowing in float16); None for a layer that attends globally."""
        if self.local_attention == (-1, -1):
            return None
        positions = torch.arange(length, device=device)
        outside = (positions[:, None] - positions[None, :]).abs() > self.local_attention[0]
        return torch.zeros((length, length), dtype=dtype, device=device).masked_fill_(outside, hidden_offset(dtype))[None, None]

    def forward(
        self,
        hidden_states: torch.Tensor,
        output_attentions: bool = False,
        position_ids: Optional[torch.Tensor] = None,
        **kwargs: Any,
    ) -> Tuple[Optional[torch.Tensor], ...]:
        batch, length, _ = hidden_states.shape
        qkv = self.Wqkv(hidden_states).view(batch, length, 3, self.n_heads, self.head_size)
        cos, sin = self.rotary_emb(qkv, position_ids=position_ids)
        query, key, value = qkv.transpose(3, 1).unbind(dim=2)
        query, key = self.apply_rotary(query, key, cos, sin)
        context, probs = self.attend(
            self.batch,
            hidden_states,
            query,
            key,
            value,
            output_attentions,
            score_bias=self.window_bias(length, query.dtype, query.device),
        )
        context = self.out_drop(self.Wo(context))
        return (context, probs) if output_attentions else (context,)
