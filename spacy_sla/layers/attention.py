"""Syntax-aware attention as PyTorch modules.

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

The inputs of a forward pass (and what its layers report back: gates and
auxiliary losses) live in an AttentionBatch that belongs to that call: the
wrapping SyntaxAwareTransformer makes one per forward pass and makes it the
active batch of the calling thread (a context variable) while its encoder
runs, so no layer builds or copies a mask, and threads that share one model
never see each other's batches.

In prediction (no dropout, no gradients), a sequence whose boolean local mask
hides no key gets exactly the global context from its local branch, for any
gate. Which sequences need a local branch is decided once per forward pass;
each layer computes it for those only (gathered, one fused call, scattered
back), or for none.
"""
import math
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterator, List, Optional, Tuple, Union

import torch
from torch import nn
from torch.nn import functional as F

from ..data_classes import IGNORED_TARGET
from ..errors import Errors

# A local branch's input: a bool mask or an additive bias for SDPA, or a
# transform of the scaled dot-product scores into the local logits.
LocalInput = Union[torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]

# Prediction gathers the sequences that need a local branch while they are at
# most this share of the batch; above it, the index copies of the queries,
# keys, values and outputs cost more than the rows they spare, and the
# batched call runs on every sequence (measured with MiniLM on the CPU,
# scripts/local_rows_benchmark.py, docs/performance.md).
GATHER_MAX_SHARE = 0.75


@dataclass
class AttentionBatch:
    """The syntax inputs of one forward pass, and its per-call outputs.

    global_mask: (batch, 1, 1, n_pieces) bool, the keys that are not padding.
    local_mask: (batch, 1, n_pieces, n_pieces) bool, or None.
    local_buckets: (batch, n_pieces, n_pieces) tree-distance bucket ids, or None.
    parent_targets: (batch, n_pieces) the piece each piece's token depends
        on, IGNORED_TARGET where there is none; or None.
    record_gates: whether local branches append their gate values to `gates`
        ((batch, n_pieces) per layer, NaN where the batch has no local input).
    auxiliary_losses: appended to by supervised heads during the pass.
    local_rows: with a boolean local mask, the (k,) index of the sequences
        whose mask hides some key (on the mask's device; empty when none
        does), which are the only ones whose local branch prediction
        computes; None: every sequence's (no mask, or more than
        GATHER_MAX_SHARE of the batch need one).
    """

    global_mask: torch.Tensor
    local_mask: Optional[torch.Tensor] = None
    local_buckets: Optional[torch.Tensor] = None
    parent_targets: Optional[torch.Tensor] = None
    record_gates: bool = False
    gates: List[torch.Tensor] = field(default_factory=list)
    auxiliary_losses: List[torch.Tensor] = field(default_factory=list)
    local_rows: Optional[torch.Tensor] = None
    # local_mask as an additive mask, per dtype and for all rows or those of
    # local_rows: made once per forward pass and shared by the layers (SDPA's
    # CPU kernel turns a boolean mask into an additive one on every call, at
    # every layer).
    _additive_local_masks: Dict[Tuple[torch.dtype, bool], torch.Tensor] = field(default_factory=dict, repr=False)
    _hidden_local_mask: Optional[Tuple[torch.Tensor, Optional[torch.Tensor]]] = field(default=None, repr=False)

    @classmethod
    def from_inputs(
        cls,
        attention_mask: torch.Tensor,
        local_mask: Optional[torch.Tensor] = None,
        local_buckets: Optional[torch.Tensor] = None,
        parent_targets: Optional[torch.Tensor] = None,
        record_gates: bool = False,
        local_restricted: Optional[torch.Tensor] = None,
    ) -> "AttentionBatch":
        """From the encoder's (batch, n_pieces) padding mask and the batch's
        (batch, n_pieces, n_pieces) syntax inputs. local_restricted: (batch,)
        bool, whether local_mask hides some real piece from some real piece
        of the sequence (SyntaxInputs.locally_restricted, on the CPU);
        without it, it is read from local_mask here."""
        real = attention_mask.bool()
        keys = real[:, None, None, :]
        # Padding queries attend like global ones: no softmax row is ever
        # empty, so no NaN can reach the backward pass.
        local = None if local_mask is None else (local_mask | ~real[:, :, None])[:, None] & keys
        local_rows = None if local is None else _rows_needing_local(local, keys, local_restricted)
        return cls(keys, local, local_buckets, parent_targets, record_gates, local_rows=local_rows)

    def hidden_local_mask(self) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """~local_mask, and the (batch, 1, n_pieces, 1) rows that see no key
        locally (None when there is none: the masks the builders make always
        show each piece itself). Made once per forward pass for all layers."""
        if self._hidden_local_mask is None:
            hidden = ~self.local_mask
            empty_rows = hidden.all(-1, keepdim=True)
            self._hidden_local_mask = (hidden, empty_rows if bool(empty_rows.any()) else None)
        return self._hidden_local_mask

    def additive_local_mask(self, dtype: torch.dtype, gathered: bool = False) -> Optional[torch.Tensor]:
        """local_mask as (batch, 1, n_pieces, n_pieces) of `dtype` (with
        `gathered`, of the sequences of local_rows only): 0 where visible,
        the type's minimum where hidden; None when a row sees no key (SDPA
        gives such a row zeros with a boolean mask, not with an additive
        one). As every row sees a key, a hidden key's weight is
        exp(min - visible max) = 0 exactly, as with the boolean mask."""
        if self.hidden_local_mask()[1] is not None:
            return None
        mask = self._additive_local_masks.get((dtype, gathered))
        if mask is None:
            visible = self.local_mask.index_select(0, self.local_rows) if gathered else self.local_mask
            mask = torch.zeros(visible.shape, dtype=dtype, device=visible.device)
            mask.masked_fill_(~visible, torch.finfo(dtype).min)
            self._additive_local_masks[(dtype, gathered)] = mask
        return mask


