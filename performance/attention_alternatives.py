"""The formulations of SLA's gated layers that production does not use, for
the performance measurements to time beside it (docs/performance.md): each is a
GatedAttention function (spacy_sla.layers.gated_attention's signature),
given to a SyntaxAwareTransformer at construction, or to a pipeline's SLA
transformer before it is initialised (`computing_by`, also as the
`[initialize.before_init]` callback `sla-performance.computing_by.v1` of a
config), never switched on a built model.

- two-sdpa-calls: every sequence's two branches by two fused SDPA calls, in
  training too (each branch F.dropout's own draw): the formulation before
  TwoBranchAttention, the skip of fully visible sequences, the groups by
  width and the mixed probabilities of short inputs;
- two-sdpa-training: two-sdpa-calls in training, production in prediction
  (what TwoBranchAttention saves);
- sdpa-prediction: production, except that prediction calls SDPA at every
  width (no mixed probability matrices below MATERIALISE_UP_TO);
- gather-all: sdpa-prediction, gathering the restricted sequences whatever
  their share of the batch (GATHER_MAX_SHARE = 1) and never grouping them
  by width.

`span_by_span_syntax_mask.v1` is the syntax mask whose masks are built span
by span by the builder's own call, instead of sliced from the masks of
whole Docs built together.
"""
from functools import partial
from typing import Callable, Dict, Optional

import torch
from spacy.language import Language
from spacy.util import registry
from spacy_transformers.data_classes import HFObjects
from spacy_transformers.layers.transformer_model import set_pytorch_transformer
from torch.nn import functional as F

from spacy_sla import SyntaxMask
from spacy_sla.layers import (
    AttentionBatch,
    GatedAttention,
    SLATransformerModel,
    SyntaxAwareTransformer,
    gated_attention,
)
from spacy_sla.layers.attention_batch import hidden_offset
from spacy_sla.layers.prediction import mix_by_sdpa


def two_sdpa_calls(
    batch: AttentionBatch,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    gate: torch.Tensor,
    local: torch.Tensor,
    score_bias: Optional[torch.Tensor],
    dropout: float,
) -> torch.Tensor:
    """Both branches of every sequence by one SDPA call each, mixed by the
    gate; with a boolean mask, its additive form made once per forward pass
    (as production makes it)."""
    global_context = F.scaled_dot_product_attention(
        query, key, value, attn_mask=batch.global_attn_mask(query.dtype, score_bias), dropout_p=dropout
    )
    empty_rows = None
    if score_bias is not None:
        bias = score_bias.to(query.dtype)
        if local.dtype == torch.bool:
            empty_rows = batch.empty_local_rows()
            local = bias.masked_fill(~local, hidden_offset(query.dtype))
        else:
            local = (bias + local).masked_fill(~batch.global_mask, hidden_offset(query.dtype))
    elif local.dtype == torch.bool:
        additive = batch.additive_local_mask(query.dtype)
        local = local if additive is None else additive
    local_context = F.scaled_dot_product_attention(query, key, value, attn_mask=local, dropout_p=dropout)
    if empty_rows is not None:
        local_context = local_context.masked_fill(empty_rows, 0.0)  # as SDPA with a boolean mask
    return torch.lerp(global_context, local_context, gate.to(global_context.dtype))


def _training(dropout: float, *tensors: Optional[torch.Tensor]) -> bool:
    return dropout > 0.0 or (torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors))


def two_sdpa_training(
    batch: AttentionBatch,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    gate: torch.Tensor,
    local: torch.Tensor,
    score_bias: Optional[torch.Tensor],
    dropout: float,
) -> torch.Tensor:
    """two_sdpa_calls in training, production's prediction."""
    if _training(dropout, query, key, value, gate, local, score_bias):
        return two_sdpa_calls(batch, query, key, value, gate, local, score_bias, dropout)
    return gated_attention(batch, query, key, value, gate, local, score_bias, dropout)


def sdpa_prediction(
    batch: AttentionBatch,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    gate: torch.Tensor,
    local: torch.Tensor,
    score_bias: Optional[torch.Tensor],
    dropout: float,
) -> torch.Tensor:
    """Production's training; prediction by SDPA at every width."""
    if _training(dropout, query, key, value, gate, local, score_bias):
        return gated_attention(batch, query, key, value, gate, local, score_bias, dropout)
    if score_bias is not None:
        return two_sdpa_calls(batch, query, key, value, gate, local, score_bias, 0.0)
    return mix_by_sdpa(batch, query, key, value, gate, local)


