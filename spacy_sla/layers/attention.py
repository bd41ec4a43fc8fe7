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
back), or for none. On the CPU, those sequences go in groups of similar
length, each cut to its longest sequence (the fused call's cost grows with
the square of the width, and strided spans are padded to the batch's
longest); the encoder puts each group in a block of the batch.
"""
import math
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterator, List, Optional, Tuple, Union

import numpy
import torch
from torch import nn
from torch.nn import functional as F

from ..data_classes import IGNORED_TARGET
from ..errors import Errors

# A local branch's input: a bool mask or an additive bias for SDPA, or a
# transform of the scaled dot-product scores into the local logits.
LocalInput = Union[torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]

# Prediction on the CPU computes the local branch in at most this many
# groups of sequences of similar length, each cut to its longest sequence's
# pieces, when that spares at least WIDTH_GROUPS_MIN_SAVING of the fused
# call's work (its cost grows with the squared width); strided spans of
# documents are padded to their batch's longest (docs/performance.md).
MAX_WIDTH_GROUPS = 3
WIDTH_GROUPS_MIN_SAVING = 0.15


@dataclass(frozen=True)
class WidthGroup:
    """Sequences whose local branch goes in one fused call: `rows` (an
    index on the mask's device) have no real piece at or after `width`.
    `block`: (start, end) where rows are the consecutive sequences start to
    end - 1, which the call then reads as views instead of copies
    (SyntaxAwareTransformer orders a batch so; `width_order`)."""

    rows: torch.Tensor
    width: int
    block: Optional[Tuple[int, int]] = None

    def take(self, tensor: torch.Tensor) -> torch.Tensor:
        """The group's sequences of a (batch, heads, pieces, ...) tensor, cut
        to its width: a view for a block, a copy otherwise."""
        if self.block is not None:
            return tensor[self.block[0] : self.block[1], :, : self.width]
        return tensor[:, :, : self.width].index_select(0, self.rows)

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
    width_groups: on the CPU, the sequences whose mask hides some key in
        groups of similar length (WidthGroup), when computing their local
        branch group by group, cut to each group's width, spares enough of
        the work; None otherwise.
    """

    global_mask: torch.Tensor
    local_mask: Optional[torch.Tensor] = None
    local_buckets: Optional[torch.Tensor] = None
    parent_targets: Optional[torch.Tensor] = None
    record_gates: bool = False
    gates: List[torch.Tensor] = field(default_factory=list)
    auxiliary_losses: List[torch.Tensor] = field(default_factory=list)
    local_rows: Optional[torch.Tensor] = None
    width_groups: Optional[Tuple[WidthGroup, ...]] = None
    # local_mask as an additive mask, per dtype and for all rows or those of
    # local_rows: made once per forward pass and shared by the layers (SDPA's
    # CPU kernel turns a boolean mask into an additive one on every call, at
    # every layer).
    _additive_local_masks: Dict[Tuple[torch.dtype, bool], torch.Tensor] = field(default_factory=dict, repr=False)
    _logit_offsets: Dict[Tuple[torch.dtype, bool], torch.Tensor] = field(default_factory=dict, repr=False)
    _empty_local_rows: Optional[Tuple[Optional[torch.Tensor]]] = field(default=None, repr=False)
    _group_masks: Dict[Tuple[torch.dtype, int], torch.Tensor] = field(default_factory=dict, repr=False)

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
        if local is None:
            return cls(keys, local, local_buckets, parent_targets, record_gates)
        restricted = _restricted_sequences(local, keys, local_restricted)
        width_groups = _width_groups(real, restricted) if real.device.type == "cpu" else None
        return cls(
            keys, local, local_buckets, parent_targets, record_gates,
            local_rows=_rows_needing_local(restricted, local.device), width_groups=width_groups,
        )

    def empty_local_rows(self) -> Optional[torch.Tensor]:
        """The (batch, 1, n_pieces, 1) rows that see no key locally, or None
        when there is none (the masks the builders make always show each
        piece itself). Made once per forward pass for all layers."""
        if self._empty_local_rows is None:
            empty_rows = (~self.local_mask).all(-1, keepdim=True)
            self._empty_local_rows = (empty_rows if bool(empty_rows.any()) else None,)
        return self._empty_local_rows[0]

    def logit_offsets(self, dtype: torch.dtype, local: bool = False) -> torch.Tensor:
        """The padding mask (or with `local`, local_mask) as an additive
        offset of `dtype` to the scores: 0 where visible, -inf where hidden,
        (batch, 1, 1, n_pieces) (or (batch, 1, n_pieces, n_pieces)). Adding
        it hides exactly what masked_fill hides, in a fraction of the time on
        the CPU; made once per forward pass for all layers."""
        offsets = self._logit_offsets.get((dtype, local))
        if offsets is None:
            visible = self.local_mask if local else self.global_mask
            offsets = torch.zeros(visible.shape, dtype=dtype, device=visible.device)
            offsets.masked_fill_(~visible, float("-inf"))
            self._logit_offsets[(dtype, local)] = offsets
        return offsets

    def additive_local_mask(self, dtype: torch.dtype, gathered: bool = False) -> Optional[torch.Tensor]:
        """local_mask as (batch, 1, n_pieces, n_pieces) of `dtype` (with
        `gathered`, of the sequences of local_rows only): 0 where visible,
        the type's minimum where hidden; None when a row sees no key (SDPA
        gives such a row zeros with a boolean mask, not with an additive
        one). As every row sees a key, a hidden key's weight is
        exp(min - visible max) = 0 exactly, as with the boolean mask."""
        if self.empty_local_rows() is not None:
            return None
        mask = self._additive_local_masks.get((dtype, gathered))
        if mask is None:
            visible = self.local_mask.index_select(0, self.local_rows) if gathered else self.local_mask
            mask = torch.zeros(visible.shape, dtype=dtype, device=visible.device)
            mask.masked_fill_(~visible, torch.finfo(dtype).min)
            self._additive_local_masks[(dtype, gathered)] = mask
        return mask

    def group_local_mask(self, dtype: torch.dtype, index: int) -> torch.Tensor:
        """local_mask of width_groups[index]: its sequences, cut to its
        width, additive (as additive_local_mask) or, where a row sees no
        key, boolean. Made once per forward pass for all layers."""
        mask = self._group_masks.get((dtype, index))
        if mask is None:
            group = self.width_groups[index]
            visible = group.take(self.local_mask)[..., : group.width]
            if self.empty_local_rows() is None:
                mask = torch.zeros(visible.shape, dtype=dtype, device=visible.device)
                mask.masked_fill_(~visible, torch.finfo(dtype).min)
            else:
                mask = visible.contiguous()
            self._group_masks[(dtype, index)] = mask
        return mask


def _restricted_sequences(local: torch.Tensor, keys: torch.Tensor, restricted: Optional[torch.Tensor]) -> torch.Tensor:
    """(batch,) bool on the CPU: the sequences whose local mask hides a key;
    `restricted` when given, else read from `local`, the batch's (batch, 1,
    n, n) local mask."""
    if restricted is None:
        # Padding queries see every real key locally, so a sequence's local
        # mask differs from its padding mask exactly where it hides a real
        # key from a real query. One reduction per forward pass.
        restricted = (local != keys).flatten(1).any(1)
    return restricted.to("cpu", torch.bool)


def _rows_needing_local(restricted: torch.Tensor, device: torch.device) -> Optional[torch.Tensor]:
    """AttentionBatch.local_rows: the index of the sequences flagged in
    `restricted`, or None when more than GATHER_MAX_SHARE of them are."""
    n_restricted = int(restricted.sum())
    if n_restricted == len(restricted) or n_restricted > GATHER_MAX_SHARE * len(restricted):
        return None
    return restricted.nonzero().flatten().to(device)


def _width_groups(real: torch.Tensor, restricted: torch.Tensor) -> Optional[Tuple[WidthGroup, ...]]:
    """AttentionBatch.width_groups: the restricted sequences sorted by
    width (the position after their last real piece) and cut into at most
    MAX_WIDTH_GROUPS groups so that the sum of count x width**2 is smallest,
    if that is at most 1 - WIDTH_GROUPS_MIN_SAVING of what the plain path
    computes (the restricted rows, or all of them, at the padded width)."""
    rows = restricted.nonzero().flatten()
    if len(rows) == 0:
        return None
    n_pieces = real.shape[1]
    real_rows = real.index_select(0, rows.to(real.device)).cpu()
    widths = (n_pieces - real_rows.flip(1).to(torch.uint8).argmax(1)).numpy()
    widths[~real_rows.any(1).numpy()] = n_pieces
    order = numpy.argsort(widths, kind="stable")
    sorted_widths = widths[order].astype(numpy.float64)
    n_plain = len(rows) if _rows_needing_local(restricted, real.device) is not None else len(restricted)
    cost, ends = _cheapest_cuts(sorted_widths)
    if cost > (1.0 - WIDTH_GROUPS_MIN_SAVING) * n_plain * float(n_pieces) ** 2:
        return None
    groups = []
    for start, end in zip([0] + ends[:-1], ends):
        group_rows = rows[torch.from_numpy(order[start:end])]
        first = int(group_rows[0])
        is_block = torch.equal(group_rows, torch.arange(first, first + len(group_rows)))
        groups.append(
            WidthGroup(
                rows=group_rows.to(real.device),
                width=int(sorted_widths[end - 1]),
                block=(first, first + len(group_rows)) if is_block else None,
            )
        )
    return tuple(groups)


def width_order(attention_mask: torch.Tensor, restricted: torch.Tensor) -> Optional[torch.Tensor]:
    """The order of a batch's sequences in which AttentionBatch.width_groups
    are blocks (the restricted sequences by width, then the others), or None
    where there are no groups or the batch is in that order already."""
    groups = _width_groups(attention_mask.bool(), restricted.to("cpu", torch.bool))
    if groups is None or all(group.block is not None for group in groups):
        return None
    grouped = torch.cat([group.rows.cpu() for group in groups])
    others = torch.ones(len(restricted), dtype=torch.bool)
    others[grouped] = False
    return torch.cat([grouped, others.nonzero().flatten()]).to(attention_mask.device)


def _cheapest_cuts(widths: numpy.ndarray) -> Tuple[float, List[int]]:
    """The ends of at most MAX_WIDTH_GROUPS consecutive groups of the sorted
    widths whose sum of count x (last width)**2 is smallest, and that sum:
    dynamic programming over the groups' ends, one array operation a group.
    A cut between equal widths never pays (the lower group may take them at
    no cost), so the ends are sought among the distinct widths only: at most
    one per piece of the padded width, however large the batch."""
    distinct, counts = numpy.unique(widths, return_counts=True)
    n = len(distinct)
    squared = distinct.astype(numpy.float64) ** 2
    covered = numpy.concatenate([[0], numpy.cumsum(counts)])  # sequences below each distinct width
    start, end = numpy.arange(n + 1)[:, None], numpy.arange(n + 1)[None, :]
    # group_cost[s, e]: the sequences of distinct widths s to e - 1 as one group (never empty)
    group_cost = numpy.where(
        start < end, (covered[end] - covered[start]) * squared[numpy.maximum(end - 1, 0)], numpy.inf
    )
    cost = group_cost[0]  # cost[e]: distinct widths below e in the groups so far
    best_cost, best_ends = float(cost[n]), [n]
    starts: List[numpy.ndarray] = []
    for _ in range(MAX_WIDTH_GROUPS - 1):
        total = cost[:, None] + group_cost  # [s, e]: below s as before, s to e - 1 one more group
        starts.append(total.argmin(axis=0))
        cost = total.min(axis=0)
        if cost[n] < best_cost:
            ends = [n]
            for step in reversed(starts):
                ends.insert(0, int(step[ends[0]]))
            best_cost, best_ends = float(cost[n]), ends
    return best_cost, [int(covered[end]) for end in best_ends]


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



def _drop_out_pair(
    global_probs: torch.Tensor, local_probs: torch.Tensor, dropout: float
) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
    """Zero, in place, the probabilities each branch's dropout drops, and
    return the two branches' masks as booleans, True where an element is
    kept (for backward; None without dropout). Each mask drops an element
    with probability `dropout`, independently of the other mask and of
    every other element. One byte per element where F.dropout's backward
    keeps a float mask.

    On the CPU the random draws are the largest cost plain attention does not
    have (docs/performance.md), so one uniform u per element serves both
    masks: the global branch drops u < p, the local one p(1 - p) <= u <
    p(1 - p) + p. Each interval has length p and their overlap [p(1 - p), p)
    has length p², so the pair has the law of two independent Bernoulli(p)
    draws (bernoulli_ with a scalar rate, twice, takes about three times as
    long). The draws and the products run one sequence at a time in
    buffers of a sequence's (heads, n, n) floats, so the peak memory grows
    by no more than that, and the masks are applied as float products (a
    boolean mask's masked_fill, or its cast, costs several times as much).
    Elsewhere, two uint8 bernoulli_ draws viewed as bool."""
    if dropout <= 0.0:
        return None
    shape = global_probs.shape
    if global_probs.device.type != "cpu" or global_probs.dim() < 2:
        keeps = tuple(
            torch.empty(shape, dtype=torch.uint8, device=global_probs.device).bernoulli_(1.0 - dropout)
            for _ in range(2)
        )
        global_probs.mul_(keeps[0])
        local_probs.mul_(keeps[1])
        return keeps[0].view(torch.bool), keeps[1].view(torch.bool)
    local_start = dropout * (1.0 - dropout)
    keep_global = torch.empty(shape, dtype=torch.bool)
    keep_local = torch.empty(shape, dtype=torch.bool)
    uniform = torch.empty(shape[1:])
    kept = torch.empty(shape[1:])
    after_local = torch.empty(shape[1:])
    for index in range(shape[0]):
        uniform.uniform_()
        global_probs[index].mul_(torch.ge(uniform, dropout, out=kept))
        torch.ge(uniform, dropout, out=keep_global[index])
        torch.lt(uniform, local_start, out=kept).add_(torch.ge(uniform, local_start + dropout, out=after_local))
        local_probs[index].mul_(kept)
        torch.ne(kept, 0.0, out=keep_local[index])
    return keep_global, keep_local


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

    Saved for backward: Q, K, V, g, the local input (the batch's additive
    local mask, shared by the heads and the layers, or the bias), S and the
    keep masks as booleans: per element
    of B x H x L x L, 4 bytes for S and 2 for the masks (in float32), where
    two SDPA calls keep 16 bytes (two float tensors per branch) and plain
    attention 8. Backward recomputes both softmaxes and M; the dropout masks
    are kept, not redrawn, because drawing them is the costly part on the
    CPU.

    Backward (dO the gradient of out, r = 1 / (1 - p)):
        dV = r M^T dO,  dM = r dO V^T,  A_g = D_g P_g dM,  A_l = D_l P_l dM,
        dS = (1 - g) (A_g - P_g sum_keys(A_g)) + g (A_l - P_l sum_keys(A_l))
           (the two softmax backwards with dP_g = (1 - g) D_g dM, dP_l = g D_l dM),
        dQ = dS K / sqrt(d),  dK = dS^T Q / sqrt(d),
        dg = sum_keys(A_l) - sum_keys(A_g),  d(bias) = g (A_l - P_l sum_keys(A_l)).
    The factor r is applied to the small tensors (dV, dQ, dK, dg), not the
    B x H x L x L ones.

    The elementwise passes over B x H x L x L, not the products, are what SLA
    adds on the CPU, so each is chosen for speed there (docs/performance.md):
    masks are added as offsets (0 or -inf) and dropout applied as products
    with float 0/1 masks (a sequence at a time in forward, the saved boolean
    masks cast into a buffer in backward), where masked_fill with a
    broadcast or boolean mask takes four to ten times as long; products and
    mixes run in place where the operand is not needed again; the softmax
    backwards are written with the mix folded in (about 15 passes instead of
    20).
    """

    @staticmethod
    def forward(
        ctx,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        gate: torch.Tensor,
        global_offsets: torch.Tensor,
        local: torch.Tensor,
        empty_local_rows: Optional[torch.Tensor],
        dropout: float,
    ) -> torch.Tensor:
        """query, key, value: (batch, heads, n, head_size); gate: (batch,
        n_gates, n, 1) with n_gates 1 or heads; global_offsets: (batch, 1, 1,
        n), -inf for padding keys, 0 elsewhere (AttentionBatch.logit_offsets);
        local: the local branch's additive offsets broadcastable to (batch,
        heads, n, n): -inf where the local mask hides a key (padding
        included), 0 elsewhere, or a bias (padding keys at the type's
        minimum); empty_local_rows: (batch, 1, n, 1) bool, the rows
        that see no key locally, whose local branch is zero (as SDPA makes
        it), or None."""
        scale = 1.0 / math.sqrt(query.shape[-1])
        with torch.autocast(query.device.type, enabled=False):
            # Under autocast the projections arrive in half precision; the
            # softmaxes run in float32, as autocast runs them.
            scores = torch.matmul(query * scale, key.transpose(-1, -2)).add_(global_offsets)
            global_probs, local_probs, _ = TwoBranchAttention._probabilities(scores, local, empty_local_rows)
            keep_masks = _drop_out_pair(global_probs, local_probs, dropout)
            keep_global, keep_local = (None, None) if keep_masks is None else keep_masks
            mixed = global_probs.lerp_(local_probs, gate.to(global_probs.dtype))
            del global_probs, local_probs
            output = torch.matmul(mixed.to(value.dtype), value)
            if dropout > 0.0:
                output.mul_(1.0 / (1.0 - dropout))
        ctx.save_for_backward(query, key, value, gate, local, scores, keep_global, keep_local)
        ctx.empty_local_rows = empty_local_rows
        ctx.dropout = dropout
        return output

    @staticmethod
    def _probabilities(
        scores: torch.Tensor, local: torch.Tensor, empty_local_rows: Optional[torch.Tensor]
    ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Both branches' probabilities, in float32, and the local logits'
        buffer (free for reuse). Backward recomputes them the same way:
        softmax is exact and, on the CPU, two to ten times as fast as
        exp(S - log-sum-exp), whose vectorised exp slows down on -inf and on
        results below float32's normal range."""
        logits = scores.float()
        global_probs = torch.softmax(logits, -1)
        # Each local row is normalised by its own largest visible score
        # (see _attend_with_probabilities): none underflows to zeros.
        local_logits = logits + local
        local_probs = torch.softmax(local_logits, -1)
        if empty_local_rows is not None:
            local_probs.masked_fill_(empty_local_rows, 0.0)  # softmax gives NaN there
        return global_probs, local_probs, local_logits

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        query, key, value, gate, local, scores, keep_global, keep_local = ctx.saved_tensors
        dropout = ctx.dropout
        rescale = 1.0 / (1.0 - dropout)
        scale = 1.0 / math.sqrt(query.shape[-1])
        with torch.autocast(query.device.type, enabled=False):
            # contiguous: a broadcast or transposed gradient would send the
            # batched products below through a slow per-matrix path
            grad_output = grad_output.to(value.dtype).contiguous()
            global_probs, local_probs, free = TwoBranchAttention._probabilities(scores, local, ctx.empty_local_rows)
            if keep_global is None:
                kept_global, kept_local = global_probs, local_probs
            else:
                # the masks cast into buffers, then multiplied in place: one
                # new tensor where a product with a boolean makes two
                kept_global = torch.empty_like(global_probs).copy_(keep_global).mul_(global_probs)
                kept_local = free.copy_(keep_local).mul_(local_probs)
            del free
            mixed = torch.lerp(kept_global, kept_local, gate.to(kept_global.dtype))
            grad_value = torch.matmul(mixed.to(value.dtype).transpose(-1, -2), grad_output)
            if dropout > 0.0:
                grad_value.mul_(rescale)
            # dM / r: the factor r goes to the small gradients at the end
            if value.dtype == mixed.dtype:
                grad_mixed = torch.matmul(grad_output, value.transpose(-1, -2), out=mixed)
            else:
                grad_mixed = torch.matmul(grad_output, value.transpose(-1, -2)).float()
            del mixed
            # A_b = dM D_b P_b per branch (in place only on a kept copy:
            # without dropout, kept_b is P_b, which is needed below)
            weighted_global = kept_global.mul_(grad_mixed) if keep_global is not None else kept_global * grad_mixed
            weighted_local = kept_local.mul_(grad_mixed) if keep_local is not None else grad_mixed.mul_(kept_local)
            del kept_global, kept_local, grad_mixed
            sum_global = weighted_global.sum(-1, keepdim=True)
            sum_local = weighted_local.sum(-1, keepdim=True)
            grad_gate = None
            if ctx.needs_input_grad[3]:
                grad_gate = sum_local.sub(sum_global).mul_(rescale).sum_to_size(gate.shape).to(gate.dtype)
            # softmax backward per branch, with dP_b = (1 - g or g) D_b dM:
            # dS_b = (1 - g or g) (A_b - P_b sum_keys(A_b))
            grad_global_logits = weighted_global.addcmul_(global_probs, sum_global, value=-1.0)
            grad_local_logits = weighted_local.addcmul_(local_probs, sum_local, value=-1.0)
            del global_probs, local_probs, weighted_global, weighted_local
            gate = gate.float()
            grad_bias = None
            if ctx.needs_input_grad[5]:
                grad_bias = (grad_local_logits * gate).sum_to_size(local.shape).mul_(rescale).to(local.dtype)
            grad_scores = grad_global_logits.lerp_(grad_local_logits, gate).to(query.dtype)
            del grad_global_logits, grad_local_logits
            grad_query = torch.matmul(grad_scores, key).mul_(scale * rescale)
            grad_key = torch.matmul(grad_scores.transpose(-1, -2), query).mul_(scale * rescale)
        return grad_query, grad_key, grad_value, grad_gate, None, grad_bias, None, None


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

    # False: every call through _attend_with_probabilities, which serves
    # output_attentions and score transforms (and tests).
    use_fused_attention: bool = True
    # Training (gradients on) with a mask or bias: TwoBranchAttention, which
    # keeps for backward only what the two softmaxes need. False: two SDPA
    # calls as in prediction (for comparison; more memory).
    memory_saving_training: bool = True
    # Prediction with a boolean mask: the local branch only for the sequences
    # whose mask hides a key (AttentionBatch.local_rows). False: for all of
    # them (for comparison).
    skip_fully_visible: bool = True
    # Prediction on the CPU (float32, no dropout) up to this many pieces
    # (the batch's padded width): the two probability matrices mixed instead
    # of two SDPA calls. The CPU's fused kernel is slow on short rows; the
    # component was 3-13 % faster this way on sentences and texts of up to
    # 111 pieces, and no slower up to 140 (MiniLM, one and two threads,
    # paired batch by batch, docs/performance.md). 0: two SDPA calls at any
    # length.
    materialise_up_to: int = 128

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
            # Training: one score matrix, and only the scores and the
            # boolean keep masks kept for backward.
            if local_mask.dtype == torch.bool:
                local, empty_rows = batch.logit_offsets(torch.float32, local=True), batch.empty_local_rows()
            else:
                local, empty_rows = local_mask, None
            global_offsets = batch.logit_offsets(query.dtype)
            context = TwoBranchAttention.apply(query, key, value, gate, global_offsets, local, empty_rows, dropout)
            return self.merge_heads(context), None
        may_skip = self._may_skip(local_mask, dropout, query, key, value, gate)
        rows = batch.local_rows if may_skip else None
        if self._materialises(query, dropout) and (rows is None or rows.numel() > 0):
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

    def _materialises(self, query: torch.Tensor, dropout: float) -> bool:
        """Whether prediction mixes the two probability matrices (one score
        matrix, two softmaxes, one product with V) instead of calling SDPA
        twice: on the CPU, in float32, without dropout, for at most
        materialise_up_to pieces, where that is faster (docs/performance.md)."""
        return (
            dropout == 0.0
            and query.device.type == "cpu"
            and query.dtype == torch.float32
            and query.shape[-2] <= self.materialise_up_to
            and not torch.is_grad_enabled()
        )

    def _predict_materialised(
        self,
        batch: AttentionBatch,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        local_mask: torch.Tensor,
        gate: torch.Tensor,
    ) -> torch.Tensor:
        """The mixed context of every sequence, (batch, heads, n, head_size),
        from one score matrix: the masks added as offsets, both softmaxes, the
        probabilities mixed in place (the gate is per query row) and one
        product with V."""
        scores = torch.matmul(query * (1.0 / math.sqrt(self.head_size)), key.transpose(-1, -2))
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

    def _may_skip(self, local_mask: torch.Tensor, dropout: float, *tensors: torch.Tensor) -> bool:
        """Whether this prediction call may leave out the local branch of the
        sequences whose boolean mask hides no key (batch.local_rows) and the
        padding after a sequence's last real piece (batch.width_groups). A
        sequence whose mask hides no key gets the global context from its
        local branch, for any gate, unless each branch draws its own
        dropout; with gradients (training) every branch is computed as
        defined. Bias variants are always computed."""
        return not (
            not self.skip_fully_visible
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
