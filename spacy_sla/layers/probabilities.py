"""Syntax-aware attention with its probabilities materialised: what serves
output_attentions (the mixed probabilities are returned) and the local
modules that transform the scores (no additive mask can express them), in
training and in prediction alike."""
import math
from typing import Optional, Tuple

import torch
from torch.nn import functional as F

from .attention_batch import AttentionBatch, LocalInput


def attention_probabilities(
    batch: AttentionBatch,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    local: Optional[LocalInput],
    gate: Optional[torch.Tensor],
    dropout: float,
    score_bias: Optional[torch.Tensor] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """The context (batch, heads, n, head_size) and the attention
    probabilities (batch, heads, n, n) from one score matrix, a softmax per
    branch. local: the local branch's boolean mask, additive bias or score
    transform, or None for global attention alone; gate: (batch, n_gates,
    n, 1) with a local branch. The gate is per query row, so mixing the
    probabilities equals mixing the contexts, and one product with the
    values serves both branches. Each branch draws its own dropout."""
    scores = (query @ key.transpose(-1, -2)).mul_(1.0 / math.sqrt(query.shape[-1]))
    if score_bias is not None:
        scores = scores + score_bias
    # A transform sees the scores before padding is masked (-inf * 0 is NaN).
    local_scores = None if local is None or isinstance(local, torch.Tensor) else local(scores)
    scores = scores.masked_fill(~batch.global_mask, float("-inf"))  # every row has a real key
    probs = scores.softmax(-1)
    training = dropout > 0.0
    if local is None:
        probs = F.dropout(probs, dropout, training)
        return probs @ value, probs
    if gate is None:
        raise ValueError("A local branch is mixed in by its gate: attention_probabilities needs one")
    if local_scores is not None:
        local_probs = local_scores.masked_fill(~batch.global_mask, float("-inf")).softmax(-1)
    elif isinstance(local, torch.Tensor) and local.dtype == torch.bool:
        # Normalised by the largest visible score, not the row's: when
        # every visible score lies far below the row maximum (~87 in
        # fp32, ~17 in fp16), exponents shifted by the row maximum all
        # underflow to zero. The builders' masks show each piece itself
        # (padding rows see every real key); a row that sees no key gets
        # zeros, as on the other paths, where softmax gives NaN.
        local_probs = scores.masked_fill(~local, float("-inf")).softmax(-1)
        empty_rows = batch.empty_local_rows()
        if empty_rows is not None:
            local_probs = local_probs.masked_fill(empty_rows, 0.0)
    elif isinstance(local, torch.Tensor):
        local_probs = (scores + local).softmax(-1)
    else:
        raise TypeError(f"The local branch's input is a tensor or a transform of the scores, not {type(local)}")
    probs = torch.lerp(
        F.dropout(probs, dropout, training), F.dropout(local_probs, dropout, training), gate.to(probs.dtype)
    )
    return probs @ value, probs