def _rows_needing_local(local: torch.Tensor, keys: torch.Tensor, restricted: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """AttentionBatch.local_rows: the index of the sequences flagged in
    `restricted` (from `local`, the batch's (batch, 1, n, n) local mask, when
    None), or None when more than GATHER_MAX_SHARE of them are."""
    if restricted is None:
        # Padding queries see every real key locally, so a sequence's local
        # mask differs from its padding mask exactly where it hides a real
        # key from a real query. One reduction per forward pass.
        restricted = (local != keys).flatten(1).any(1)
    restricted = restricted.to("cpu", torch.bool)
    n_restricted = int(restricted.sum())
    if n_restricted == len(restricted) or n_restricted > GATHER_MAX_SHARE * len(restricted):
        return None
    return restricted.nonzero().flatten().to(local.device)


# The batch of the forward pass running in this thread (context variables
# are per thread, and per asyncio task).
_ACTIVE_BATCH: ContextVar[Optional[AttentionBatch]] = ContextVar("spacy_sla_attention_batch", default=None)


@contextmanager
def attending(batch: AttentionBatch) -> Iterator[AttentionBatch]:
    """Make `batch` the one the wrapped layers read, for the duration of the
    block (in this thread only); the previous one is restored afterwards."""
    token = _ACTIVE_BATCH.set(batch)
    try:
        yield batch
    finally:
        _ACTIVE_BATCH.reset(token)


def active_batch() -> AttentionBatch:
    batch = _ACTIVE_BATCH.get()
    if batch is None:
        raise RuntimeError(
            "The SLA attention was called outside SyntaxAwareTransformer.forward, "
            "which provides its masks."
        )
    return batch



def _drop_mask(like: torch.Tensor, dropout: float) -> Optional[torch.Tensor]:
    """A boolean dropout mask, True where an element is dropped (with
    probability `dropout`, independently), or None without dropout: one byte
    per element where F.dropout's backward keeps a float mask.

    On the CPU, bernoulli_ with a scalar rate takes about twice as long as
    drawing uniform floats and comparing them with the rate, which are the
    same Bernoulli draws (docs/performance.md); these masks are the largest
    cost plain attention does not have. The floats are drawn one sequence
    at a time into one buffer, so that the draw adds no more than a
    sequence's (heads, n, n) floats to the peak memory. Elsewhere, uint8
    bernoulli_ viewed as bool."""
    if dropout <= 0.0:
        return None
    if like.device.type != "cpu" or like.dim() < 2:
        return torch.empty(like.shape, dtype=torch.uint8, device=like.device).bernoulli_(dropout).view(torch.bool)
    drop = torch.empty(like.shape, dtype=torch.bool)
    uniform = torch.empty(like.shape[1:])
    for sequence in drop:
        torch.lt(uniform.uniform_(), dropout, out=sequence)
    return drop


def _log_normaliser(logits: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
    """The rows' log-sum-exp, from the logits and their softmax: the largest
    probability is exp(max - lse). Two reductions instead of logsumexp's
    exponentials; exact up to rounding, as the largest probability is at
    least 1 / n."""
    return logits.amax(-1, keepdim=True) - probs.amax(-1, keepdim=True).log()


class TwoBranchAttention(torch.autograd.Function):
    """Both branches of a gated SLA layer for training, with a backward pass
    that keeps only what the two softmaxes need.

    Forward: one score matrix S = Q K^T / sqrt(d), padding hidden; the
    global probabilities P_g = softmax(S) and the local ones P_l =
    softmax(S_l), S_l being S with the local mask or bias; each branch its
    own dropout mask D_g, D_l (independent Bernoulli draws, keep probability
    1 - p, as two F.dropout calls); the gate g is per query row, so mixing
    the rows and multiplying by V once equals mixing the two contexts:

        out = M V / (1 - p),   M = (1 - g) D_g P_g + g D_l P_l.

    Saved for backward: Q, K, V, g, the local input (the batch's boolean mask
    of hidden pairs, shared by the heads, or the additive bias), S, each
    branch's rows' log-sum-exp and the dropout masks as booleans: per element
    of B x H x L x L, 4 bytes for S and 2 for the masks (in float32), where
    two SDPA calls keep 16 bytes (two float tensors per branch) and plain
    attention 8. Backward recomputes P = exp(S - lse) for both branches and
    M (elementwise); the dropout masks are kept, not redrawn, because drawing
    them is the costly part on the CPU.

    Backward (dO the gradient of out, r = 1 / (1 - p)):
        dV = r M^T dO,  dM = r dO V^T,
        dP_g = (1 - g) D_g dM,  dP_l = g D_l dM,
        dS = softmax_backward(dP_g, P_g) + softmax_backward(dP_l, P_l),
        dQ = dS K / sqrt(d),  dK = dS^T Q / sqrt(d),
        dg = sum_keys(dM (D_l P_l - D_g P_g)),  d(bias) = softmax_backward(dP_l, P_l).
    The factor r is applied to the small tensors (dV, dQ, dK, dg), not the
    B x H x L x L ones.
    """

    @staticmethod
    def forward(
        ctx,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        gate: torch.Tensor,
        global_hidden: torch.Tensor,
        local: torch.Tensor,
        empty_local_rows: Optional[torch.Tensor],
        dropout: float,
    ) -> torch.Tensor:
        """query, key, value: (batch, heads, n, head_size); gate: (batch,
        n_gates, n, 1) with n_gates 1 or heads; global_hidden: (batch, 1, 1,
        n) bool, True for padding keys; local: (batch, 1, n, n) bool, True
        where the local branch hides a key (padding included), or an additive
        bias broadcastable to (batch, heads, n, n) (padding keys at the
        type's minimum); empty_local_rows: (batch, 1, n, 1) bool, the rows
        that see no key locally, whose local branch is zero (as SDPA makes
        it), or None."""
        scale = 1.0 / math.sqrt(query.shape[-1])
        with torch.autocast(query.device.type, enabled=False):
            # Under autocast the projections arrive in half precision; the
            # softmaxes run in float32, as autocast runs them.
            scores = torch.matmul(query * scale, key.transpose(-1, -2)).masked_fill_(global_hidden, float("-inf"))
            logits = scores.float()
            global_probs = torch.softmax(logits, -1)
            global_lse = _log_normaliser(logits, global_probs)
            # Each local row is normalised by its own largest visible score
            # (see _attend_with_probabilities): none underflows to zeros.
            local_logits = TwoBranchAttention._local_logits(logits, local)
            del logits
            local_probs = torch.softmax(local_logits, -1)
            local_lse = _log_normaliser(local_logits, local_probs)
            del local_logits
            if empty_local_rows is not None:
                # softmax gives NaN there; exp(S - inf) = 0 in backward
                local_probs.masked_fill_(empty_local_rows, 0.0)
                local_lse.masked_fill_(empty_local_rows, float("inf"))
            drop_global, drop_local = _drop_mask(global_probs, dropout), _drop_mask(local_probs, dropout)
            mixed = TwoBranchAttention._mixed(
                _dropped(global_probs, drop_global, inplace=True),
                _dropped(local_probs, drop_local, inplace=True),
                gate,
            )
            del global_probs, local_probs
            output = torch.matmul(mixed.to(value.dtype), value)
            if dropout > 0.0:
                output.mul_(1.0 / (1.0 - dropout))
        ctx.save_for_backward(query, key, value, gate, local, scores, global_lse, local_lse, drop_global, drop_local)
        ctx.dropout = dropout
        return output

    @staticmethod
    def _local_logits(logits: torch.Tensor, local: torch.Tensor) -> torch.Tensor:
        if local.dtype == torch.bool:
            return logits.masked_fill(local, float("-inf"))
        return logits + local

    @staticmethod
    def _mixed(dropped_global: torch.Tensor, dropped_local: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        return torch.lerp(dropped_global, dropped_local, gate.to(dropped_global.dtype))

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        query, key, value, gate, local, scores, global_lse, local_lse, drop_global, drop_local = ctx.saved_tensors
        dropout = ctx.dropout
        rescale = 1.0 / (1.0 - dropout)
        scale = 1.0 / math.sqrt(query.shape[-1])
        with torch.autocast(query.device.type, enabled=False):
            # contiguous: a broadcast or transposed gradient would send the
            # batched products below through a slow per-matrix path
            grad_output = grad_output.to(value.dtype).contiguous()
            logits = scores.float()
            global_probs = torch.sub(logits, global_lse).exp_()
            if local.dtype == torch.bool:
                local_probs = torch.sub(logits, local_lse).exp_().masked_fill_(local, 0.0)
            else:
                local_probs = torch.add(logits, local).sub_(local_lse).exp_()
            del logits
            dropped_global = _dropped(global_probs, drop_global)
            dropped_local = _dropped(local_probs, drop_local)
            mixed = TwoBranchAttention._mixed(dropped_global, dropped_local, gate).to(value.dtype)
            grad_value = torch.matmul(mixed.transpose(-1, -2), grad_output)
            del mixed
            if dropout > 0.0:
                grad_value.mul_(rescale)
            # dM / r: the factor r goes to the small gradients at the end
            grad_mixed = torch.matmul(grad_output, value.transpose(-1, -2)).float()
            grad_gate = None
            if ctx.needs_input_grad[3]:
                # in place only on a copy: without dropout, dropped_local is local_probs
                difference = dropped_local.sub_(dropped_global) if drop_local is not None else dropped_local - dropped_global
                difference = difference.mul_(grad_mixed)
                grad_gate = difference.sum(-1, keepdim=True).mul_(rescale).sum_to_size(gate.shape).to(gate.dtype)
                del difference
            del dropped_global, dropped_local
            gate = gate.float()
            grad_global = _dropped(grad_mixed * (1.0 - gate), drop_global, inplace=True)
            grad_local = _dropped(grad_mixed.mul_(gate), drop_local, inplace=True)
            del grad_mixed
            grad_scores = torch._softmax_backward_data(grad_global, global_probs, -1, global_probs.dtype)
            del grad_global, global_probs
            grad_local_logits = torch._softmax_backward_data(grad_local, local_probs, -1, local_probs.dtype)
            del grad_local, local_probs
            grad_bias = None
            if ctx.needs_input_grad[5]:
                grad_bias = grad_local_logits.sum_to_size(local.shape).mul(rescale).to(local.dtype)
            grad_scores = grad_scores.add_(grad_local_logits).to(query.dtype)
            del grad_local_logits
            grad_query = torch.matmul(grad_scores, key).mul_(scale * rescale)
            grad_key = torch.matmul(grad_scores.transpose(-1, -2), query).mul_(scale * rescale)
        return grad_query, grad_key, grad_value, grad_gate, None, grad_bias, None, None


def _dropped(probs: torch.Tensor, drop: Optional[torch.Tensor], inplace: bool = False) -> torch.Tensor:
    """probs with the dropped entries zeroed (the 1 / (1 - p) is applied
    elsewhere)."""
    if drop is None:
        return probs
    return probs.masked_fill_(drop, 0.0) if inplace else probs.masked_fill(drop, 0.0)


def _first_not_none(first: Optional[torch.Tensor], second: torch.Tensor) -> torch.Tensor:
    return second if first is None else first


def _needs_grad(*tensors: torch.Tensor) -> bool:
    return any(tensor.requires_grad for tensor in tensors)


class SyntaxAwareAttention(nn.Module):
    """The attention shared by all model families: takes the projected,
    head-split queries, keys and values and returns the context.

    local: whether the layer has a local branch (and a gate).
    local_bias: for distance inputs, the module turning buckets (and the
        layer input) into an additive bias or a transform of the scores
        (layers/local_bias.py); None for boolean masks. Its `n_gates`, if
        set, is the number of gates (one per head) instead of one.
    supervised_head: the head trained to attend to syntactic parents, or None.
    """

    # Two fused SDPA calls. The materialised path (one score matrix for
    # both branches) is only ~2% faster on the CPU for short inputs and much
    # slower for 150-piece spans, so it serves output_attentions (and tests)
    # only.
    use_fused_attention: bool = True
    # Training (gradients on) with a mask or bias: TwoBranchAttention, which
    # keeps for backward only what the two softmaxes need. False: two SDPA
    # calls as in prediction (for comparison; more memory).
    memory_saving_training: bool = True
    # Prediction with a boolean mask: the local branch only for the sequences
    # whose mask hides a key (AttentionBatch.local_rows). False: for all of
    # them (for comparison).
    skip_fully_visible: bool = True

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
            return bias.to(dtype).masked_fill(~batch.global_mask, torch.finfo(dtype).min)
        return batch.local_mask

    def attend(
        self,
        hidden_states: torch.Tensor,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        output_attentions: bool = False,
    ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """query, key, value: (batch, heads, n_pieces, head_size). Returns the
        merged context (batch, n_pieces, hidden) and, with output_attentions,
        the mixed attention probabilities (batch, heads, n_pieces, n_pieces)."""
        batch = active_batch()
        if self.supervised_head is not None and batch.parent_targets is not None and torch.is_grad_enabled():
            batch.auxiliary_losses.append(self.parent_loss(batch, query, key))
        local_mask = self.local_attention_mask(batch, query.dtype, hidden_states)
        dropout = self.dropout_prob if self.training else 0.0
        transforms_scores = local_mask is not None and not isinstance(local_mask, torch.Tensor)
        if output_attentions or not self.use_fused_attention or transforms_scores:
            context, probs = self._attend_with_probabilities(
                batch, hidden_states, query, key, value, local_mask, dropout
            )
            return context, probs if output_attentions else None
        if local_mask is None:
            global_context = F.scaled_dot_product_attention(
                query, key, value, attn_mask=batch.global_mask, dropout_p=dropout
            )
            self._record_unused_gate(batch, hidden_states)
            return self.merge_heads(global_context), None
        gate = self._gate(batch, hidden_states)
        if self.memory_saving_training and torch.is_grad_enabled() and _needs_grad(query, key, value, gate, local_mask):
            # Training: one score matrix, and only the two probability
            # tensors and boolean dropout masks kept for backward.
            local, empty_rows = batch.hidden_local_mask() if local_mask.dtype == torch.bool else (local_mask, None)
            context = TwoBranchAttention.apply(query, key, value, gate, ~batch.global_mask, local, empty_rows, dropout)
            return self.merge_heads(context), None
        # Prediction: two fused kernels (on the CPU faster than the mixed
        # probabilities, or one call over stacked heads; docs/performance.md).
        global_context = F.scaled_dot_product_attention(
            query, key, value, attn_mask=batch.global_mask, dropout_p=dropout
        )
        rows = self._local_rows(batch, local_mask, dropout, query, key, value, gate)
        if rows is None:
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

    def _local_rows(
        self, batch: AttentionBatch, local_mask: torch.Tensor, dropout: float, *tensors: torch.Tensor
    ) -> Optional[torch.Tensor]:
        """The sequences whose local branch this prediction call computes (an
        index), or None for all. A sequence whose boolean mask hides no key
        gets the global context from its local branch, for any gate, unless
        each branch draws its own dropout; with gradients (training) every
        branch is computed as defined. Bias variants are always computed."""
        if (
            not self.skip_fully_visible
            or self.local_bias is not None
            or local_mask.dtype != torch.bool
            or dropout > 0.0
            or (torch.is_grad_enabled() and _needs_grad(*tensors))
        ):
            return None
        return batch.local_rows

    def _gate(self, batch: AttentionBatch, hidden_states: torch.Tensor) -> torch.Tensor:
        """(batch, n_gates, n_pieces, 1): the gate, broadcastable over heads."""
        gate = self.gate_values(hidden_states)
        if batch.record_gates:
            # one value per token: the mean over the heads' gates
            batch.gates.append(gate.mean(-1).detach().float())
        return gate.transpose(1, 2)[..., None]

    def _record_unused_gate(self, batch: AttentionBatch, hidden_states: torch.Tensor) -> None:
        if batch.record_gates and self.gate is not None:
            batch.gates.append(torch.full(hidden_states.shape[:2], float("nan"), device=hidden_states.device))

    def parent_loss(self, batch: AttentionBatch, query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        """Cross-entropy of the supervised head's attention distribution
        against the parent piece of each piece that has one."""
        head = self.supervised_head
        scores = query[:, head] @ key[:, head].transpose(-1, -2) / math.sqrt(self.head_size)
        scores = scores.float().masked_fill(~batch.global_mask[:, 0], torch.finfo(torch.float32).min)
        log_probs = scores.log_softmax(-1)
        targets = batch.parent_targets
        if (targets == IGNORED_TARGET).all():
            return log_probs.sum() * 0.0
        return F.nll_loss(log_probs.flatten(0, 1), targets.flatten(), ignore_index=IGNORED_TARGET)

    def _attend_with_probabilities(
        self,
        batch: AttentionBatch,
        hidden_states: torch.Tensor,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        local_mask: Optional[LocalInput],
        dropout: float,
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """The same computation with the probabilities materialised: one
        score matrix, a softmax per branch. The gate is per query row, so
        mixing the probabilities equals mixing the contexts, and one product
        with the values serves both branches."""
        scores = (query @ key.transpose(-1, -2)).mul_(1.0 / math.sqrt(self.head_size))
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
            # underflow to zero. Every row sees its own piece (padding rows
            # see every real key), so no row is empty.
            local_probs = scores.masked_fill(~local_mask, float("-inf")).softmax(-1)
        else:
            local_probs = (scores + local_mask).softmax(-1)
        gate = self._gate(batch, hidden_states).to(probs.dtype)
        probs = torch.lerp(
            F.dropout(probs, dropout, self.training), F.dropout(local_probs, dropout, self.training), gate
        )
        return self.merge_heads(probs @ value), probs


class BertStyleSelfAttention(SyntaxAwareAttention):
    """Replaces the `attention.self` module of BERT, RoBERTa, XLM-RoBERTa,
    CamemBERT and ELECTRA layers (eager or SDPA); the output projection
    stays in the layer's `attention.output`."""

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


class DistilBertStyleAttention(SyntaxAwareAttention):
    """Replaces DistilBERT's `attention` module, which also holds the output
    projection: the mixing happens before it."""

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
