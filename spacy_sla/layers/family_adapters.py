"""The model-family adapters: where each family of Hugging Face encoders
keeps its self-attention modules, and the module that replaces one.

A family plugs in with one FamilyAdapter subclass, registered under the
model_type of its configs in ATTENTION_FAMILIES. check_model_type (and
check_transformer_config, from a config) tells before any model is built
whether a model type, and its position embeddings, can be wrapped."""
import math
from abc import ABC, abstractmethod
from typing import Callable, ClassVar, Dict, FrozenSet, Optional, Tuple, Type

import torch
import transformers
from packaging.version import Version
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel
from transformers.models.deberta_v2.modeling_deberta_v2 import DisentangledSelfAttention

from ..errors import Errors
from .attention_batch import hidden_offset
from .syntax_aware_attention import SyntaxAwareAttention

TRANSFORMERS_FLOOR = "4.38.0"  # setup.cfg's transformers>=


class FamilyAdapter(SyntaxAwareAttention, ABC):
    """A model family's replacement of its layers' self-attention module.

    An adapter provides:
    - `layers(model)`: the encoder's list of layers, for a model of the family;
    - `holder(layer)`: the module of a layer that holds its self-attention;
    - `attribute`: the name of the self-attention module in its holder;
    - `__init__(original, config, **options)`: keeps the original module's
      projections and passes its hidden size and number of heads, the
      config's attention dropout and initializer range, and the options
      (local, local_bias, supervised_head) to SyntaxAwareAttention;
    - `forward`, with the original module's signature: the projections,
      split into heads, go through `self.attend`; it returns what the
      original returns (the context, and the probabilities with
      output_attentions), after the output projection where the original
      module holds it. A head mask is refused (SLA-E010).

    A position term of the model's scores (relative positions) goes to
    `attend` as its score_bias, so that both branches see the model's own
    scores.

    SyntaxAwareTransformer refuses a layer it cannot wrap (SLA-E009: a decoder,
    position embeddings not in `position_embedding_types`, pruned heads)
    before the adapter is built.
    """

    attribute: ClassVar[str]
    # the values of the config's (and the attention module's)
    # position_embedding_type the adapter computes as the model does
    position_embedding_types: ClassVar[FrozenSet[str]] = frozenset({"absolute"})
    # the first transformers release whose modules of the family the adapter
    # wraps as they are (setup.cfg's floor for most; later for families that
    # transformers added or reshaped since)
    minimum_transformers: ClassVar[str] = TRANSFORMERS_FLOOR

    @staticmethod
    @abstractmethod
    def layers(model: PreTrainedModel) -> nn.ModuleList:
        """The encoder's layers, in order."""

    @staticmethod
    @abstractmethod
    def holder(layer: nn.Module) -> nn.Module:
        """The module of `layer` that holds its self-attention module."""


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
        return model.encoder.layer

    @staticmethod
    def holder(layer: nn.Module) -> nn.Module:
        return layer.attention

    def __init__(self, original: nn.Module, config, **options):
        super().__init__(
            original.all_head_size,
            original.num_attention_heads,
            config.attention_probs_dropout_prob,
            config.initializer_range,
            **options,
        )
        self.query = original.query
        self.key = original.key
        self.value = original.value
        self.position_embedding_type = getattr(original, "position_embedding_type", "absolute")
        if self.position_embedding_type in RELATIVE_KEY_TYPES:
            self.distance_embedding = original.distance_embedding
            self.max_position_embeddings = original.max_position_embeddings

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
        **kwargs,
    ) -> Tuple[torch.Tensor, ...]:
        # attention_mask is the model's additive padding mask; the active
        # AttentionBatch holds the same information as a boolean mask, shared
        # by both branches.
        if head_mask is not None:
            raise ValueError(Errors.E010)
        query = self.split_heads(self.query(hidden_states))
        key = self.split_heads(self.key(hidden_states))
        context, probs = self.attend(
            hidden_states,
            query,
            key,
            self.split_heads(self.value(hidden_states)),
            output_attentions,
            score_bias=self.position_scores(query, key),
        )
        return (context, probs) if output_attentions else (context,)


