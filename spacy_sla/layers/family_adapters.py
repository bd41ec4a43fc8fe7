"""The model-family adapters: where each family of Hugging Face encoders
keeps its self-attention modules, and the module that replaces one.

A family plugs in with one FamilyAdapter subclass, registered under the
model_type of its configs in ATTENTION_FAMILIES."""
from abc import ABC, abstractmethod
from typing import ClassVar, Dict, Optional, Tuple, Type

import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel

from ..errors import Errors
from .syntax_aware_attention import SyntaxAwareAttention


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

    SyntaxAwareTransformer refuses a layer it cannot wrap (SLA-E009: a decoder,
    relative position embeddings, pruned heads) before the adapter is built.
    """

    attribute: ClassVar[str]

    @staticmethod
    @abstractmethod
    def layers(model: PreTrainedModel) -> nn.ModuleList:
        """The encoder's layers, in order."""

    @staticmethod
    @abstractmethod
    def holder(layer: nn.Module) -> nn.Module:
        """The module of `layer` that holds its self-attention module."""


class BertStyleSelfAttention(FamilyAdapter):
    """Replaces the `attention.self` module of BERT, RoBERTa, XLM-RoBERTa,
    CamemBERT and ELECTRA layers (eager or SDPA); the output projection
    stays in the layer's `attention.output`."""

    attribute = "self"

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
        context, probs = self.attend(
            hidden_states,
            self.split_heads(self.query(hidden_states)),
            self.split_heads(self.key(hidden_states)),
            self.split_heads(self.value(hidden_states)),
            output_attentions,
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


# model_type (of the Hugging Face config) -> its adapter
ATTENTION_FAMILIES: Dict[str, Type[FamilyAdapter]] = {
    "bert": BertStyleSelfAttention,
    "roberta": BertStyleSelfAttention,
    "xlm-roberta": BertStyleSelfAttention,
    "camembert": BertStyleSelfAttention,
    "electra": BertStyleSelfAttention,
    "distilbert": DistilBertStyleAttention,
}


def attention_family(config: PretrainedConfig, name: str = "") -> Type[FamilyAdapter]:
    """The adapter of the config's model family; SLA-E002, naming the supported
    families, for any other."""
    family = ATTENTION_FAMILIES.get(config.model_type)
    if family is None:
        raise ValueError(
            Errors.E002.format(
                name=name or config.name_or_path,
                model_type=config.model_type,
                supported=", ".join(sorted(ATTENTION_FAMILIES)),
            )
        )
    return family
