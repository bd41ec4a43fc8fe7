"""The adapter of ALBERT's attention, whose layer module runs at several
depths."""
from typing import Any, Optional, Tuple

import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel

from ...errors import Errors
from .adapter import FamilyAdapter, module_list
from .bert import RELATIVE_KEY_TYPES, relative_key_scores


class AlbertStyleAttention(FamilyAdapter):
    """Replaces the `attention` module of ALBERT layers, which also holds the
    output projection, its dropout and the residual LayerNorm: the mixing
    happens before them.

    ALBERT runs the same layer module at every depth (num_hidden_layers
    depths over num_hidden_groups x inner_group_num modules, usually one).
    The gate is shared like the weights: the adapter wraps each distinct
    module once, with one gate, and `layers` (what `sla_layers` and the
    parent-attention layer index) are those modules, not the depths. A
    wrapped module gates the local branch at every depth it runs at, from
    that depth's input; its row of the recorded gates is the mean over its
    depths (the rows stay those of `sla_layers`), and a supervised head is
    supervised at each of its depths (the losses summed). A gate per depth would give the shared layer weights it does
    not have, and the model's parameter count would grow with its depth.

    With relative_key(_query) position embeddings, the relative term is
    added to the scores unscaled, as ALBERT's own attention adds it.
    """

    attribute = "attention"
    position_embedding_types = frozenset({"absolute"}) | RELATIVE_KEY_TYPES
    # ALBERT shares its layers: num_hidden_layers is how often the groups run
    layer_list_settings = ("num_hidden_groups", "inner_group_num")

    @staticmethod
    def layers(model: PreTrainedModel) -> nn.ModuleList:
        groups = module_list(model, "encoder.albert_layer_groups")
        return nn.ModuleList(layer for group in groups for layer in module_list(group, "albert_layers"))

    @staticmethod
    def holder(layer: nn.Module) -> nn.Module:
        return layer

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
        self.dense: nn.Linear = original.dense
        self.output_dropout: nn.Dropout = original.output_dropout
        self.LayerNorm: nn.LayerNorm = original.LayerNorm
        self.position_embedding_type = getattr(original, "position_embedding_type", "absolute")
        if self.position_embedding_type in RELATIVE_KEY_TYPES:
            self.distance_embedding: nn.Embedding = original.distance_embedding
            self.max_position_embeddings: int = original.max_position_embeddings

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: Optional[torch.Tensor] = None,
        head_mask: Optional[torch.Tensor] = None,
        output_attentions: bool = False,
        **kwargs: Any,
    ) -> Tuple[Optional[torch.Tensor], ...]:
        if head_mask is not None:
            raise ValueError(Errors.E010)
        query = self.split_heads(self.query(hidden_states))
        key = self.split_heads(self.key(hidden_states))
        position_scores = None
        if self.position_embedding_type in RELATIVE_KEY_TYPES:
            position_scores = relative_key_scores(
                query, key, self.distance_embedding, self.max_position_embeddings, self.position_embedding_type
            )
        context, probs = self.attend(
            self.batch,
            hidden_states,
            query,
            key,
            self.split_heads(self.value(hidden_states)),
            output_attentions,
            score_bias=position_scores,
        )
        output = self.LayerNorm(hidden_states + self.output_dropout(self.dense(context)))
        return (output, probs) if output_attentions else (output,)