class DistilBertStyleAttention(FamilyAdapter):
    """Replaces DistilBERT's `attention` module, which also holds the output
    projection: the mixing happens before it."""

    attribute = "attention"

    @staticmethod
    def layers(model: PreTrainedModel) -> nn.ModuleList:
        return model.transformer.layer

    @staticmethod
    def holder(layer: nn.Module) -> nn.Module:
        return layer

    def __init__(self, original: nn.Module, config, **options):
        super().__init__(original.dim, original.n_heads, config.attention_dropout, config.initializer_range, **options)
        self.q_lin = original.q_lin
        self.k_lin = original.k_lin
        self.v_lin = original.v_lin
        self.out_lin = original.out_lin

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: Optional[torch.Tensor] = None,
        head_mask: Optional[torch.Tensor] = None,
        output_attentions: bool = False,
        **kwargs,
    ) -> Tuple[torch.Tensor, ...]:
        if head_mask is not None:
            raise ValueError(Errors.E010)
        context, probs = self.attend(
            query,
            self.split_heads(self.q_lin(query)),
            self.split_heads(self.k_lin(key)),
            self.split_heads(self.v_lin(value)),
            output_attentions,
        )
        context = self.out_lin(context)
        return (context, probs) if output_attentions else (context,)


class MPNetStyleAttention(FamilyAdapter):
    """Replaces the `attention.attn` module of MPNet layers, which also holds
    the output projection `o`: the mixing happens before it. The encoder's
    relative position bias (T5-style buckets, one table for all layers)
    arrives as `position_bias` and is the score bias of both branches, so
    the local mask is added to the biased scores."""

    attribute = "attn"

    @staticmethod
    def layers(model: PreTrainedModel) -> nn.ModuleList:
        return model.encoder.layer

    @staticmethod
    def holder(layer: nn.Module) -> nn.Module:
        return layer.attention

    def __init__(self, original: nn.Module, config, **options):
        super().__init__(
            original.all_head_size,
            original.num_attention_heads,
            config.attention_probs_dropout_prob,
            config.initializer_range,
            **options,
        )
        self.q = original.q
        self.k = original.k
        self.v = original.v
        self.o = original.o

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: Optional[torch.Tensor] = None,
        head_mask: Optional[torch.Tensor] = None,
        position_bias: Optional[torch.Tensor] = None,
        output_attentions: bool = False,
        **kwargs,
    ) -> Tuple[torch.Tensor, ...]:
        if head_mask is not None:
            raise ValueError(Errors.E010)
        context, probs = self.attend(
            hidden_states,
            self.split_heads(self.q(hidden_states)),
            self.split_heads(self.k(hidden_states)),
            self.split_heads(self.v(hidden_states)),
            output_attentions,
            score_bias=position_bias,
        )
        context = self.o(context)
        return (context, probs) if output_attentions else (context,)


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

    @staticmethod
    def layers(model: PreTrainedModel) -> nn.ModuleList:
        return nn.ModuleList(layer for group in model.encoder.albert_layer_groups for layer in group.albert_layers)

    @staticmethod
    def holder(layer: nn.Module) -> nn.Module:
        return layer

    def __init__(self, original: nn.Module, config, **options):
        super().__init__(
            original.all_head_size,
            original.num_attention_heads,
            config.attention_probs_dropout_prob,
            config.initializer_range,
            **options,
        )
        self.query = original.query
        self.key = original.key
        self.value = original.value
        self.dense = original.dense
        self.output_dropout = original.output_dropout
        self.LayerNorm = original.LayerNorm
        self.position_embedding_type = getattr(original, "position_embedding_type", "absolute")
        if self.position_embedding_type in RELATIVE_KEY_TYPES:
            self.distance_embedding = original.distance_embedding
            self.max_position_embeddings = original.max_position_embeddings

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: Optional[torch.Tensor] = None,
        head_mask: Optional[torch.Tensor] = None,
        output_attentions: bool = False,
        **kwargs,
    ) -> Tuple[torch.Tensor, ...]:
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
            hidden_states,
            query,
            key,
            self.split_heads(self.value(hidden_states)),
            output_attentions,
            score_bias=position_scores,
        )
        output = self.LayerNorm(hidden_states + self.output_dropout(self.dense(context)))
        return (output, probs) if output_attentions else (output,)


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
    disentangled_attention_bias = DisentangledSelfAttention.disentangled_attention_bias

    @staticmethod
    def layers(model: PreTrainedModel) -> nn.ModuleList:
        return model.encoder.layer

    @staticmethod
    def holder(layer: nn.Module) -> nn.Module:
        return layer.attention

    def __init__(self, original: nn.Module, config, **options):
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
        self.num_attention_heads = original.num_attention_heads
        self.query_proj = original.query_proj
        self.key_proj = original.key_proj
        self.value_proj = original.value_proj
        self.share_att_key = original.share_att_key
        self.pos_att_type = original.pos_att_type
        self.relative_attention = original.relative_attention
        self.scale_factor = 1 + sum(term in self.pos_att_type for term in ("c2p", "p2c"))
        if self.relative_attention:
            self.position_buckets = original.position_buckets
            self.max_relative_positions = original.max_relative_positions
            self.pos_ebd_size = original.pos_ebd_size
            self.pos_dropout = original.pos_dropout
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
            queries_from,
            query * (1.0 / math.sqrt(self.scale_factor)),
            key,
            self.split_heads(self.value_proj(hidden_states)),
            output_attentions,
            score_bias=position_scores,
        )
        return context, probs


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
        return model.layers

    @staticmethod
    def holder(layer: nn.Module) -> nn.Module:
        return layer

    def __init__(self, original: nn.Module, config, **options):
        if config._attn_implementation == "flash_attention_2":
            raise ValueError(
                Errors.E009.format(
                    name=config.name_or_path,
                    reason="its flash_attention_2 layers attend over unpadded batches; load it with "
                    "attn_implementation \"sdpa\" or \"eager\"",
                )
            )
        super().__init__(original.all_head_size, original.num_heads, config.attention_dropout, config.initializer_range, **options)
        self.Wqkv = original.Wqkv
        self.rotary_emb = original.rotary_emb
        self.Wo = original.Wo
        self.out_drop = original.out_drop
        self.local_attention = original.local_attention
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
        **kwargs,
    ) -> Tuple[torch.Tensor, ...]:
        batch, length, _ = hidden_states.shape
        qkv = self.Wqkv(hidden_states).view(batch, length, 3, self.n_heads, self.head_size)
        cos, sin = self.rotary_emb(qkv, position_ids=position_ids)
        query, key, value = qkv.transpose(3, 1).unbind(dim=2)
        query, key = self.apply_rotary(query, key, cos, sin)
        context, probs = self.attend(
            hidden_states,
            query,
            key,
            value,
            output_attentions,
            score_bias=self.window_bias(length, query.dtype, query.device),
        )
        context = self.out_drop(self.Wo(context))
        return (context, probs) if output_attentions else (context,)


