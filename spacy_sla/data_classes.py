from dataclasses import dataclass
from typing import List

import numpy
import torch


@dataclass
class LocalAttentionMask:
    """The local branch's attention mask for a padded batch of transformer
    spans: visible[s, q, k] is True iff wordpiece q of span s may attend to
    wordpiece k in the local attention.

    Special pieces ([CLS], [SEP], ...) and padding rows and columns are True:
    the padding itself is hidden by the transformer's ordinary attention
    mask, which both branches apply.
    """

    visible: numpy.ndarray  # bool, (n_spans, n_pieces, n_pieces)
    lengths: List[int]  # wordpieces per span, padding excluded

    def __post_init__(self) -> None:
        n_spans, n_rows, n_cols = self.visible.shape
        if n_spans != len(self.lengths) or n_rows != n_cols:
            raise ValueError(
                f"A LocalAttentionMask needs a (n_spans, n_pieces, n_pieces) array "
                f"and one length per span; got shape {self.visible.shape} and "
                f"{len(self.lengths)} lengths."
            )

    def __len__(self) -> int:
        return len(self.lengths)

    def unpadded(self) -> List[numpy.ndarray]:
        """One (n_pieces, n_pieces) matrix per span, padding excluded."""
        return [self.visible[i, :n, :n] for i, n in enumerate(self.lengths)]

    def to_torch(self, device: torch.device) -> torch.Tensor:
        # One host-to-device copy per batch; every layer reuses the tensor.
        return torch.from_numpy(numpy.ascontiguousarray(self.visible)).to(device)
