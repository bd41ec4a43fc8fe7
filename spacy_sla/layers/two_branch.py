"""The two branches of a gated syntax-aware layer in training: their
dropout (one uniform draw per element serves both branches' masks) and an
autograd function that keeps for backward only what the two softmaxes
need."""
import math
from typing import Any, Callable, Optional, Tuple

import torch

from .attention_batch import AttentionBatch


def two_branch_attention(
    batch: AttentionBatch,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    gate: torch.Tensor,
    local: torch.Tensor,
    score_bias: Optional[torch.Tensor],
    dropout: float,
) -> torch.Tensor:
    """The mixed context of a gated layer in training, (batch, heads, n,
    head_size), through TwoBranchAttention: one score matrix, and only the
    scores and the boolean keep masks kept for backward. local: the batch's
    boolean local mask or an additive bias (padding keys hidden); gate:
    (batch, n_gates, n, 1); score_bias: the model's position term of the
    scores, or None."""
    if local.dtype == torch.bool:
        local_offsets, empty_rows = batch.logit_offsets(torch.float32, local=True), batch.empty_local_rows()
    else:
        local_offsets, empty_rows = local, None
    global_offsets = batch.logit_offsets(query.dtype)
    if score_bias is not None:
        global_offsets = score_bias.to(query.dtype) + global_offsets
    # torch's Function.apply carries no annotations: it returns what forward returns, the context
    apply: Callable[..., torch.Tensor] = TwoBranchAttention.apply
    return apply(query, key, value, gate, global_offsets, local_offsets, empty_rows, dropout)


def drop_out_pair(
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
    A position term in the global offsets is in both branches' logits: its
    gradient is dS.
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
        ctx: Any,
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
        n), -inf for padding keys, 0 elsewhere (AttentionBatch.logit_offsets),
        or with the model's position term of the scores, that term plus these
        offsets, broadcastable to (batch, heads, n, n), which gets a gradient;
        local: the local branch's additive offsets broadcastable to (batch,
        heads, n, n): -inf where the local mask hides a key (padding
        included), 0 elsewhere, or a bias (padding keys at
        attention_batch.hidden_offset); empty_local_rows: (batch, 1, n, 1)
        bool, the rows that see no key locally, whose local branch is zero
        (as SDPA makes it), or None."""
        scale = 1.0 / math.sqrt(query.shape[-1])
        with torch.autocast(query.device.type, enabled=False):
            # Under autocast the projections arrive in half precision; the
            # softmaxes run in float32, as autocast runs them.
            scores = torch.matmul(query * scale, key.transpose(-1, -2)).add_(global_offsets)
            global_probs, local_probs, _ = TwoBranchAttention._probabilities(scores, local, empty_local_rows)
            keep_masks = drop_out_pair(global_probs, local_probs, dropout)
            keep_global, keep_local = (None, None) if keep_masks is None else keep_masks
            mixed = global_probs.lerp_(local_probs, gate.to(global_probs.dtype))
            del global_probs, local_probs
            output = torch.matmul(mixed.to(value.dtype), value)
            if dropout > 0.0:
                output.mul_(1.0 / (1.0 - dropout))
        ctx.save_for_backward(query, key, value, gate, local, scores, keep_global, keep_local)
        ctx.empty_local_rows = empty_local_rows
        ctx.offsets_shape = global_offsets.shape
        ctx.offsets_dtype = global_offsets.dtype
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
        # (see probabilities.attention_probabilities): none underflows to zeros.
        local_logits = logits + local
        local_probs = torch.softmax(local_logits, -1)
        if empty_local_rows is not None:
            local_probs.masked_fill_(empty_local_rows, 0.0)  # softmax gives NaN there
        return global_probs, local_probs, local_logits

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
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
            grad_offsets = None
            if ctx.needs_input_grad[4]:
                # both branches' logits hold the offsets once: d(offsets) = dS
                grad_offsets = grad_scores.sum_to_size(ctx.offsets_shape).mul(rescale).to(ctx.offsets_dtype)
            grad_query = torch.matmul(grad_scores, key).mul_(scale * rescale)
            grad_key = torch.matmul(grad_scores.transpose(-1, -2), query).mul_(scale * rescale)
        return grad_query, grad_key, grad_value, grad_gate, grad_offsets, grad_bias, None, None

