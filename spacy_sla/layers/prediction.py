"""The prediction of a gated syntax-aware layer (no dropout, no gradients):
the same two branches as in training, computed the fastest measured way
for the input (prediction_schedule.py holds the choices' constants).

- Up to MATERIALISE_UP_TO pieces on the CPU in float32: one score matrix,
  both softmaxes, the probability rows mixed by the gate and one product
  with V (mix_probabilities).
- Otherwise two fused SDPA calls (mix_by_sdpa), where, with a boolean
  mask, a sequence whose mask hides no key gets exactly the global context
  from its local branch, for any gate: the local branch runs for the
  restricted sequences only (batch.local_rows: gathered, one call,
  scattered back; or none), on the CPU in groups of similar width, each cut
  to its width (batch.width_groups).
- With a position term of the scores (score-bias families), every
  sequence's local branch, a skipped or cut sequence needing its own slice
  of the term (predict_with_position_term).
"""
import math
from typing import Optional

import torch
from torch.nn import functional as F

from .attention_batch import AttentionBatch, hidden_offset
from .prediction_schedule import materialises


def predict_two_branches(
    batch: AttentionBatch,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    gate: torch.Tensor,
    local: torch.Tensor,
    score_bias: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """The mixed context, (batch, heads, n, head_size), of prediction.
    query, key, value: (batch, heads, n, head_size); gate: (batch, n_gates,
    n, 1); local: the batch's boolean local mask or an additive bias
    (padding keys hidden); score_bias: the model's position term of the
    scores, or None."""
    if score_bias is not None:
        return predict_with_position_term(batch, query, key, value, gate, local, score_bias)
    if materialises(query) and not hides_nothing(batch, local):
        return mix_probabilities(batch, query, key, value, gate, local)
    return mix_by_sdpa(batch, query, key, value, gate, local)


def hides_nothing(batch: AttentionBatch, local: torch.Tensor) -> bool:
    """Whether the boolean local mask hides no key of any sequence: every
    local branch is the global one."""
    return local.dtype == torch.bool and batch.local_rows is not None and batch.local_rows.numel() == 0


def mix_probabilities(
    batch: AttentionBatch,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    gate: torch.Tensor,
    local: torch.Tensor,
    score_bias: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """The mixed context of every sequence from one score matrix: the masks
    added as offsets, both softmaxes, the probabilities mixed in place (the
    gate is per query row) and one product with V."""
    scores = torch.matmul(query * (1.0 / math.sqrt(query.shape[-1])), key.transpose(-1, -2))
    if score_bias is not None:
        scores.add_(score_bias)
    scores.add_(batch.logit_offsets(scores.dtype))
    global_probs = torch.softmax(scores, -1)
    if local.dtype == torch.bool:
        offsets, empty_rows = batch.logit_offsets(scores.dtype, local=True), batch.empty_local_rows()
    else:
        offsets, empty_rows = local, None
    local_probs = torch.softmax(scores.add_(offsets), -1)
    if empty_rows is not None:
        local_probs.masked_fill_(empty_rows, 0.0)  # SDPA gives such a row zeros
    return torch.matmul(global_probs.lerp_(local_probs, gate.to(scores.dtype)), value)


def mix_by_sdpa(
    batch: AttentionBatch,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    gate: torch.Tensor,
    local: torch.Tensor,
) -> torch.Tensor:
    """The mixed context from two fused SDPA calls (on a GPU, and on the CPU
    beyond MATERIALISE_UP_TO pieces, faster than the mixed probabilities or
    one call over stacked heads; docs/performance.md); with a boolean mask,
    the local branch of the restricted sequences only."""
    global_context = F.scaled_dot_product_attention(query, key, value, attn_mask=batch.global_mask)
    if local.dtype != torch.bool:
        local_context = F.scaled_dot_product_attention(query, key, value, attn_mask=local)
        return torch.lerp(global_context, local_context, gate.to(global_context.dtype))
    if batch.width_groups is not None:
        return mix_by_width(batch, query, key, value, global_context, gate)
    rows = batch.local_rows
    if rows is None:
        additive = batch.additive_local_mask(query.dtype)
        local_context = F.scaled_dot_product_attention(
            query, key, value, attn_mask=local if additive is None else additive
        )
        # g * local + (1 - g) * global in one fused op, before merging heads
        return torch.lerp(global_context, local_context, gate.to(global_context.dtype))
    if rows.numel() == 0:
        return global_context  # local = global, whatever the gate
    additive = batch.additive_local_mask(query.dtype, gathered=True)
    local_context = F.scaled_dot_product_attention(
        query.index_select(0, rows), key.index_select(0, rows), value.index_select(0, rows),
        attn_mask=local.index_select(0, rows) if additive is None else additive,
    )
    mixed_rows = torch.lerp(
        global_context.index_select(0, rows), local_context, gate.index_select(0, rows).to(global_context.dtype)
    )
    # the other sequences keep their global context, which is their mix
    return global_context.index_copy_(0, rows, mixed_rows)


def mix_by_width(
    batch: AttentionBatch,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    global_context: torch.Tensor,
    gate: torch.Tensor,
) -> torch.Tensor:
    """The mixed context, the local branch computed group by group
    (batch.width_groups), each group's sequences cut to its width: the
    pieces after a sequence's last real piece are padding, hidden from every
    query, and their own rows are never read, so they keep the global
    context. Sequences in no group hide no key: their mix is their global
    context."""
    for index, group in enumerate(batch.groups()):
        local_context = F.scaled_dot_product_attention(
            group.take(query), group.take(key), group.take(value), attn_mask=batch.group_local_mask(query.dtype, index)
        )
        gate_rows = group.take(gate).to(global_context.dtype)
        if group.block is not None:
            group.take(global_context).lerp_(local_context, gate_rows)  # a view: mixed in place
        else:
            mixed_rows = torch.lerp(group.take(global_context), local_context, gate_rows)
            global_context[group.rows, :, : group.width] = mixed_rows
    return global_context


def predict_with_position_term(
    batch: AttentionBatch,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    gate: torch.Tensor,
    local: torch.Tensor,
    score_bias: torch.Tensor,
) -> torch.Tensor:
    """Prediction with a position term in the scores: every sequence's
    local branch, from one score matrix where that is faster, else two SDPA
    calls whose float masks carry the term."""
    if materialises(query):
        return mix_probabilities(batch, query, key, value, gate, local, score_bias)
    global_context = F.scaled_dot_product_attention(
        query, key, value, attn_mask=batch.global_attn_mask(query.dtype, score_bias)
    )
    bias = score_bias.to(query.dtype)
    empty_rows = None
    if local.dtype == torch.bool:
        empty_rows = batch.empty_local_rows()
        local_logits = bias.masked_fill(~local, hidden_offset(query.dtype))
    else:
        local_logits = (bias + local).masked_fill(~batch.global_mask, hidden_offset(query.dtype))
    local_context = F.scaled_dot_product_attention(query, key, value, attn_mask=local_logits)
    if empty_rows is not None:
        local_context = local_context.masked_fill(empty_rows, 0.0)  # as SDPA with a boolean mask
    return torch.lerp(global_context, local_context, gate.to(global_context.dtype))
