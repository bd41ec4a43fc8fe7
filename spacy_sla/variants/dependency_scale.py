"""The soft threshold of Li et al. 2021's released code
(spacy-sla.dependency_scale.v1) and its variant `depscale`: the local
branch's scores scaled by 0.5 + 0.5 tanh(tau - D), tau predicted per token
and head from the layer input, D the tree distance from the nearest of
i - 1, i, i + 1 (punctuation and special pieces at 0), and one gate per
head.

Its layer module returns a LocalScoresTransform, a callable from the raw
scaled dot-product scores to the local branch's logits: a multiplication no
additive mask can express.
"""
from typing import Union

import numpy
import torch
from spacy.util import registry
from torch import nn
from transformers import PretrainedConfig

from ..syntax.builders import DocLike, ParseReader, check_count, neighbour_table_rows, parsed_graph, span_bounds
from ..syntax.doc_parses import DocParses
from ..syntax.punctuation import PunctRule, token_punctuation
from .registry import SLA_TRANSFORMER, register_variant

__all__ = ["FAR_DISTANCE", "DependencyScaleLayer", "DependencyScale", "LocalScoresTransform",
           "create_dependency_scale"]

# What the authors' breadth-first search leaves on pairs it does not reach;
# 0.5 + 0.5 * tanh(tau - FAR_DISTANCE) is exactly 0 in float32 for any
# threshold a Linear layer plausibly predicts.
FAR_DISTANCE = 1000.0


class DependencyScale(ParseReader):
    """Distances for the soft threshold of Li et al. 2021's released code
    (the scaling itself is DependencyScaleLayer).

    D(i, j) is the smallest tree distance to j from i or one of its
    neighbouring words (as in the SLA mask), in the undirected dependency
    graph of the Doc; as buckets 0..max_distance, and max_distance + 1 for
    farther pairs and pairs no neighbour reaches (another sentence), which
    the module reads as "unreachable", like the authors' search, which stops
    after 19 hops (the default max_distance). Punctuation keys are at
    distance 0 from every query by `punct_rule` (see syntax/punctuation.py):
    "authors" per wordpiece, set where the buckets become wordpiece buckets
    (syntax_inputs), "spacy" per token here, or "none". Special pieces
    ([CLS], [SEP]) get bucket max_distance + 2, distance 0, in their rows
    and columns (syntax_inputs gives it to pieces without a token).
    """

    name = "spacy-sla.dependency_scale.v1"

    def __init__(
        self, max_distance: int = 19, initial_threshold: float = 5.0, punct_rule: Union[str, PunctRule] = "authors"
    ):
        self.max_distance = check_count(self.name, "max_distance", max_distance, 0)
        self.initial_threshold = float(initial_threshold)
        self.punct_rule = PunctRule.parse(punct_rule, self.name)

    def __repr__(self) -> str:
        return (
            f"DependencyScale(max_distance={self.max_distance}, "
            f"initial_threshold={self.initial_threshold}, punct_rule={self.punct_rule.value!r})"
        )

    @property
    def n_buckets(self) -> int:
        # 0..max_distance, "farther", and one for special pieces
        return self.max_distance + 3

    def build(self, doclike: DocLike, parses: DocParses) -> numpy.ndarray:
        doc, start, end = span_bounds(doclike)
        n_tokens = end - start
        if n_tokens == 0:
            return numpy.zeros((0, 0), dtype=numpy.int16)
        tokens = numpy.arange(start, end)
        # One row per distinct token of the minimum (the span's own tokens and
        # its outer neighbours), after a "farther" row for a missing neighbour.
        rows, left, own, right = neighbour_table_rows(doc, start, end)
        distances = numpy.full((len(rows) + 1, n_tokens), self.max_distance + 1, dtype=numpy.int16)
        distances[1:] = parsed_graph(parses, doc, self).distances(rows, tokens, self.max_distance)
        nearest: numpy.ndarray = numpy.minimum(numpy.minimum(distances[left], distances[own]), distances[right])
        punctuation = token_punctuation(doclike, self.punct_rule)
        if punctuation is not None:
            nearest[:, punctuation] = 0
        return nearest

    def make_layer_bias(self, transformer_config: PretrainedConfig) -> nn.Module:
        return DependencyScaleLayer(
            transformer_config.hidden_size,
            transformer_config.num_attention_heads,
            self.max_distance,
            self.initial_threshold,
            getattr(transformer_config, "initializer_range", 0.02),
        )


