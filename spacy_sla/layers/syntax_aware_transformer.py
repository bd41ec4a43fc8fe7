"""A Hugging Face encoder with SLA attention in some or all of its layers."""
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Type

import torch
from torch import nn
from transformers import AutoModel, PretrainedConfig, PreTrainedModel

from ..errors import Errors
from .attention import (
    AttentionMaskSlot,
    BertStyleSelfAttention,
    DistilBertStyleAttention,
    GatedLocalAttention,
)


@dataclass(frozen=True)
class AttentionFamily:
    """Where a model family keeps its self-attention modules."""

    layers: Callable[[PreTrainedModel], nn.ModuleList]
    holder: Callable[[nn.Module], nn.Module]  # the layer's module that owns the attention
    attribute: str  # the attention module's name in its holder
    replacement: Type[GatedLocalAttention]


_BERT_STYLE = AttentionFamily(
    layers=lambda model: model.encoder.layer,
    holder=lambda layer: layer.attention,
    attribute="self",
    replacement=BertStyleSelfAttention,
)
_DISTILBERT_STYLE = AttentionFamily(
    layers=lambda model: model.transformer.layer,
    holder=lambda layer: layer,
    attribute="attention",
    replacement=DistilBertStyleAttention,
)
ATTENTION_FAMILIES: Dict[str, AttentionFamily] = {
    "bert": _BERT_STYLE,
    "roberta": _BERT_STYLE,
    "xlm-roberta": _BERT_STYLE,
    "camembert": _BERT_STYLE,
    "electra": _BERT_STYLE,
    "distilbert": _DISTILBERT_STYLE,
}


def attention_family(config: PretrainedConfig, name: str = "") -> AttentionFamily:
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


def resolve_layers(sla_layers: Optional[Sequence[int]], n_layers: int) -> List[int]:
    """Sorted, non-negative layer indices; None means every layer."""
    if sla_layers is None:
        return list(range(n_layers))
    resolved = []
    for index in sla_layers:
        if isinstance(index, bool) or not isinstance(index, int) or not -n_layers <= index < n_layers:
            resolved = None
            break
        resolved.append(index % n_layers)
    if resolved is None or len(set(resolved)) != len(resolved):
        raise ValueError(Errors.E003.format(sla_layers=list(sla_layers), n_layers=n_layers))
    return sorted(resolved)


def _is_gate_key(key: str) -> bool:
    return key.endswith((".gate.weight", ".gate.bias"))


def _check_wrappable(original: nn.Module, config: PretrainedConfig) -> None:
    reason = None
    if getattr(config, "is_decoder", False):
        reason = "it is configured as a decoder"
    elif getattr(original, "position_embedding_type", "absolute") != "absolute":
        reason = f"it uses '{original.position_embedding_type}' position embeddings"
    elif getattr(original, "pruned_heads", None):
        reason = "some of its heads are pruned"
    if reason is not None:
        raise ValueError(Errors.E009.format(name=config.name_or_path, reason=reason))


class SyntaxAwareTransformer(nn.Module):
    """Wraps a Hugging Face encoder (kept as `.transformer`, so its state dict
    keys keep their names under a "transformer." prefix) and replaces the
    self-attention of the chosen layers with SLA attention.

    forward takes the usual encoder inputs plus `local_mask`, a bool tensor
    (batch, n_pieces, n_pieces) or None for global attention only, and
    returns the encoder's output.
    """

    def __init__(self, transformer: PreTrainedModel, sla_layers: Optional[Sequence[int]] = None):
        super().__init__()
        config = transformer.config
        family = attention_family(config)
        layers = family.layers(transformer)
        self.transformer = transformer
        self.sla_layers = resolve_layers(sla_layers, len(layers))
        self.slot = AttentionMaskSlot()
        for index in self.sla_layers:
            holder = family.holder(layers[index])
            original = getattr(holder, family.attribute)
            _check_wrappable(original, config)
            setattr(holder, family.attribute, family.replacement(original, config, self.slot))

    @classmethod
    def from_config(
        cls, config: PretrainedConfig, sla_layers: Optional[Sequence[int]] = None
    ) -> "SyntaxAwareTransformer":
        """An untrained model of the given architecture (weights are loaded
        afterwards, e.g. from a saved pipeline)."""
        return cls(AutoModel.from_config(config), sla_layers)

    @property
    def config(self) -> PretrainedConfig:
        return self.transformer.config

    @property
    def device(self) -> torch.device:
        return self.transformer.device

    def sla_parameter_names(self) -> List[str]:
        return [
            f"{module_name}.{param_name}"
            for module_name, module in self.named_modules()
            if isinstance(module, GatedLocalAttention)
            for param_name, _ in module.gate.named_parameters(prefix="gate")
        ]

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Load weights; a state that lacks SLA weights of this model, or holds
        SLA weights this model does not have, is refused whatever `strict`
        says, so that no loading path (spacy-transformers falls back to
        strict=False) silently drops or ignores the gates."""
        result = super().load_state_dict(state_dict, strict=False, assign=assign)
        sla_names = set(self.sla_parameter_names())
        missing = [k for k in result.missing_keys if k in sla_names]
        unexpected = [k for k in result.unexpected_keys if _is_gate_key(k)]
        if missing or unexpected:
            raise ValueError(
                Errors.E006.format(
                    missing=", ".join(missing) or "none", unexpected=", ".join(unexpected) or "none"
                )
            )
        if strict and (result.missing_keys or result.unexpected_keys):
            raise RuntimeError(
                f"Error(s) in loading state_dict for {type(self).__name__}: "
                f"missing keys {result.missing_keys}, unexpected keys {result.unexpected_keys}"
            )
        return result

    def sla_modules(self) -> List[GatedLocalAttention]:
        return [m for m in self.modules() if isinstance(m, GatedLocalAttention)]

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: Optional[torch.Tensor] = None,
        local_mask: Optional[torch.Tensor] = None,
        output_attentions: bool = False,
    ):
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None:
            inputs["token_type_ids"] = token_type_ids
        if output_attentions:
            inputs["output_attentions"] = True
        self.slot.fill(attention_mask, local_mask)
        try:
            return self.transformer(**inputs)
        finally:
            # The masks belong to this batch only.
            self.slot.clear()
