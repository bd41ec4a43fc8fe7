"""A Hugging Face encoder with syntax-aware attention: SLA in some or all of
its layers, optionally a supervised parent-attention head (LISA) and a
syntax-guided layer on top (SG-Net)."""
import threading
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Type, Union

import torch
from torch import nn
from transformers import AutoModel, PretrainedConfig, PreTrainedModel

from ..data_classes import ParentAttention
from ..errors import Errors
from .ancestor_mask import AncestorMaskLayer
from .attention_batch import AttentionBatch
from .family_adapters import FamilyAdapter, attention_family, unsupported_positions_reason
from .prediction_schedule import MATERIALISE_UP_TO, width_order
from .syntax_aware_attention import GatedAttention, SyntaxAwareAttention, gated_attention

LocalBiasFactory = Callable[[PretrainedConfig], nn.Module]


def resolve_layers(sla_layers: Optional[Sequence[int]], n_layers: int) -> List[int]:
    """Sorted, non-negative layer indices; None means every layer."""
    if sla_layers is None:
        return list(range(n_layers))
    valid = all(not isinstance(index, bool) and isinstance(index, int) and -n_layers <= index < n_layers
                for index in sla_layers)
    resolved = [index % n_layers for index in sla_layers] if valid else []
    if not valid or len(set(resolved)) != len(resolved):
        raise ValueError(Errors.E003.format(sla_layers=list(sla_layers), n_layers=n_layers))
    return sorted(resolved)


def is_added_key(key: str) -> bool:
    return ".gate." in key or ".local_bias." in key or key.startswith("guided_layer.")


def _resolve_parent_attention(
    parent_attention: Optional[ParentAttention], n_layers: int, n_heads: int
) -> Optional[ParentAttention]:
    if parent_attention is None:
        return None
    layer = n_layers // 2 if parent_attention.layer is None else parent_attention.layer
    if not -n_layers <= layer < n_layers or not 0 <= parent_attention.head < n_heads:
        raise ValueError(
            Errors.E012.format(layer=parent_attention.layer, head=parent_attention.head, n_layers=n_layers, n_heads=n_heads)
        )
    return ParentAttention(layer=layer % n_layers, head=parent_attention.head, weight=parent_attention.weight)


def _check_wrappable(original: nn.Module, family: Type[FamilyAdapter], config: PretrainedConfig) -> None:
    reason = None
    position_embedding_type = getattr(original, "position_embedding_type", "absolute")
    if getattr(config, "is_decoder", False):
        reason = "it is configured as a decoder"
    elif position_embedding_type not in family.position_embedding_types:
        reason = unsupported_positions_reason(config.model_type, position_embedding_type)
    elif getattr(original, "pruned_heads", None):
        reason = "some of its heads are pruned"
    if reason is not None:
        raise ValueError(Errors.E009.format(name=config.name_or_path, reason=reason))