class _GatheredMask:
    """The additive local mask of a batch's restricted sequences, made once
    per forward pass (the batch), as production makes its own."""

    def __init__(self):
        self.batch: Optional[AttentionBatch] = None
        self.rows: Optional[torch.Tensor] = None
        self.mask: Optional[torch.Tensor] = None

    def of(self, batch: AttentionBatch, dtype: torch.dtype):
        if self.batch is not batch:
            self.batch = batch
            self.rows = batch.restricted.nonzero().flatten().to(batch.local_mask.device)
            visible = batch.local_mask.index_select(0, self.rows)
            self.mask = visible if batch.empty_local_rows() is not None else torch.zeros(
                visible.shape, dtype=dtype, device=visible.device
            ).masked_fill_(~visible, hidden_offset(dtype))
        return self.rows, self.mask


_GATHERED = _GatheredMask()


def gather_all(
    batch: AttentionBatch,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    gate: torch.Tensor,
    local: torch.Tensor,
    score_bias: Optional[torch.Tensor],
    dropout: float,
) -> torch.Tensor:
    """sdpa-prediction, gathering the restricted sequences of a boolean mask
    whatever their share (one gathered call; none when no sequence is
    restricted), without groups by width."""
    if local.dtype != torch.bool or score_bias is not None or _training(dropout, query, key, value, gate, local):
        return sdpa_prediction(batch, query, key, value, gate, local, score_bias, dropout)
    global_context = F.scaled_dot_product_attention(query, key, value, attn_mask=batch.global_mask)
    rows, mask = _GATHERED.of(batch, query.dtype)
    if rows.numel() == 0:
        return global_context
    local_context = F.scaled_dot_product_attention(
        query.index_select(0, rows), key.index_select(0, rows), value.index_select(0, rows), attn_mask=mask
    )
    mixed_rows = torch.lerp(
        global_context.index_select(0, rows), local_context, gate.index_select(0, rows).to(global_context.dtype)
    )
    return global_context.index_copy_(0, rows, mixed_rows)


ALTERNATIVES: Dict[str, GatedAttention] = {
    "production": gated_attention,
    "two-sdpa-calls": two_sdpa_calls,
    "two-sdpa-training": two_sdpa_training,
    "sdpa-prediction": sdpa_prediction,
    "gather-all": gather_all,
}


def set_transformer_computing_by(formulation: GatedAttention, model: SLATransformerModel, hf_objects: HFObjects) -> None:
    """SLATransformerModel's set_transformer (the hook spacy-transformers
    calls when initialising), wrapping the encoder with layers that compute
    by `formulation`."""
    if model.attrs["has_transformer"]:
        raise ValueError("Cannot set second transformer.")
    sla = SyntaxAwareTransformer(hf_objects.transformer, **model.settings.transformer_options(), gated_attention=formulation)
    set_pytorch_transformer(model, HFObjects(hf_objects.tokenizer, sla, hf_objects.vocab_file_contents))


def computing_by(nlp: Language, formulation: str) -> Language:
    """Before nlp.initialize: the SLA transformers of the pipeline will wrap
    their encoders with layers that compute by the named formulation
    (ALTERNATIVES); a ValueError if nlp has none, or one is initialised
    already."""
    models = []
    for _, component in nlp.components:
        if hasattr(component, "model"):
            models += [node for node in component.model.walk() if isinstance(node, SLATransformerModel)]
    if not models or any(model.attrs["has_transformer"] for model in models):
        raise ValueError(f"computing_by({formulation!r}) needs a pipeline with an SLA transformer, before its initialisation")
    for model in models:
        model.attrs["set_transformer"] = partial(set_transformer_computing_by, ALTERNATIVES[formulation])
    return nlp


@registry.callbacks("sla-performance.computing_by.v1")
def create_computing_by(formulation: str) -> Callable[[Language], Language]:
    """computing_by as a config's [initialize.before_init] callback."""
    if formulation not in ALTERNATIVES:
        raise ValueError(f"formulation {formulation!r}: one of {', '.join(ALTERNATIVES)}")
    return partial(computing_by, formulation=formulation)


class SpanBySpanSyntaxMask(SyntaxMask):
    """SyntaxMask whose masks build_syntax_inputs takes from the builder's
    call span by span: it slices the masks of whole Docs, built together,
    for a WholeDocBuilder only, and a protocol method set to None blocks the
    protocol (typing's runtime check)."""

    whole_docs = None  # type: ignore[assignment]


@registry.misc("sla-performance.span_by_span_syntax_mask.v1")
def create_span_by_span_syntax_mask(threshold: int = 3, punct_rule: str = "authors", neighbours: bool = True) -> SyntaxMask:
    return SpanBySpanSyntaxMask(threshold=threshold, punct_rule=punct_rule, neighbours=neighbours)
