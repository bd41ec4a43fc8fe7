"""The attention that replaces a layer's self-attention (through the model
family's adapter, layers/family_adapters.py).

A wrapped layer keeps its query, key and value projections. With a local
branch, it attends twice with the same scores: globally (padding hidden) and
locally (padding hidden, plus the local mask, a learned bias from tree
distances, or scores rescaled by tree distance), each with its own attention
dropout, and mixes the two per token (or per token and head) with a learned
gate,

    g_t = sigmoid(w_g . h_t + b_g),   out_t = g_t * local_t + (1 - g_t) * global_t,

before the layer's usual output projection. A layer may also supervise one
head's attention with the tokens' syntactic heads (LISA): the cross-entropy
of that head's attention distribution against the parent pieces is added to
the batch's auxiliary losses.

In prediction (no dropout, no gradients), a sequence whose boolean local mask
hides no key gets exactly the global context from its local branch, for any
gate. Which sequences need a local branch is decided once per forward pass
(layers/width_groups.py); each layer computes it for those only (gathered,
one fused call, scattered back, or in groups of similar width), or for none.
Which of these paths a call takes follows the batch's AttentionPaths.

A family whose scores carry a position term (BERT's relative_key, MPNet's
relative bias, DeBERTa's disentangled terms) passes it as `score_bias`,
added to the scaled dot products before any mask: both branches, and the
supervised head, see the model's own scores, and the local mask (or bias)
is added to the biased scores.
"""
import math
from typing import Optional, Tuple

import torch
from torch import nn
from torch.nn import functional as F

from .attention_batch import AttentionBatch, LocalInput, active_batch, hidden_offset
from .attention_paths import AttentionPaths
from .parent_attention import parent_attention_loss
from .two_branch import TwoBranchAttention


def _first_not_none(first: Optional[torch.Tensor], second: torch.Tensor) -> torch.Tensor:
    return second if first is None else first


def _needs_grad(*tensors: torch.Tensor) -> bool:
    return any(tensor.requires_grad for tensor in tensors)


def _global_attn_mask(batch: AttentionBatch, dtype: torch.dtype, score_bias: Optional[torch.Tensor]) -> torch.Tensor:
    """The global branch's SDPA mask: the padding mask, or with a position
    term, the term with padding keys hidden (hidden_offset)."""
    if score_bias is None:
        return batch.global_mask
    return score_bias.to(dtype).masked_fill(~batch.global_mask, hidden_offset(dtype))


