"""How prediction computes a gated layer, and the measured constants behind
each of its choices (docs/performance.md): up to which width it mixes the
two probability matrices instead of calling SDPA twice, which sequences
need a local branch at all (those whose boolean mask hides a key), and, on
the CPU, in which groups of similar width they go, each cut to its longest
sequence's pieces (the fused call's cost grows with the square of the
width, and strided spans are padded to the batch's longest); the encoder
puts each group in a block of the batch (width_order).

The constants are fixed: production computes one way per situation, and
the benchmarks time the alternatives with code of their own
(performance/attention_alternatives.py)."""
from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy
import torch

# Prediction on the CPU in float32 up to this many pieces (the batch's
# padded width) mixes the two probability matrices (one score matrix, two
# softmaxes, one product with V) instead of calling SDPA twice: the CPU's
# fused kernel is slow on short rows. The component was 3-13 % faster this
# way on sentences and texts of up to 111 pieces, and no slower up to 140
# (MiniLM, one and two threads, paired batch by batch;
# performance/prediction_paths_cost.py).
MATERIALISE_UP_TO = 128
# Prediction gathers the sequences that need a local branch while they are
# at most this share of the batch; above it, the index copies of the
# queries, keys, values and outputs cost more than the rows they spare, and
# the batched call runs on every sequence (MiniLM on the CPU,
# performance/local_rows_cost.py).
GATHER_MAX_SHARE = 0.75
# Prediction on the CPU computes the local branch in at most this many
# groups of sequences of similar width, each cut to its longest sequence,
MAX_WIDTH_GROUPS = 3
# when that spares at least this share of the fused call's work.
WIDTH_GROUPS_MIN_SAVING = 0.15


def materialises(query: torch.Tensor) -> bool:
    """Whether prediction (no dropout, no gradients) mixes the probability
    matrices for these queries, (batch, heads, n_pieces, head_size): on the
    CPU, in float32, up to MATERIALISE_UP_TO pieces."""
    return query.device.type == "cpu" and query.dtype == torch.float32 and query.shape[-2] <= MATERIALISE_UP_TO


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


def rows_needing_local(restricted: torch.Tensor, device: torch.device) -> Optional[torch.Tensor]:
    """AttentionBatch.local_rows: the index of the sequences flagged in
    `restricted`, or None when more than GATHER_MAX_SHARE of them are."""
    n_restricted = int(restricted.sum())
    if n_restricted == len(restricted) or n_restricted > GATHER_MAX_SHARE * len(restricted):
        return None
    return restricted.nonzero().flatten().to(device)


def width_groups(real: torch.Tensor, restricted: torch.Tensor) -> Optional[Tuple[WidthGroup, ...]]:
    """AttentionBatch.width_groups: the restricted sequences sorted by
    width (the position after their last real piece) and cut into at most
    MAX_WIDTH_GROUPS groups so that the sum of count x width**2 is
    smallest, if that is at most 1 - WIDTH_GROUPS_MIN_SAVING of what one
    call computes (the restricted rows, or all of them, at the padded
    width)."""
    rows = restricted.nonzero().flatten()
    if len(rows) == 0:
        return None
    n_pieces = real.shape[1]
    real_rows = real.index_select(0, rows.to(real.device)).cpu()
    widths = (n_pieces - real_rows.flip(1).to(torch.uint8).argmax(1)).numpy()
    widths[~real_rows.any(1).numpy()] = n_pieces
    order = numpy.argsort(widths, kind="stable")
    sorted_widths = widths[order].astype(numpy.float64)
    n_plain = len(rows) if rows_needing_local(restricted, real.device) is not None else len(restricted)
    cost, ends = cheapest_cuts(sorted_widths, MAX_WIDTH_GROUPS)
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
    groups = width_groups(attention_mask.bool(), restricted.to("cpu", torch.bool))
    if groups is None or all(group.block is not None for group in groups):
        return None
    grouped = torch.cat([group.rows.cpu() for group in groups])
    others = torch.ones(len(restricted), dtype=torch.bool)
    others[grouped] = False
    return torch.cat([grouped, others.nonzero().flatten()]).to(attention_mask.device)


def cheapest_cuts(widths: numpy.ndarray, max_groups: int) -> Tuple[float, List[int]]:
    """The ends of at most `max_groups` consecutive groups of the sorted
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
    for _ in range(max_groups - 1):
        total = cost[:, None] + group_cost  # [s, e]: below s as before, s to e - 1 one more group
        starts.append(total.argmin(axis=0))
        cost = total.min(axis=0)
        if cost[n] < best_cost:
            ends = [n]
            for step in reversed(starts):
                ends.insert(0, int(step[ends[0]]))
            best_cost, best_ends = float(cost[n]), ends
    return best_cost, [int(covered[end]) for end in best_ends]

