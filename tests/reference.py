"""Slow, obviously correct implementations of the mask rules, straight from
their definitions, to check the vectorised code against."""
from collections import deque
from typing import Dict, List, Set

import numpy
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