class SyntaxAwareAttention(nn.Module):
    """The attention shared by all model families: takes the projected,
    head-split queries, keys and values and returns the context.

    local: whether the layer has a local branch (and a gate).
    local_bias: for distance inputs, the module turning buckets (and the
        layer input) into an additive bias or a transform of the scores
        (made by the distance builder, spacy_sla/variants/); None for
        boolean masks. Its `n_gates`, if set, is the number of gates (one
        per head) instead of one.
    supervised_head: the head trained to attend to syntactic parents, or None.

    The path of each call follows the active batch's AttentionPaths.
    """

    def __init__(
        self,
        hidden_size: int,
        n_heads: int,
        dropout_prob: float,
        initializer_range: float = 0.02,
        local: bool = True,
        local_bias: Optional[nn.Module] = None,
        supervised_head: Optional[int] = None,
    ):
        super().__init__()
        self.n_heads = n_heads
        self.head_size = hidden_size // n_heads
        self.dropout_prob = dropout_prob
        self.supervised_head = supervised_head
        self.local_bias = local_bias
        self.gate = nn.Linear(hidden_size, getattr(local_bias, "n_gates", 1)) if local else None
        if self.gate is not None:
            nn.init.normal_(self.gate.weight, std=initializer_range)
            nn.init.zeros_(self.gate.bias)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.n_heads, self.head_size).transpose(1, 2)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, _, length, _ = x.shape
        return x.transpose(1, 2).reshape(batch, length, self.n_heads * self.head_size)

    def gate_values(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(batch, n_pieces, n_gates): the weight of the local branch per
        token (and per head, with one gate per head)."""
        return torch.sigmoid(self.gate(hidden_states))

    def local_attention_mask(
        self, batch: AttentionBatch, dtype: torch.dtype, hidden_states: torch.Tensor
    ) -> Optional[LocalInput]:
        """The local branch's mask for SDPA (bool, or an additive float bias),
        a transform of the scores (which needs the materialised path), or
        None when this batch has no local input."""
        if self.gate is None:
            return None
        if self.local_bias is not None:
            if batch.local_buckets is None:
                return None
            bias = self.local_bias(batch.local_buckets, hidden_states)
            if not isinstance(bias, torch.Tensor):
                return bias
            return bias.to(dtype).masked_fill(~batch.global_mask, hidden_offset(dtype))
        return batch.local_mask

    def attend(
        self,
        hidden_states: torch.Tensor,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        output_attentions: bool = False,
        score_bias: Optional[torch.Tensor] = None,
    ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """query, key, value: (batch, heads, n_pieces, head_size); score_bias:
        the model's position term of the scores, broadcastable to (batch,
        heads, n_pieces, n_pieces), added to q.k / sqrt(head_size) in both
        branches, or None. Returns the merged context (batch, n_pieces,
        hidden) and, with output_attentions, the mixed attention
        probabilities (batch, heads, n_pieces, n_pieces)."""
        batch = active_batch()
        if self.supervised_head is not None and batch.parent_targets is not None and torch.is_grad_enabled():
            batch.auxiliary_losses.append(
                parent_attention_loss(batch, query[:, self.supervised_head], key[:, self.supervised_head],
                                      self.supervised_head, score_bias))
        local_mask = self.local_attention_mask(batch, query.dtype, hidden_states)
        dropout = self.dropout_prob if self.training else 0.0
        transforms_scores = local_mask is not None and not isinstance(local_mask, torch.Tensor)
        paths = batch.paths
        if output_attentions or not paths.fused_attention or transforms_scores:
            context, probs = self._attend_with_probabilities(
                batch, hidden_states, query, key, value, local_mask, dropout, score_bias
            )
            return context, probs if output_attentions else None
        if local_mask is None:
            global_context = F.scaled_dot_product_attention(
                query, key, value, attn_mask=_global_attn_mask(batch, query.dtype, score_bias), dropout_p=dropout
            )
            self._record_unused_gate(batch, hidden_states)
            return self.merge_heads(global_context), None
        gate = self._gate(batch, hidden_states)
        if (
            paths.memory_saving_training
            and torch.is_grad_enabled()
            and _needs_grad(query, key, value, gate, local_mask, *(() if score_bias is None else (score_bias,)))
        ):
            # Training: one score matrix, and only the scores and the
            # boolean keep masks kept for backward.
            if local_mask.dtype == torch.bool:
                local, empty_rows = batch.logit_offsets(torch.float32, local=True), batch.empty_local_rows()
            else:
                local, empty_rows = local_mask, None
            global_offsets = batch.logit_offsets(query.dtype)
            if score_bias is not None:
                global_offsets = score_bias.to(query.dtype) + global_offsets
            context = TwoBranchAttention.apply(query, key, value, gate, global_offsets, local, empty_rows, dropout)
            return self.merge_heads(context), None
        if score_bias is not None:
            return self.merge_heads(self._predict_biased(batch, query, key, value, local_mask, gate, score_bias, dropout)), None
        may_skip = self._may_skip(paths, local_mask, dropout, query, key, value, gate)
        rows = batch.local_rows if may_skip else None
        if self._materialises(paths, query, dropout) and (rows is None or rows.numel() > 0):
            return self.merge_heads(self._predict_materialised(batch, query, key, value, local_mask, gate)), None
        # Prediction: two fused kernels (on a GPU, and on the CPU for spans
        # longer than materialise_up_to, faster than the mixed probabilities
        # or one call over stacked heads; docs/performance.md).
        global_context = F.scaled_dot_product_attention(
            query, key, value, attn_mask=batch.global_mask, dropout_p=dropout
        )
        if may_skip and batch.width_groups is not None:
            mixed = self._mix_by_width(batch, query, key, value, global_context, gate)
        elif rows is None:
            if local_mask.dtype == torch.bool:
                local_mask = _first_not_none(batch.additive_local_mask(query.dtype), local_mask)
            local_context = F.scaled_dot_product_attention(
                query, key, value, attn_mask=local_mask, dropout_p=dropout
            )
            # g * local + (1 - g) * global in one fused op, before merging heads
            mixed = torch.lerp(global_context, local_context, gate.to(global_context.dtype))
        elif rows.numel() == 0:
            # No sequence's mask hides a key: local = global, whatever the gate.
            mixed = global_context
        else:
            additive = batch.additive_local_mask(query.dtype, gathered=True)
            local_mask = local_mask.index_select(0, rows) if additive is None else additive
            local_context = F.scaled_dot_product_attention(
                query.index_select(0, rows), key.index_select(0, rows), value.index_select(0, rows), attn_mask=local_mask
            )
            mixed_rows = torch.lerp(
                global_context.index_select(0, rows), local_context, gate.index_select(0, rows).to(global_context.dtype)
            )
            # the other sequences keep their global context, which is their mix
            mixed = global_context.index_copy_(0, rows, mixed_rows)
        return self.merge_heads(mixed), None

    def _materialises(self, paths: AttentionPaths, query: torch.Tensor, dropout: float) -> bool:
        """Whether prediction mixes the two probability matrices (one score
        matrix, two softmaxes, one product with V) instead of calling SDPA
        twice: on the CPU, in float32, without dropout, for at most
        materialise_up_to pieces, where that is faster (docs/performance.md)."""
        return (
            dropout == 0.0
            and query.device.type == "cpu"
            and query.dtype == torch.float32
            and query.shape[-2] <= paths.materialise_up_to
            and not torch.is_grad_enabled()
        )

    def _predict_biased(
        self,
        batch: AttentionBatch,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        local_mask: torch.Tensor,
        gate: torch.Tensor,
        score_bias: torch.Tensor,
        dropout: float,
    ) -> torch.Tensor:
        """Prediction with a position term in the scores: every sequence's
        local branch (a skipped or cut sequence would need its own slice of
        the term), from one score matrix where that is faster, else two SDPA
        calls whose float masks carry the term."""
        if self._materialises(batch.paths, query, dropout):
            return self._predict_materialised(batch, query, key, value, local_mask, gate, score_bias)
        global_context = F.scaled_dot_product_attention(
            query, key, value, attn_mask=_global_attn_mask(batch, query.dtype, score_bias), dropout_p=dropout
        )
        bias = score_bias.to(query.dtype)
        empty_rows = None
        if local_mask.dtype == torch.bool:
            empty_rows = batch.empty_local_rows()
            local_logits = bias.masked_fill(~local_mask, hidden_offset(query.dtype))
        else:
            local_logits = (bias + local_mask).masked_fill(~batch.global_mask, hidden_offset(query.dtype))
        local_context = F.scaled_dot_product_attention(query, key, value, attn_mask=local_logits, dropout_p=dropout)
        if empty_rows is not None:
            local_context = local_context.masked_fill(empty_rows, 0.0)  # as SDPA with a boolean mask
        return torch.lerp(global_context, local_context, gate.to(global_context.dtype))

    def _predict_materialised(
        self,
        batch: AttentionBatch,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        local_mask: torch.Tensor,
        gate: torch.Tensor,
        score_bias: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        """The mixed context of every sequence, (batch, heads, n, head_size),
        from one score matrix: the masks added as offsets, both softmaxes, the
        probabilities mixed in place (the gate is per query row) and one
        product with V."""
        scores = torch.matmul(query * (1.0 / math.sqrt(self.head_size)), key.transpose(-1, -2))
        if score_bias is not None:
            scores.add_(score_bias)
        scores.add_(batch.logit_offsets(scores.dtype))
        global_probs = torch.softmax(scores, -1)
        if local_mask.dtype == torch.bool:
            offsets, empty_rows = batch.logit_offsets(scores.dtype, local=True), batch.empty_local_rows()
        else:
            offsets, empty_rows = local_mask, None
        local_probs = torch.softmax(scores.add_(offsets), -1)
        if empty_rows is not None:
            local_probs.masked_fill_(empty_rows, 0.0)  # SDPA gives such a row zeros
        return torch.matmul(global_probs.lerp_(local_probs, gate.to(scores.dtype)), value)

    def _may_skip(self, paths: AttentionPaths, local_mask: torch.Tensor, dropout: float, *tensors: torch.Tensor) -> bool:
        """Whether this prediction call may leave out the local branch of the
        sequences whose boolean mask hides no key (batch.local_rows) and the
        padding after a sequence's last real piece (batch.width_groups). A
        sequence whose mask hides no key gets the global context from its
        local branch, for any gate, unless each branch draws its own
        dropout; with gradients (training) every branch is computed as
        defined. Bias variants are always computed."""
        return not (
            not paths.skip_fully_visible
            or self.local_bias is not None
            or local_mask.dtype != torch.bool
            or dropout > 0.0
            or (torch.is_grad_enabled() and _needs_grad(*tensors))
        )

    def _mix_by_width(
        self,
        batch: AttentionBatch,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        global_context: torch.Tensor,
        gate: torch.Tensor,
    ) -> torch.Tensor:
        """The mixed context, the local branch computed group by group
        (batch.width_groups), each group's sequences cut to its width: the
        pieces after a sequence's last real piece are padding, hidden from
        every query, and their own rows are never read, so they keep the
        global context. Sequences in no group hide no key: their mix is
        their global context."""
        for index, group in enumerate(batch.width_groups):
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

    def _gate(self, batch: AttentionBatch, hidden_states: torch.Tensor) -> torch.Tensor:
        """(batch, n_gates, n_pieces, 1): the gate, broadcastable over heads."""
        gate = self.gate_values(hidden_states)
        if batch.record_gates:
            # one value per token: the mean over the heads' gates
            batch.gates.append(gate.mean(-1).detach().float())
            batch.gate_modules.append(self)
        return gate.transpose(1, 2)[..., None]

    def _record_unused_gate(self, batch: AttentionBatch, hidden_states: torch.Tensor) -> None:
        if batch.record_gates and self.gate is not None:
            batch.gates.append(torch.full(hidden_states.shape[:2], float("nan"), device=hidden_states.device))
            batch.gate_modules.append(self)

    def _attend_with_probabilities(
        self,
        batch: AttentionBatch,
        hidden_states: torch.Tensor,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        local_mask: Optional[LocalInput],
        dropout: float,
        score_bias: Optional[torch.Tensor] = None,
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """The same computation with the probabilities materialised: one
        score matrix, a softmax per branch. The gate is per query row, so
        mixing the probabilities equals mixing the contexts, and one product
        with the values serves both branches."""
        scores = (query @ key.transpose(-1, -2)).mul_(1.0 / math.sqrt(self.head_size))
        if score_bias is not None:
            scores = scores + score_bias
        # A transform sees the scores before padding is masked (-inf * 0 is NaN).
        local_scores = None if local_mask is None or isinstance(local_mask, torch.Tensor) else local_mask(scores)
        scores = scores.masked_fill(~batch.global_mask, float("-inf"))  # every row has a real key
        probs = scores.softmax(-1)
        if local_mask is None:
            self._record_unused_gate(batch, hidden_states)
            probs = F.dropout(probs, dropout, self.training)
            return self.merge_heads(probs @ value), probs
        if local_scores is not None:
            local_probs = local_scores.masked_fill(~batch.global_mask, float("-inf")).softmax(-1)
        elif local_mask.dtype == torch.bool:
            # Normalised by the largest visible score, not the row's: when
            # every visible score lies far below the row maximum (~87 in
            # fp32, ~17 in fp16), exponents shifted by the row maximum all
            # underflow to zero. The builders' masks show each piece itself
            # (padding rows see every real key); a row that sees no key gets
            # zeros, as on the other paths, where softmax gives NaN.
            local_probs = scores.masked_fill(~local_mask, float("-inf")).softmax(-1)
            empty_rows = batch.empty_local_rows()
            if empty_rows is not None:
                local_probs = local_probs.masked_fill(empty_rows, 0.0)
        else:
            local_probs = (scores + local_mask).softmax(-1)
        gate = self._gate(batch, hidden_states).to(probs.dtype)
        probs = torch.lerp(
            F.dropout(probs, dropout, self.training), F.dropout(local_probs, dropout, self.training), gate
        )
        return self.merge_heads(probs @ value), probs
