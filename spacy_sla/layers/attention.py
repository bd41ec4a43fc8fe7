"""Syntax-aware local attention as PyTorch modules.

Each wrapped layer keeps its query, key and value projections. It attends
twice with the same scores: globally (padding hidden) and locally (padding
and the local mask hidden), each with its own attention dropout, and mixes
the two per token with a learned gate,

    g_t = sigmoid(w_g . h_t + b_g),   out_t = g_t * local_t + (1 - g_t) * global_t,

before the layer's usual output projection. The masks of a forward pass
arrive through an AttentionMaskSlot shared by all wrapped layers: the
wrapping SyntaxAwareTransformer fills it once per batch, so no layer builds
or copies a mask.
"""
import math
from typing import Optional, Tuple

import torch
from torch import nn
from torch.nn import functional as F

from ..errors import Errors


class AttentionMaskSlot:
    """The boolean masks of the batch in flight (True: may attend).

    global_mask: (batch, 1, 1, n_pieces), the keys that are not padding.
    local_mask: (batch, 1, n_pieces, n_pieces), or None for global attention
        only (then the local branch and the gate are skipped).
    """

    def __init__(self) -> None:
        self.global_mask: Optional[torch.Tensor] = None
        self.local_mask: Optional[torch.Tensor] = None

    def fill(self, attention_mask: torch.Tensor, local_mask: Optional[torch.Tensor]) -> None:
        real = attention_mask.bool()
        keys = real[:, None, None, :]
        self.global_mask = keys
        if local_mask is None:
            self.local_mask = None
        else:
            # Padding queries attend like global ones: no softmax row is
            # ever empty, so no NaN can reach the backward pass.
            self.local_mask = (local_mask | ~real[:, :, None])[:, None] & keys

    def clear(self) -> None:
        self.global_mask = None
        self.local_mask = None


class GatedLocalAttention(nn.Module):
    """The SLA mixing shared by all model families: takes the projected,
    head-split queries, keys and values and returns the mixed context."""

    def __init__(
        self,
        hidden_size: int,
        n_heads: int,
        dropout_prob: float,
        slot: AttentionMaskSlot,
        initializer_range: float = 0.02,
    ):
        super().__init__()
        self.n_heads = n_heads
        self.head_size = hidden_size // n_heads
        self.dropout_prob = dropout_prob
        self.slot = slot
        self.gate = nn.Linear(hidden_size, 1)
        nn.init.normal_(self.gate.weight, std=initializer_range)
        nn.init.zeros_(self.gate.bias)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.n_heads, self.head_size).transpose(1, 2)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, _, length, _ = x.shape
        return x.transpose(1, 2).reshape(batch, length, self.n_heads * self.head_size)

    def gate_values(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(batch, n_pieces, 1): the weight of the local branch per token."""
        return torch.sigmoid(self.gate(hidden_states))

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
        global_mask, local_mask = self.slot.global_mask, self.slot.local_mask
        if global_mask is None:
            raise RuntimeError(
                "The SLA attention was called outside SyntaxAwareTransformer.forward, "
                "which provides its masks."
            )
        dropout = self.dropout_prob if self.training else 0.0
        if output_attentions:
            return self._attend_explicitly(hidden_states, query, key, value, dropout)
        global_context = F.scaled_dot_product_attention(
            query, key, value, attn_mask=global_mask, dropout_p=dropout
        )
        if local_mask is None:
            return self.merge_heads(global_context), None
        local_context = F.scaled_dot_product_attention(
            query, key, value, attn_mask=local_mask, dropout_p=dropout
        )
        gate = self.gate_values(hidden_states)
        mixed = gate * self.merge_heads(local_context) + (1 - gate) * self.merge_heads(
            global_context
        )
        return mixed, None

    def _attend_explicitly(
        self,
        hidden_states: torch.Tensor,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        dropout: float,
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        # The same computation with the probabilities materialised, for
        # callers that inspect them. The gate is per query row, so mixing the
        # probabilities equals mixing the contexts.
        scores = query @ key.transpose(-1, -2) / math.sqrt(self.head_size)
        hidden = torch.finfo(scores.dtype).min
        probs = F.dropout(
            scores.masked_fill(~self.slot.global_mask, hidden).softmax(-1),
            dropout,
            self.training,
        )
        if self.slot.local_mask is not None:
            local_probs = F.dropout(
                scores.masked_fill(~self.slot.local_mask, hidden).softmax(-1),
                dropout,
                self.training,
            )
            gate = self.gate_values(hidden_states)[:, None]  # (batch, 1, n_pieces, 1)
            probs = gate * local_probs + (1 - gate) * probs
        return self.merge_heads(probs @ value), probs


class BertStyleSelfAttention(GatedLocalAttention):
    """Replaces the `attention.self` module of BERT, RoBERTa, XLM-RoBERTa,
    CamemBERT and ELECTRA layers (eager or SDPA); the output projection
    stays in the layer's `attention.output`."""

    def __init__(self, original: nn.Module, config, slot: AttentionMaskSlot):
        super().__init__(
            original.all_head_size,
            original.num_attention_heads,
            config.attention_probs_dropout_prob,
            slot,
            config.initializer_range,
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
        # attention_mask is the model's additive padding mask; the slot holds
        # the same information as a boolean mask, shared by both branches.
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


class DistilBertStyleAttention(GatedLocalAttention):
    """Replaces DistilBERT's `attention` module, which also holds the output
    projection: the mixing happens before it."""

    def __init__(self, original: nn.Module, config, slot: AttentionMaskSlot):
        super().__init__(
            original.dim, original.n_heads, config.attention_dropout, slot, config.initializer_range
        )
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