# model_type (of the Hugging Face config) -> its adapter
ATTENTION_FAMILIES: Dict[str, Type[FamilyAdapter]] = {
    "bert": BertStyleSelfAttention,
    "roberta": BertStyleSelfAttention,
    "xlm-roberta": BertStyleSelfAttention,
    "camembert": BertStyleSelfAttention,
    "electra": BertStyleSelfAttention,
    "distilbert": DistilBertStyleAttention,
    "mpnet": MPNetStyleAttention,
    "albert": AlbertStyleAttention,
    "deberta-v2": DebertaV2StyleSelfAttention,
    "modernbert": ModernBertStyleAttention,
}


def supported_model_types() -> str:
    return ", ".join(sorted(ATTENTION_FAMILIES))


def check_model_type(model_type: str, position_embedding_type: Optional[str] = None, name: str = "") -> Type[FamilyAdapter]:
    """The adapter of a model type, checked before any model is built or
    trained: SLA-E002, naming the supported model types, for a model type
    without one; SLA-E099 where the installed transformers is older than
    the adapter needs; SLA-E009 for a position_embedding_type (as in the model's
    config; None: the family's default) the adapter does not compute.
    `name`: the model as the error names it (default: the model type)."""
    family = ATTENTION_FAMILIES.get(model_type)
    if family is None:
        raise ValueError(Errors.E002.format(name=name or model_type, model_type=model_type, supported=supported_model_types()))
    if Version(installed_transformers()) < Version(family.minimum_transformers):
        raise ValueError(Errors.E099.format(name=name or model_type, model_type=model_type,
                                            minimum=family.minimum_transformers, installed=installed_transformers()))
    if position_embedding_type is not None and position_embedding_type not in family.position_embedding_types:
        raise ValueError(
            Errors.E009.format(name=name or model_type, reason=unsupported_positions_reason(model_type, position_embedding_type))
        )
    return family


def installed_transformers() -> str:
    return transformers.__version__


def unsupported_positions_reason(model_type: str, position_embedding_type: str) -> str:
    supported = ", ".join(sorted(ATTENTION_FAMILIES[model_type].position_embedding_types))
    return (
        f"it uses '{position_embedding_type}' position embeddings, and for model type '{model_type}' the SLA "
        f"transformer supports position_embedding_type {supported}; use a model with one of them"
    )


def check_transformer_config(config: PretrainedConfig, name: str = "") -> Type[FamilyAdapter]:
    """check_model_type for a Hugging Face config (e.g. AutoConfig's, which
    needs no weights), reading its model_type and position_embedding_type."""
    return check_model_type(
        config.model_type, getattr(config, "position_embedding_type", None), name or config.name_or_path
    )


def attention_family(config: PretrainedConfig, name: str = "") -> Type[FamilyAdapter]:
    """The adapter of the config's model family; SLA-E002, naming the supported
    families, for any other."""
    return check_model_type(config.model_type, name=name or config.name_or_path)