class SyntaxAwareTransformer(nn.Module):
    """Wraps a Hugging Face encoder (kept as `.transformer`, so its state dict
    keys keep their names under a "transformer." prefix).

    sla_layers: the layers whose self-attention gets a gated local branch
        (None: all of them; []: none).
    local_bias: for distance inputs, makes each SLA layer's local module
        from the transformer's config (a distance builder's
        make_layer_bias); None for boolean local masks.
    ancestor_mask_layer: add SG-Net's syntax-guided layer on top of the encoder.
    parent_attention: supervise one head of one layer with the parents (LISA).
    gated_attention: how the wrapped layers compute and mix their two
        branches (SyntaxAwareAttention); production's unless a benchmark or
        a test compares another formulation.

    forward takes the usual encoder inputs plus the batch's syntax inputs
    (see SyntaxInputs.to_torch); a missing input means global attention.
    During training with parent targets, the weighted parent-attention loss
    is attached to the output as `parent_attention_loss`; with record_gates, the
    gate values as `gates` (attributes, not output keys, so that
    spacy-transformers does not treat them as tensor outputs). Everything a
    forward pass reads or reports belongs to that call (its AttentionBatch),
    which the wrapped layers get for the duration of the encoder's call
    (`attending`): threads that share one model take turns in the encoder
    (a lock of the model; torch parallelises within each call), and never
    see each other's batches.
    """

    def __init__(
        self,
        transformer: PreTrainedModel,
        sla_layers: Optional[Sequence[int]] = None,
        local_bias: Optional[LocalBiasFactory] = None,
        ancestor_mask_layer: bool = False,
        parent_attention: Optional[ParentAttention] = None,
        gated_attention: GatedAttention = gated_attention,
    ):
        super().__init__()
        config = transformer.config
        family = attention_family(config)
        layers = family.layers(transformer)
        self.transformer = transformer
        self.sla_layers = resolve_layers(sla_layers, len(layers))
        self.parent_attention = _resolve_parent_attention(parent_attention, len(layers), config.num_attention_heads)
        parent_attention_layer = None if self.parent_attention is None else self.parent_attention.layer
        parent_attention_head = None if self.parent_attention is None else self.parent_attention.head
        # an adapter class, built from the module it replaces (FamilyAdapter)
        make_adapter: Callable[..., FamilyAdapter] = family
        for index in sorted(set(self.sla_layers) | ({parent_attention_layer} if parent_attention_layer is not None else set())):
            holder = family.holder(layers[index])
            original = getattr(holder, family.attribute)
            _check_wrappable(original, family, config)
            local = index in self.sla_layers
            replacement = make_adapter(
                original,
                config,
                local=local,
                local_bias=local_bias(config) if local and local_bias is not None else None,
                parent_attention_head=parent_attention_head if index == parent_attention_layer else None,
                gated_attention=gated_attention,
            )
            setattr(holder, family.attribute, replacement)
        self.guided_layer = AncestorMaskLayer(config) if ancestor_mask_layer else None
        # found once, not at every forward pass (a copy's points at its own modules)
        self._wrapped = tuple(module for module in transformer.modules() if isinstance(module, SyntaxAwareAttention))
        self._lock = threading.RLock()

    def __getstate__(self) -> Dict[str, Any]:
        """nn.Module's state without the lock (which neither copies nor
        pickles); a copy gets its own."""
        state: Dict[str, Any] = nn.Module.__getstate__(self)
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        nn.Module.__setstate__(self, state)
        self._lock = threading.RLock()

    def wrapped_modules(self) -> List[SyntaxAwareAttention]:
        """The encoder's wrapped attention modules, gated or supervised."""
        return list(self._wrapped)

    @contextmanager
    def attending(self, batch: AttentionBatch) -> Iterator[AttentionBatch]:
        """Bind `batch` to the wrapped attention modules for the duration of
        the block, under the model's lock: another thread's forward pass
        waits for the block's end, and a forward pass nested in the block
        (the same thread) binds its own batch and gives the outer one back
        afterwards."""
        with self._lock:
            modules = self._wrapped
            previous = [module.bound_batch for module in modules]
            for module in modules:
                module.bound_batch = batch
            try:
                yield batch
            finally:
                for module, bound in zip(modules, previous):
                    module.bound_batch = bound

    @classmethod
    def from_config(cls, config: PretrainedConfig, **options: Any) -> "SyntaxAwareTransformer":
        """An untrained model of the given architecture (weights are loaded
        afterwards, e.g. from a saved pipeline)."""
        return cls(AutoModel.from_config(config), **options)

    @property
    def config(self) -> PretrainedConfig:
        return self.transformer.config

    @property
    def device(self) -> torch.device:
        return self.transformer.device

    def sla_parameter_names(self) -> List[str]:
        """The parameters the wrapping added to the encoder (gates, local
        biases, the syntax-guided layer)."""
        return [name for name, _ in self.named_parameters() if is_added_key(name)]

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False) -> Any:
        """Load weights; a state that lacks SLA weights of this model, or holds
        SLA weights this model does not have, is refused whatever `strict`
        says, so that no loading path (spacy-transformers falls back to
        strict=False) silently drops or ignores the gates."""
        result = super().load_state_dict(state_dict, strict=False, assign=assign)
        sla_names = set(self.sla_parameter_names())
        missing = [k for k in result.missing_keys if k in sla_names]
        unexpected = [k for k in result.unexpected_keys if is_added_key(k)]
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

    def sla_modules(self) -> List[SyntaxAwareAttention]:
        """The wrapped attention modules that have a local branch (a gate)."""
        return [m for m in self.modules() if isinstance(m, SyntaxAwareAttention) and m.gate is not None]

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: Optional[torch.Tensor] = None,
        local_mask: Optional[torch.Tensor] = None,
        local_buckets: Optional[torch.Tensor] = None,
        guide_mask: Optional[torch.Tensor] = None,
        parent_attention_targets: Optional[torch.Tensor] = None,
        output_attentions: bool = False,
        record_gates: bool = False,
        local_restricted: Optional[torch.Tensor] = None,
    ) -> Any:
        """The encoder's output (a ModelOutput of its family), with `gates`
        when recorded and `parent_attention_loss` with a supervised head."""
        order = self._prediction_order(attention_mask, local_mask, local_restricted, output_attentions)
        if order is not None:
            # Prediction on the CPU reads each group of similar length as
            # a block of the batch (prediction_schedule.width_order); the outputs go
            # back to the callers' order below.
            input_ids, attention_mask = _reordered(input_ids, order), _reordered(attention_mask, order)
            token_type_ids, local_mask, local_buckets, guide_mask, parent_attention_targets, local_restricted = (
                None if tensor is None else _reordered(tensor, order)
                for tensor in (token_type_ids, local_mask, local_buckets, guide_mask, parent_attention_targets, local_restricted)
            )
        inputs: Dict[str, Union[torch.Tensor, bool]] = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None:
            inputs["token_type_ids"] = token_type_ids
        if output_attentions:
            inputs["output_attentions"] = True
        batch = AttentionBatch.from_inputs(
            attention_mask, local_mask, local_buckets, parent_attention_targets, record_gates, local_restricted
        )
        with self.attending(batch):
            output = self.transformer(**inputs)
        if self.guided_layer is not None:
            output.last_hidden_state = self.guided_layer(
                output.last_hidden_state, _guided_visibility(attention_mask, guide_mask)
            )
        restore = None if order is None else torch.argsort(order)
        if restore is not None:
            _restore_order(output, restore)
        if batch.gates:
            gates = self._gates_per_module(batch)  # (n_sla_layers, batch, n_pieces)
            output.gates = gates if restore is None else gates.index_select(1, restore.to(gates.device))
        if batch.parent_attention_losses and self.parent_attention is not None:
            output.parent_attention_loss = self.parent_attention.weight * torch.stack(batch.parent_attention_losses).sum()
        return output

    def _gates_per_module(self, batch: AttentionBatch) -> torch.Tensor:
        """The recorded gates, one row per gated module in layer order; a
        module that runs at several depths (ALBERT's shared layer) gets the
        mean of its depths' gates, so that the rows stay those of
        `sla_layers`."""
        if len(batch.gates) == len(self.sla_layers):
            return torch.stack(batch.gates)
        rows = []
        for module in self.sla_modules():
            calls = [gates for gates, caller in zip(batch.gates, batch.gate_modules) if caller is module]
            rows.append(torch.stack(calls).mean(0))
        return torch.stack(rows)

    def _prediction_order(
        self,
        attention_mask: torch.Tensor,
        local_mask: Optional[torch.Tensor],
        local_restricted: Optional[torch.Tensor],
        output_attentions: bool,
    ) -> Optional[torch.Tensor]:
        """The order in which prediction runs the batch (width_order), or
        None to keep the callers' order: in training, on a GPU, without a
        boolean mask and its flags, with output_attentions, or for inputs
        short enough to mix the probability matrices (their path has no
        groups)."""
        if (
            attention_mask.shape[1] <= MATERIALISE_UP_TO
            or local_mask is None
            or local_restricted is None
            or attention_mask.device.type != "cpu"
            or self.training
            or torch.is_grad_enabled()
            or output_attentions
        ):
            return None
        return width_order(attention_mask, local_restricted)


def _reordered(tensor: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    return tensor.index_select(0, order.to(tensor.device))


def _restore_order(output: Dict[str, Any], restore: torch.Tensor) -> None:
    """Every per-sequence tensor of an encoder output (a ModelOutput: the
    hidden states, pooled output, attentions) back in the callers' order."""
    n_sequences = len(restore)

    def restored(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] == n_sequences:
            return value.index_select(0, restore.to(value.device))
        if isinstance(value, tuple):
            return tuple(restored(item) for item in value)
        return value

    for key in list(output.keys()):
        output[key] = restored(output[key])


def _guided_visibility(attention_mask: torch.Tensor, guide_mask: Optional[torch.Tensor]) -> torch.Tensor:
    """(batch, 1, n, n): the guide mask (everything when there is none), with
    padding keys hidden and padding queries attending like global ones."""
    real = attention_mask.bool()
    keys = real[:, None, None, :]
    if guide_mask is None:
        return keys.expand(-1, -1, real.shape[1], -1)
    return (guide_mask | ~real[:, :, None])[:, None] & keys
