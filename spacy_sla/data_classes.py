"""The model's settings and outputs as data: LISA's ParentAttention and the
batch the model returns. A batch's syntax inputs are SyntaxInputs
(syntax/syntax_inputs.py, where they are built)."""
from dataclasses import dataclass
from typing import Optional

import numpy
from spacy_transformers.data_classes import FullTransformerBatch

# The parent target of a piece that has none (torch's cross-entropy ignore_index).
IGNORED_TARGET = -100


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
    parent_attention_loss: in training with a supervised parent head (LISA), the
        weighted parent-attention loss of the batch (its tensor joins the
        backward pass); None otherwise.
    """

    gates: Optional[numpy.ndarray] = None
    parent_attention_loss: Optional[float] = None
