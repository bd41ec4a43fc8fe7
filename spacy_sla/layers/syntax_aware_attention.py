"""The attention that replaces a layer's self-attention (through the model
family's adapter, layers/family_adapters/).

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

One computation per situation:
- no local branch (a layer without one, or a batch without local inputs):
  one fused SDPA call;
- the probabilities needed (output_attentions, or a local module that
  transforms the scores): one score matrix, a softmax per branch
  (probabilities.py);
- a local branch in training (dropout, or gradients to compute):
  TwoBranchAttention, which keeps only what the two softmaxes need for
  backward (two_branch.py);
- a local branch in prediction: prediction.py, the fastest measured way for
  the input, with the constants of prediction_schedule.py.

A family whose scores carry a position term (BERT's relative_key, MPNet's
relative bias, DeBERTa's disentangled terms, ModernBERT's window) passes it
as `score_bias`, added to the scaled dot products before any mask: both
branches, and the supervised head, see the model's own scores, and the
local mask (or bias) is added to the biased scores.
"""
from typing import Callable, Optional, Tuple

import torch
from torch import nn
from torch.nn import functional as F

from .attention_batch import AttentionBatch, LocalInput, hidden_offset
from .parent_attention import parent_attention_loss
from .prediction import predict_two_branches
from .probabilities import attention_probabilities
from .two_branch import two_branch_attention

# (batch, query, key, value, gate, local, score_bias, dropout) -> the mixed
# context (batch, heads, n_pieces, head_size) of a layer with a local branch:
# query, key, value (batch, heads, n_pieces, head_size); gate (batch,
# n_gates, n_pieces, 1); local the batch's boolean local mask or an additive
# bias (padding keys hidden); score_bias the model's position term of the
# scores, or None; dropout the attention dropout of this call (0 in eval).
GatedAttention = Callable[
    [AttentionBatch, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, Optional[torch.Tensor], float],
    torch.Tensor,
]


def gated_attention(
    batch: AttentionBatch,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    gate: torch.Tensor,
    local: torch.Tensor,
    score_bias: Optional[torch.Tensor],
    dropout: float,
) -> torch.Tensor:
    """The two branches and their mix (GatedAttention): in training (dropout,
    or gradients to compute) through TwoBranchAttention, in prediction by
    predict_two_branches. With gradients, every branch is computed as
    defined; with dropout, each branch draws its own mask, so no sequence's
    local branch equals its global one."""
    tensors = (query, key, value, gate, local) + (() if score_bias is None else (score_bias,))
    if dropout > 0.0 or (torch.is_grad_enabled() and any(tensor.requires_grad for tensor in tensors)):
        return two_branch_attention(batch, query, key, value, gate, local, score_bias, dropout)
    return predict_two_branches(batch, query, key, value, gate, local, score_bias)


