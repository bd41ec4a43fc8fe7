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
"""
import math
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Callable, Iterator, List, Optional, Tuple, Union

import torch
from torch import nn
from torch.nn import functional as F

from ..data_classes import IGNORED_TARGET
from ..errors import Errors

# A local branch's input: a bool mask or an additive bias for SDPA, or a
# transform of the scaled dot-product scores into the local logits.
LocalInput = Union[torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]


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
    """

    global_mask: torch.Tensor
    local_mask: Optional[torch.Tensor] = None
    local_buckets: Optional[torch.Tensor] = None
    parent_targets: Optional[torch.Tensor] = None
    record_gates: bool = False
    gates: List[torch.Tensor] = field(default_factory=list)
    auxiliary_losses: List[torch.Tensor] = field(default_factory=list)

    @classmethod
    def from_inputs(
        cls,
        attention_mask: torch.Tensor,
        local_mask: Optional[torch.Tensor] = None,
        local_buckets: Optional[torch.Tensor] = None,
        parent_targets: Optional[torch.Tensor] = None,
        record_gates: bool = False,
    ) -> "AttentionBatch":
        """From the encoder's (batch, n_pieces) padding mask and the batch's
        (batch, n_pieces, n_pieces) syntax inputs."""
        real = attention_mask.bool()
        keys = real[:, None, None, :]
        # Padding queries attend like global ones: no softmax row is ever
        # empty, so no NaN can reach the backward pass.
        local = None if local_mask is None else (local_mask | ~real[:, :, None])[:, None] & keys
        return cls(keys, local, local_buckets, parent_targets, record_gates)


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
        global_context = F.scaled_dot_product_attention(
            query, key, value, attn_mask=batch.global_mask, dropout_p=dropout
        )
        if local_mask is None:
            self._record_unused_gate(batch, hidden_states)
            return self.merge_heads(global_context), None
        local_context = F.scaled_dot_product_attention(
            query, key, value, attn_mask=local_mask, dropout_p=dropout
        )
        gate = self._gate(batch, hidden_states)
        # g * local + (1 - g) * global in one fused op, before merging heads
        mixed = torch.lerp(global_context, local_context, gate.to(global_context.dtype))
        return self.merge_heads(mixed), None

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
