"""The inputs of one forward pass of syntax-aware attention, and what its
layers report back (gates and auxiliary losses): an AttentionBatch belongs
to that call. The wrapping SyntaxAwareTransformer makes one per forward pass
and binds it to its wrapped attention modules while its encoder runs
(SyntaxAwareTransformer.attending), from where each module passes it on as
an argument; no layer builds or copies a mask."""
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple, Union

import torch

from .prediction_schedule import WidthGroup, rows_needing_local
from .prediction_schedule import width_groups as group_by_width

# A local branch's input: a bool mask or an additive bias for SDPA, or a
# transform of the scaled dot-product scores into the local logits.
LocalInput = Union[torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]


def hidden_offset(dtype: torch.dtype) -> float:
    """The finite additive offset that hides a key from a softmax in `dtype`:
    half the type's lowest value. The type's lowest value itself is not safe
    in float16: a score below -16 added to it rounds to -inf, and a row
    whose keys are all hidden that way (a padding query outside a sliding
    window) turns to NaN, which reaches every row through the values. Half
    of it leaves room for any score and for a second such offset, and still
    gives a hidden key the weight exp(offset - visible max) = 0."""
    return torch.finfo(dtype).min / 2


@dataclass
class AttentionBatch:
    """The syntax inputs of one forward pass, and its per-call outputs.

    global_mask: (batch, 1, 1, n_pieces) bool, the keys that are not padding.
    local_mask: (batch, 1, n_pieces, n_pieces) bool, or None.
    local_buckets: (batch, n_pieces, n_pieces) tree-distance bucket ids, or None.
    parent_attention_targets: (batch, n_pieces) the piece each piece's token depends
        on, IGNORED_TARGET where there is none; or None.
    record_gates: whether local branches append their gate values to `gates`
        ((batch, n_pieces) per call, NaN where the batch has no local input)
        and themselves to `gate_modules` (a module shared by several depths
        appends once per depth).
    parent_attention_losses: appended to by supervised heads during the pass.
    restricted: with a boolean local mask, (batch,) bool on the CPU: the
        sequences whose mask hides some real key from some real query; None
        without one.
    local_rows: with a boolean local mask, the (k,) index of the restricted
        sequences (on the mask's device; empty when none is), which are
        the only ones whose local branch prediction computes; None: every
        sequence's (no mask, or more than GATHER_MAX_SHARE of the batch
        restricted; prediction_schedule.py).
    width_groups: on the CPU, the restricted sequences in groups of similar
        length (WidthGroup), when computing their local branch group by
        group, cut to each group's width, spares enough of the work; None
        otherwise.
    """

    global_mask: torch.Tensor
    local_mask: Optional[torch.Tensor] = None
    local_buckets: Optional[torch.Tensor] = None
    parent_attention_targets: Optional[torch.Tensor] = None
    record_gates: bool = False
    gates: List[torch.Tensor] = field(default_factory=list)
    gate_modules: List[torch.nn.Module] = field(default_factory=list, repr=False)
    parent_attention_losses: List[torch.Tensor] = field(default_factory=list)
    restricted: Optional[torch.Tensor] = None
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
        parent_attention_targets: Optional[torch.Tensor] = None,
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
            return cls(keys, local, local_buckets, parent_attention_targets, record_gates)
        restricted = _restricted_sequences(local, keys, local_restricted)
        groups = group_by_width(real, restricted) if real.device.type == "cpu" else None
        return cls(
            keys, local, local_buckets, parent_attention_targets, record_gates, restricted=restricted,
            local_rows=rows_needing_local(restricted, local.device), width_groups=groups,
        )

    def global_attn_mask(self, dtype: torch.dtype, score_bias: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The global branch's SDPA mask: the padding mask, or with a
        position term of the scores, the term with padding keys hidden
        (hidden_offset)."""
        if score_bias is None:
            return self.global_mask
        return score_bias.to(dtype).masked_fill(~self.global_mask, hidden_offset(dtype))

    def boolean_local_mask(self) -> torch.Tensor:
        """local_mask, for the paths that run only with one."""
        if self.local_mask is None:
            raise ValueError("This attention batch has no boolean local mask.")
        return self.local_mask

    def groups(self) -> Tuple[WidthGroup, ...]:
        """width_groups, for the paths that run only with them."""
        if self.width_groups is None:
            raise ValueError("This attention batch has no width groups.")
        return self.width_groups

    def empty_local_rows(self) -> Optional[torch.Tensor]:
        """The (batch, 1, n_pieces, 1) rows that see no key locally, or None
        when there is none (the masks the builders make always show each
        piece itself). Made once per forward pass for all layers."""
        if self._empty_local_rows is None:
            empty_rows = (~self.boolean_local_mask()).all(-1, keepdim=True)
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
            visible = self.boolean_local_mask() if local else self.global_mask
            offsets = torch.zeros(visible.shape, dtype=dtype, device=visible.device)
            offsets.masked_fill_(~visible, float("-inf"))
            self._logit_offsets[(dtype, local)] = offsets
        return offsets

    def additive_local_mask(self, dtype: torch.dtype, gathered: bool = False) -> Optional[torch.Tensor]:
        """local_mask as (batch, 1, n_pieces, n_pieces) of `dtype` (with
        `gathered`, of the sequences of local_rows only): 0 where visible,
        hidden_offset(dtype) where hidden; None when a row sees no key (SDPA
        gives such a row zeros with a boolean mask, not with an additive
        one). As every row sees a key, a hidden key's weight is
        exp(offset - visible max) = 0 exactly, as with the boolean mask."""
        if self.empty_local_rows() is not None:
            return None
        mask = self._additive_local_masks.get((dtype, gathered))
        if mask is None:
            visible = self.boolean_local_mask()
            if gathered:
                if self.local_rows is None:
                    raise ValueError("This attention batch gathers no rows for the local branch.")
                visible = visible.index_select(0, self.local_rows)
            mask = torch.zeros(visible.shape, dtype=dtype, device=visible.device)
            mask.masked_fill_(~visible, hidden_offset(dtype))
            self._additive_local_masks[(dtype, gathered)] = mask
        return mask

    def group_local_mask(self, dtype: torch.dtype, index: int) -> torch.Tensor:
        """local_mask of width_groups[index]: its sequences, cut to its
        width, additive (as additive_local_mask) or, where a row sees no
        key, boolean. Made once per forward pass for all layers."""
        mask = self._group_masks.get((dtype, index))
        if mask is None:
            group = self.groups()[index]
            visible = group.take(self.boolean_local_mask())[..., : group.width]
            if self.empty_local_rows() is None:
                mask = torch.zeros(visible.shape, dtype=dtype, device=visible.device)
                mask.masked_fill_(~visible, hidden_offset(dtype))
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

