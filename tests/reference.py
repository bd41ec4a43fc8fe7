"""Slow, obviously correct implementations of the mask rules and of the
gated two-branch attention, straight from their definitions, to check the
vectorised code against."""
import math
from collections import deque
from typing import Callable, Dict, List, Optional, Set, Tuple, Union

import numpy
import torch
from spacy.tokens import Doc


def undirected_neighbours(doc: Doc) -> Dict[int, Set[int]]:
    edges: Dict[int, Set[int]] = {token.i: set() for token in doc}
    for token in doc:
        if token.head.i != token.i:
            edges[token.i].add(token.head.i)
            edges[token.head.i].add(token.i)
    return edges


def hop_distances_from(doc: Doc, source: int) -> Dict[int, int]:
    """Breadth-first search over the undirected dependency forest."""
    edges = undirected_neighbours(doc)
    distances = {source: 0}
    queue = deque([source])
    while queue:
        current = queue.popleft()
        for neighbour in edges[current]:
            if neighbour not in distances:
                distances[neighbour] = distances[current] + 1
                queue.append(neighbour)
    return distances


def within_hops(doc: Doc, token: int, threshold: int) -> Set[int]:
    return {j for j, d in hop_distances_from(doc, token).items() if d <= threshold}


def nearest_word(doc: Doc, i: int, step: int):
    """The nearest token from i in direction step that is not whitespace."""
    k = i + step
    while 0 <= k < len(doc) and doc[k].is_space:
        k += step
    return k if 0 <= k < len(doc) else None


def slow_syntax_mask(doc: Doc, start: int, end: int, threshold: int, punct_visible: bool) -> numpy.ndarray:
    n = end - start
    mask = numpy.zeros((n, n), dtype=bool)
    for i in range(start, end):
        visible: Set[int] = set()
        for k in (nearest_word(doc, i, -1), i, nearest_word(doc, i, +1)):
            if k is not None:
                visible |= within_hops(doc, k, threshold)
        for j in range(start, end):
            mask[i - start, j - start] = j in visible or (punct_visible and doc[j].is_punct)
    return mask


def slow_tree_distances(doc: Doc, max_distance: int) -> List[List[int]]:
    n = len(doc)
    table = [[max_distance + 1] * n for _ in range(n)]
    for i in range(n):
        for j, d in hop_distances_from(doc, i).items():
            if d <= max_distance:
                table[i][j] = d
    return table


def ancestors_or_self(doc: Doc, token: int) -> Set[int]:
    """Follow heads up from token, each token once (also on a head cycle,
    where spaCy's Token.ancestors would not stop)."""
    seen = {token}
    current = token
    while doc[current].head.i != current and doc[current].head.i not in seen:
        current = doc[current].head.i
        seen.add(current)
    return seen


def slow_ancestor_mask(doc: Doc, start: int, end: int) -> numpy.ndarray:
    n = end - start
    mask = numpy.zeros((n, n), dtype=bool)
    for i in range(start, end):
        allowed = ancestors_or_self(doc, i)
        for j in range(start, end):
            mask[i - start, j - start] = j in allowed
    return mask


def slow_no_neighbour_mask(doc: Doc, start: int, end: int, threshold: int, punct_visible: bool) -> numpy.ndarray:
    n = end - start
    mask = numpy.zeros((n, n), dtype=bool)
    for i in range(start, end):
        visible = within_hops(doc, i, threshold)
        for j in range(start, end):
            mask[i - start, j - start] = j in visible or (punct_visible and doc[j].is_punct)
    return mask


def two_branch_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    real_keys: torch.Tensor,
    gate: Optional[torch.Tensor] = None,
    local: Union[None, torch.Tensor, Callable[[torch.Tensor], torch.Tensor]] = None,
    score_bias: Optional[torch.Tensor] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """SLA's attention from its definition, with plain masked attention per
    branch: the scores q.k / sqrt(d) (plus the model's position term), the
    global branch a softmax over the real keys (real_keys: (batch, 1, 1, n)
    bool), the local branch a softmax over the keys the boolean local mask
    shows, or of the scores plus the local bias, or of the transformed
    scores (padding keys hidden in each), a row that sees no key locally
    giving zeros; the contexts mixed by the gate (batch, n_gates, n, 1):
    g * local + (1 - g) * global. Without a local input, the global branch
    alone. Returns the context (batch, heads, n, d) and the mixed
    probabilities; autograd differentiates both."""
    scores = query @ key.transpose(-1, -2) / math.sqrt(query.shape[-1])
    if score_bias is not None:
        scores = scores + score_bias
    hidden = torch.finfo(scores.dtype).min  # a finite "hidden": an empty row stays finite, and its gradient too
    global_probs = scores.masked_fill(~real_keys, hidden).softmax(-1)
    if local is None:
        return global_probs @ value, global_probs
    if callable(local) and not isinstance(local, torch.Tensor):
        local_probs = local(scores).masked_fill(~real_keys, hidden).softmax(-1)
    elif local.dtype == torch.bool:
        visible = local & real_keys
        local_probs = scores.masked_fill(~visible, hidden).softmax(-1)
        local_probs = torch.where(visible.any(-1, keepdim=True), local_probs, torch.zeros_like(local_probs))
    else:
        local_probs = (scores + local).masked_fill(~real_keys, hidden).softmax(-1)
    gate = gate.to(scores.dtype)
    context = gate * (local_probs @ value) + (1 - gate) * (global_probs @ value)
    return context, gate * local_probs + (1 - gate) * global_probs


def reference_gated_attention(batch, query, key, value, gate, local, score_bias, dropout: float) -> torch.Tensor:
    """two_branch_attention with the signature of the production's gated
    attention (spacy_sla.layers.GatedAttention): given to a
    SyntaxAwareTransformer, its layers compute every local branch this way.
    It has no dropout: the tests that use it set the layers' to 0."""
    if dropout > 0.0:
        raise ValueError("the reference attention has no dropout; set the layers' dropout_prob to 0")
    return two_branch_attention(query, key, value, batch.global_mask, gate, local, score_bias)[0]
