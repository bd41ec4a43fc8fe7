"""LISA's supervision (Strubell et al. 2018): one head of one layer is
trained to attend from each wordpiece to the first piece of its token's
syntactic head, by the cross-entropy of that head's attention distribution
against the parent pieces, added to the batch's auxiliary losses."""
import math
from typing import Optional

import torch
from torch.nn import functional as F

from ..data_classes import IGNORED_TARGET
from .attention_batch import AttentionBatch


def parent_attention_loss(
    batch: AttentionBatch,
    query: torch.Tensor,
    key: torch.Tensor,
    head: int,
    score_bias: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Cross-entropy of the supervised head's global attention (position
    term included) against the parent piece of each piece that has one.

    query, key: the supervised head's projections, (batch, pieces, head_size);
    score_bias: the family's position term, (batch, heads or 1, pieces, pieces).
    """
    scores = query @ key.transpose(-1, -2) / math.sqrt(query.shape[-1])
    if score_bias is not None:
        scores = scores + score_bias[:, head if score_bias.shape[1] > 1 else 0]
    scores = scores.float().masked_fill(~batch.global_mask[:, 0], torch.finfo(torch.float32).min)
    log_probs = scores.log_softmax(-1)
    if batch.parent_attention_targets is None:
        raise ValueError("parent_attention_loss needs the batch's parent_attention_targets")
    targets = batch.parent_attention_targets.flatten()
    # The mean over the pieces that have a parent, 0 when none has, without
    # asking the device whether any has (a host-device synchronisation).
    total = F.nll_loss(log_probs.flatten(0, 1), targets, ignore_index=IGNORED_TARGET, reduction="sum")
    return total / (targets != IGNORED_TARGET).sum().clamp(min=1)
