"""The soft tree-distance bias (spacy-sla.tree_distance_bias.v1) and its
variant `softbias`: each SLA layer learns, per head, one additive bias per
clipped tree distance, initialised to zero so that training starts from
global attention."""
from typing import Optional

import numpy
import torch
from spacy.util import registry
from torch import nn
from torch.nn import functional as F
from transformers import PretrainedConfig

from ..syntax.builders import DocLike, ParseReader, check_count, parsed_graph, span_bounds
from ..syntax.doc_parses import DocParses
from .registry import SLA_TRANSFORMER, register_variant

__all__ = ["TreeDistanceBiasLayer", "TreeDistanceBias", "create_tree_distance_bias"]


class TreeDistanceBias(ParseReader):
    """Clipped tree distances: bucket D(i, j) for D <= max_distance,
    max_distance + 1 for farther pairs and pairs in different sentences
    (and max_distance + 2 for the special pieces, given where the buckets
    become wordpiece buckets)."""

    name = "spacy-sla.tree_distance_bias.v1"

    def __init__(self, max_distance: int = 8):
        self.max_distance = check_count(self.name, "max_distance", max_distance, 0)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(max_distance={self.max_distance})"

    @property
    def n_buckets(self) -> int:
        # 0..max_distance, "farther", and one for special pieces
        return self.max_distance + 3

    def build(self, doclike: DocLike, parses: DocParses) -> numpy.ndarray:
        doc, start, end = span_bounds(doclike)
        if end == start:
            return numpy.zeros((0, 0), dtype=numpy.int16)
        tokens = numpy.arange(start, end)
        graph = parsed_graph(parses, doc, self)
        return graph.distances(tokens, tokens, self.max_distance)

    def make_layer_bias(self, transformer_config: PretrainedConfig) -> nn.Module:
        return TreeDistanceBiasLayer(transformer_config.num_attention_heads, self.n_buckets)


class TreeDistanceBiasLayer(nn.Module):
    """One learned bias per head and distance bucket, initialised to zero so
    that training starts from global attention."""

    def __init__(self, n_heads: int, n_buckets: int):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(n_heads, n_buckets))

    def forward(self, buckets: torch.Tensor, hidden_states: Optional[torch.Tensor] = None) -> torch.Tensor:
        """(batch, n_pieces, n_pieces) bucket ids -> (batch, heads, n_pieces, n_pieces)."""
        return F.embedding(buckets, self.bias.t()).permute(0, 3, 1, 2)


@registry.misc("spacy-sla.tree_distance_bias.v1")
def create_tree_distance_bias(max_distance: int = 8) -> TreeDistanceBias:
    """A learned per-head bias on clipped tree distances, for the local branch."""
    return TreeDistanceBias(max_distance=max_distance)


register_variant("softbias", "Soft tree-distance bias: the local branch adds a learned per-head bias per clipped tree "
                 "distance (zero at start).", SLA_TRANSFORMER + """
[components.transformer.model.mask]
@misc = "spacy-sla.tree_distance_bias.v1"
max_distance = 8
""")
