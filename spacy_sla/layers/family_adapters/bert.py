"""The adapter of BERT-shaped self-attention (BERT, RoBERTa, XLM-RoBERTa,
CamemBERT, ELECTRA), and the relative-key position term BERT and ALBERT
share."""
import math
from typing import Any, Optional, Tuple

import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel

from ...errors import Errors
from .adapter import FamilyAdapter, module_list

RELATIVE_KEY_TYPES = frozenset({"relative_key", "relative_key_query"})


def relative_key_scores(
    query: torch.Tensor, key: torch.Tensor, distance_embedding: nn.Embedding, max_position_embeddings: int, kind: str
) -> torch.Tensor:
    """The relative-position term of BERT's scores (Shaw et al. 2018; Huang
    et al. 2020), before any scaling, (batch, heads, n, n): q_i . r(i - j)
    for `relative_key`, plus k_j . r(i - j) for `relative_key_query`."""
    positions = torch.arange(query.shape[-2], device=query.device)
    distance = positions[:, None] - positions[None, :]
    embedding = distance_embedding(distance + max_position_embeddings - 1).to(query.dtype)
    scores = torch.einsum("bhld,lrd->bhlr", query, embedding)
    if kind == "relative_key_query":
        scores = scores + torch.einsum("bhrd,lrd->bhlr", key, embedding)
    return scores


class BertStyleSelfAttention(FamilyAdapter):
    """Replaces the `attention.self` module of BERT, RoBERTa, XLM-RoBERTa,
    CamemBERT and ELECTRA layers (eager or SDPA); the output projection
    stays in the layer's `attention.output`. With relative_key(_query)
    position embeddings, the module keeps its distance embedding and the
    relative term, scaled like the dot products, is the score bias of both
    branches."""

    attribute = "self"
    position_embedding_types = frozenset({"absolute"}) | RELATIVE_KEY_TYPES

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
        self.query: nn.Linear = original.query
        self.key: nn.Linear = original.key
        self.value: nn.Linear = original.value
        self.position_embedding_type = getattr(original, "position_embedding_type", "absolute")
        if self.position_embedding_type in RELATIVE_KEY_TYPES:
            self.distance_embedding: nn.Embedding = original.distance_embedding
            self.max_position_embeddings: int = original.max_position_embeddings

    def position_scores(self, query: torch.Tensor, key: torch.Tensor) -> Optional[torch.Tensor]:
        """The relative term of the scaled scores, or None (absolute positions)."""
        if self.position_embedding_type not in RELATIVE_KEY_TYPES:
            return None
        scores = relative_key_scores(query, key, self.distance_embedding, self.max_position_embeddings, self.position_embedding_type)
        return scores / math.sqrt(self.head_size)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: Optional[torch.Tensor] = None,
        head_mask: Optional[torch.Tensor] = None,
        encoder_hidden_states: Optional[torch.Tensor] = None,
        encoder_attention_mask: Optional[torch.Tensor] = None,
        past_key_value: Optional[Tuple[torch.Tensor, ...]] = None,
        output_attentions: bool = False,
        **kwargs: Any,
    ) -> Tuple[Optional[torch.Tensor], ...]:
        # attention_mask is the model's additive padding mask; the bound
        # AttentionBatch holds the same information as a boolean mask, shared
        # by both branches.
        if head_mask is not None:
            raise ValueError(Errors.E010)
        query = self.split_heads(self.query(hidden_states))
        key = self.split_heads(self.key(hidden_states))
        context, probs = self.attend(
            self.batch,
            hidden_states,
            query,
            key,
            self.split_heads(self.value(hidden_states)),
            output_attentions,
            score_bias=self.position_scores(query, key),
        )
        return (context, probs) if output_attentions else (context,)