class SyntaxAwareAttention(nn.Module):
    """The attention shared by all model families: takes the projected,
    head-split queries, keys and values and returns the context.

    local: whether the layer has a local branch (and a gate).
    local_bias: for distance inputs, the module turning buckets (and the
        layer input) into an additive bias or a transform of the scores
        (made by the distance builder, spacy_sla/variants/); None for
        boolean masks. Its `n_gates`, if set, is the number of gates (one
        per head) instead of one.
    parent_attention_head: the head trained to attend to syntactic parents, or None.
    gated_attention: how a call with a local branch computes and mixes the
        two branches (the production function, unless a benchmark or a
        test compares another).

    bound_batch: the AttentionBatch of the forward pass that runs the
    module, which SyntaxAwareTransformer.forward binds for the duration of
    its encoder's call (the adapters' forward has the original module's
    signature, which cannot carry it); None outside one.
    """

    def __init__(
        self,
        hidden_size: int,
        n_heads: int,
        dropout_prob: float,
        initializer_range: float = 0.02,
        local: bool = True,
        local_bias: Optional[nn.Module] = None,
        parent_attention_head: Optional[int] = None,
        gated_attention: GatedAttention = gated_attention,
    ):
        super().__init__()
        self.n_heads = n_heads
        self.head_size = hidden_size // n_heads
        self.dropout_prob = dropout_prob
        self.parent_attention_head = parent_attention_head
        self.local_bias = local_bias
        self.gated_attention = gated_attention
        self.bound_batch: Optional[AttentionBatch] = None
        self.gate = nn.Linear(hidden_size, getattr(local_bias, "n_gates", 1)) if local else None
        if self.gate is not None:
            nn.init.normal_(self.gate.weight, std=initializer_range)
            nn.init.zeros_(self.gate.bias)

    @property
    def batch(self) -> AttentionBatch:
        """The bound batch of the running forward pass."""
        if self.bound_batch is None:
            raise RuntimeError(
                "The SLA attention was called outside SyntaxAwareTransformer.forward, which provides its masks."
            )
        return self.bound_batch

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.n_heads, self.head_size).transpose(1, 2)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, _, length, _ = x.shape
        return x.transpose(1, 2).reshape(batch, length, self.n_heads * self.head_size)

    def gate_values(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(batch, n_pieces, n_gates): the weight of the local branch per
        token (and per head, with one gate per head)."""
        if self.gate is None:
            raise ValueError("gate_values asked of an attention module without a local branch")
        return torch.sigmoid(self.gate(hidden_states))

    def local_input(self, batch: AttentionBatch, dtype: torch.dtype, hidden_states: torch.Tensor) -> Optional[LocalInput]:
        """The local branch's input: the batch's boolean mask, an additive
        float bias of `dtype` with padding keys hidden, a transform of the
        scores, or None when the layer or this batch has no local input."""
        if self.gate is None:
            return None
        if self.local_bias is not None:
            if batch.local_buckets is None:
                return None
            bias = self.local_bias(batch.local_buckets, hidden_states)
            if not isinstance(bias, torch.Tensor):
                transform: LocalInput = bias  # a LocalScoresTransform: a callable on the scores
                return transform
            return bias.to(dtype).masked_fill(~batch.global_mask, hidden_offset(dtype))
        return batch.local_mask

    def attend(
        self,
        batch: AttentionBatch,
        hidden_states: torch.Tensor,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        output_attentions: bool = False,
        score_bias: Optional[torch.Tensor] = None,
    ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """batch: this forward pass's inputs; hidden_states: the layer input
        the gate reads, (batch, n_pieces, hidden); query, key, value:
        (batch, heads, n_pieces, head_size); score_bias: the model's position
        term of the scores, broadcastable to (batch, heads, n_pieces,
        n_pieces), added to q.k / sqrt(head_size) in both branches, or None.
        Returns the merged context (batch, n_pieces, hidden) and, with
        output_attentions, the mixed attention probabilities (batch, heads,
        n_pieces, n_pieces)."""
        if self.parent_attention_head is not None and batch.parent_attention_targets is not None and torch.is_grad_enabled():
            head = self.parent_attention_head
            batch.parent_attention_losses.append(
                parent_attention_loss(batch, query[:, head], key[:, head], head, score_bias)
            )
        local = self.local_input(batch, query.dtype, hidden_states)
        dropout = self.dropout_prob if self.training else 0.0
        if output_attentions or (local is not None and not isinstance(local, torch.Tensor)):
            gate = None if local is None else self._gate(batch, hidden_states)
            if local is None:
                self._record_unused_gate(batch, hidden_states)
            context, probs = attention_probabilities(batch, query, key, value, local, gate, dropout, score_bias)
            return self.merge_heads(context), probs if output_attentions else None
        if local is None:
            self._record_unused_gate(batch, hidden_states)
            context = F.scaled_dot_product_attention(
                query, key, value, attn_mask=batch.global_attn_mask(query.dtype, score_bias), dropout_p=dropout
            )
            return self.merge_heads(context), None
        gate = self._gate(batch, hidden_states)
        return self.merge_heads(self.gated_attention(batch, query, key, value, gate, local, score_bias, dropout)), None

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
