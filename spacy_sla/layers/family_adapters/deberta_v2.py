"""The adapter of DeBERTa-v2 and DeBERTa-v3's disentangled self-attention."""
import math
from typing import Any, Callable, List, Optional, Tuple

import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel
from transformers.models.deberta_v2.modeling_deberta_v2 import DisentangledSelfAttention

from ...errors import Errors
from .adapter import FamilyAdapter, module_list


class DebertaV2StyleSelfAttention(FamilyAdapter):
    """Replaces the `attention.self` module (DisentangledSelfAttention) of
    DeBERTa-v2 and DeBERTa-v3 layers; the output projection stays in the
    layer's `attention.output`.

    The model's scores are the content-to-content term plus, with relative
    attention, the content-to-position and position-to-content terms
    (`pos_att_type`), all divided by sqrt(head_size * scale_factor), where
    scale_factor counts the terms. The queries go to `attend` scaled by
    1 / sqrt(scale_factor), so that its 1 / sqrt(head_size) gives the
    content term's scale, and the position terms, computed by DeBERTa's own
    `disentangled_attention_bias` from the unscaled projections, are the
    score bias of both branches: the local mask applies to their sum. With
    `query_states` (DeBERTa's enhanced mask decoder), the queries and the
    gate come from them."""

    attribute = "self"
    # its self-attention returns (context, probabilities) from 4.47 on
    minimum_transformers = "4.47.0"
    # DeBERTa's own helpers read these attributes of the module they serve
    transpose_for_scores = DisentangledSelfAttention.transpose_for_scores
    # (untyped in transformers; bound to this module, whose attributes it reads)
    disentangled_attention_bias: Callable[..., Any] = DisentangledSelfAttention.disentangled_attention_bias

    @staticmethod
    def layers(model: PreTrainedModel) -> nn.ModuleList:
        return module_list(model, "encoder.layer")

    @staticmethod
    def holder(layer: nn.Module) -> nn.Module:
        return layer.get_submodule("attention")

    def __init__(self, original: Any, config: PretrainedConfig, **options: Any) -> None:
        if original.all_head_size != config.hidden_size:
            # the gate reads the layer input, the heads' split its projections
            reason = (
                f"its heads ({original.num_attention_heads} of attention_head_size {original.attention_head_size}) "
                f"do not span its hidden_size {config.hidden_size}; use a model whose attention_head_size is unset"
            )
            raise ValueError(Errors.E009.format(name=config.name_or_path, reason=reason))
        super().__init__(
            original.all_head_size,
            original.num_attention_heads,
            config.attention_probs_dropout_prob,
            config.initializer_range,
            **options,
        )
        self.num_attention_heads: int = original.num_attention_heads
        self.query_proj: nn.Linear = original.query_proj
        self.key_proj: nn.Linear = original.key_proj
        self.value_proj: nn.Linear = original.value_proj
        self.share_att_key: bool = original.share_att_key
        self.pos_att_type: List[str] = original.pos_att_type
        self.relative_attention: bool = original.relative_attention
        self.scale_factor = 1 + sum(term in self.pos_att_type for term in ("c2p", "p2c"))
        if self.relative_attention:
            self.position_buckets: int = original.position_buckets
            self.max_relative_positions: int = original.max_relative_positions
            self.pos_ebd_size: int = original.pos_ebd_size
            self.pos_dropout: nn.Module = original.pos_dropout
            for name in ("pos_key_proj", "pos_query_proj"):
                if hasattr(original, name):
                    setattr(self, name, getattr(original, name))

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: Optional[torch.Tensor] = None,
        output_attentions: bool = False,
        query_states: Optional[torch.Tensor] = None,
        relative_pos: Optional[torch.Tensor] = None,
        rel_embeddings: Optional[torch.Tensor] = None,
    ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        queries_from = hidden_states if query_states is None else query_states
        query = self.split_heads(self.query_proj(queries_from))
        key = self.split_heads(self.key_proj(hidden_states))
        position_scores = None
        if self.relative_attention:
            batch, heads, length, head_size = query.shape
            flat_query = query.reshape(batch * heads, length, head_size)
            flat_key = key.reshape(batch * heads, key.shape[-2], head_size)
            position_scores = self.disentangled_attention_bias(
                flat_query, flat_key, relative_pos, self.pos_dropout(rel_embeddings), self.scale_factor
            )
            if isinstance(position_scores, torch.Tensor):  # 0 when pos_att_type names no term
                position_scores = position_scores.view(batch, heads, length, key.shape[-2])
            else:
                position_scores = None
        context, probs = self.attend(
            self.batch,
            queries_from,
            query * (1.0 / math.sqrt(self.scale_factor)),
            key,
            self.split_heads(self.value_proj(hidden_states)),
            output_attentions,
            score_bias=position_scores,
        )
        return context, probs