class LocalScoresTransform:
    """Multiplies the scaled dot-product scores by `scale` (batch, heads,
    n_pieces, n_pieces). Applied to the scores before padding is masked: a
    zero scale on a masked (-inf) score would give NaN."""

    def __init__(self, scale: torch.Tensor):
        self.scale = scale

    def __call__(self, scores: torch.Tensor) -> torch.Tensor:
        return scores * self.scale.to(scores.dtype)


class DependencyScaleLayer(nn.Module):
    """The soft threshold of Li et al. 2021's released code (their
    DepAttentionScale), for spacy-sla.dependency_scale.v1.

    The local branch's logits are the attention scores scaled by

        0.5 + 0.5 * tanh(tau[h, i] - D[i, j]),
        tau[:, i] = W_tau . tanh(W_d . h_i + b_d) + b_tau,

    a threshold per head predicted from each query's layer input h_i, and D
    the tree distance of the pair (the minimum over the query's neighbours,
    see DependencyScale). W_tau starts at zero and b_tau at
    `initial_threshold` (5.0 in their code), so every query starts with the
    same threshold; W_d is drawn like the transformer's own weights.
    The layer mixes the branches with one gate per head (`n_gates`), as
    their AttentionSelector does.

    Bucket b <= max_distance is distance b, max_distance + 1 ("farther or
    another sentence") is FAR_DISTANCE, max_distance + 2 (special pieces) is
    0. A span whose buckets are all "special" carries no syntax (a Doc
    without a parse under on_missing_parse = "global"): its scale is 1, so
    its local branch is the global attention.
    """

    bucket_distance: torch.Tensor  # a buffer: the distance of each bucket

    def __init__(
        self,
        hidden_size: int,
        n_heads: int,
        max_distance: int,
        initial_threshold: float = 5.0,
        initializer_range: float = 0.02,
    ):
        super().__init__()
        self.n_gates = n_heads
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.threshold = nn.Linear(hidden_size, n_heads)
        nn.init.normal_(self.dense.weight, std=initializer_range)
        nn.init.zeros_(self.dense.bias)
        nn.init.zeros_(self.threshold.weight)
        nn.init.constant_(self.threshold.bias, float(initial_threshold))
        distances = torch.arange(max_distance + 3, dtype=torch.float32)
        distances[max_distance + 1] = FAR_DISTANCE
        distances[max_distance + 2] = 0.0
        self.special_bucket = max_distance + 2
        self.register_buffer("bucket_distance", distances, persistent=False)

    def thresholds(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(batch, n_pieces, hidden) -> tau, (batch, heads, n_pieces)."""
        tau: torch.Tensor = self.threshold(torch.tanh(self.dense(hidden_states)))
        return tau.transpose(1, 2)

    def scale(self, buckets: torch.Tensor, hidden_states: torch.Tensor) -> torch.Tensor:
        """(batch, heads, n_pieces, n_pieces): the factor of each score."""
        distance = self.bucket_distance[buckets][:, None]  # (batch, 1, n, n)
        tau = self.thresholds(hidden_states)[..., None]  # (batch, heads, n, 1)
        scale = 0.5 + 0.5 * torch.tanh(tau - distance.to(tau.dtype))
        has_syntax = (buckets != self.special_bucket).flatten(1).any(1)
        return torch.where(has_syntax[:, None, None, None], scale, torch.ones_like(scale))

    def forward(self, buckets: torch.Tensor, hidden_states: torch.Tensor) -> LocalScoresTransform:
        return LocalScoresTransform(self.scale(buckets, hidden_states))


@registry.misc("spacy-sla.dependency_scale.v1")
def create_dependency_scale(
    max_distance: int = 19, initial_threshold: float = 5.0, punct_rule: str = "authors"
) -> DependencyScale:
    """The authors' soft threshold: the local branch's scores scaled by
    0.5 + 0.5 tanh(tau - D), tau predicted per token and head from the layer
    input, D the tree distance from the nearest of i - 1, i, i + 1, and
    punctuation by `punct_rule` ("authors", "spacy" or "none")."""
    return DependencyScale(max_distance=max_distance, initial_threshold=initial_threshold, punct_rule=punct_rule)


register_variant("depscale", """The authors' soft threshold (their released code): the local branch's scores scaled by 0.5 + 0.5 tanh(tau - D),
tau predicted per token and head from the layer input, D the tree distance from the nearest of i-1, i, i+1
(punctuation and special pieces at 0), and one gate per head.""", SLA_TRANSFORMER + """
[components.transformer.model.mask]
@misc = "spacy-sla.dependency_scale.v1"
max_distance = 19
initial_threshold = 5.0
punct_rule = "authors"
""")
