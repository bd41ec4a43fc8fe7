from dataclasses import dataclass
from typing import Dict, List, Optional

import numpy
import torch
from spacy_transformers.data_classes import FullTransformerBatch

IGNORED_TARGET = -100
_INPUT_NAMES = ("local_mask", "local_buckets", "guide_mask", "parent_targets")


@dataclass
class SyntaxInputs:
    """The syntax inputs of a padded batch of transformer spans, at wordpiece
    level; each is None when the model does not use it.

    local_mask: bool (n_spans, n_pieces, n_pieces), True where piece q of
        span s may attend to piece k in the local branch.
    local_buckets: int16 (n_spans, n_pieces, n_pieces), the tree-distance
        bucket of each piece pair, for a learned local bias.
    guide_mask: bool (n_spans, n_pieces, n_pieces), SG-Net's mask.
    parent_targets: int64 (n_spans, n_pieces), the piece each piece's token
        depends on (LISA), IGNORED_TARGET where there is none.

    Special pieces ([CLS], [SEP], ...) see and are seen by everything (their
    own bucket for distances); padding is left to the transformer's ordinary
    attention mask, which every branch applies.
    """

    lengths: List[int]  # wordpieces per span, padding excluded
    local_mask: Optional[numpy.ndarray] = None
    local_buckets: Optional[numpy.ndarray] = None
    guide_mask: Optional[numpy.ndarray] = None
    parent_targets: Optional[numpy.ndarray] = None

    def __post_init__(self) -> None:
        n_spans = len(self.lengths)
        for name in _INPUT_NAMES:
            array = getattr(self, name)
            if array is not None and (array.shape[0] != n_spans or (array.ndim == 3 and array.shape[1] != array.shape[2])):
                raise ValueError(
                    f"SyntaxInputs.{name} must have one (n_pieces, n_pieces) matrix (or row, for "
                    f"parent_targets) per span; got shape {array.shape} for {n_spans} spans."
                )

    def __len__(self) -> int:
        return len(self.lengths)

    def local_matrices(self) -> List[numpy.ndarray]:
        """The local mask (or buckets) of every span, padding excluded."""
        local = self.local_mask if self.local_mask is not None else self.local_buckets
        if local is None:
            return []
        return [local[i, :n, :n] for i, n in enumerate(self.lengths)]

    def locally_restricted(self) -> Optional[numpy.ndarray]:
        """bool (n_spans,): whether the local mask hides some piece from some
        piece of the span (padding excluded: every branch hides it anyway);
        None without a boolean local mask. Where it hides nothing, the local
        branch computes exactly the global attention, which prediction need
        not compute twice (layers/prediction.py)."""
        if self.local_mask is None:
            return None
        restricted = (not self.local_mask[i, :n, :n].all() for i, n in enumerate(self.lengths))
        return numpy.fromiter(restricted, dtype=bool, count=len(self))

    def to_torch(self, device: torch.device) -> Dict[str, Optional[torch.Tensor]]:
        """The forward arguments of SyntaxAwareTransformer: one host-to-device
        copy per input and batch; every layer reuses the tensors. The
        per-span flags of locally_restricted stay on the CPU: the forward
        pass decides from them, without waiting for the device, which rows
        need a local branch, and copies only their index."""
        tensors: Dict[str, Optional[torch.Tensor]] = {}
        for name in _INPUT_NAMES:
            array = getattr(self, name)
            if array is None:
                tensors[name] = None
            else:
                tensor = torch.from_numpy(numpy.ascontiguousarray(array)).to(device)
                tensors[name] = tensor.long() if name == "local_buckets" else tensor
        restricted = self.locally_restricted()
        tensors["local_restricted"] = None if restricted is None else torch.from_numpy(restricted)
        return tensors


@dataclass(frozen=True)
class ParentAttention:
    """LISA-style supervision: head `head` of layer `layer` (None: the middle
    layer) is trained to attend from each token to its syntactic head, with
    the cross-entropy weighted by `weight` added to the transformer's loss."""

    layer: Optional[int] = None
    head: int = 0
    weight: float = 1.0


@dataclass
class SLATransformerBatch(FullTransformerBatch):
    """spacy-transformers' FullTransformerBatch, plus what the batch produced
    besides the transformer output.

    gates: in prediction, the gate values of the SLA layers, (n_sla_layers,
        n_spans, n_pieces), NaN where a span had no local input; None in
        training and without SLA layers.
    auxiliary_loss: in training with a supervised parent head (LISA), the
        weighted parent-attention loss of the batch (its tensor joins the
        backward pass); None otherwise.
    """

    gates: Optional[numpy.ndarray] = None
    auxiliary_loss: Optional[float] = None
