"""Gate values per spaCy token: the mean over each token's wordpieces."""
from typing import Dict, List

import numpy
from spacy.tokens import Doc

from .data_classes import SLATransformerBatch

__all__ = ["GATES_ATTR"]

GATES_ATTR = "sla_gates"


def install_gate_extension() -> None:
    if not Doc.has_extension(GATES_ATTR):
        Doc.set_extension(GATES_ATTR, default=None)


def token_gates(batch: SLATransformerBatch, gates: numpy.ndarray, docs: List[Doc]) -> List[numpy.ndarray]:
    """(n_sla_layers, n_tokens) per Doc: the mean gate over the token's
    wordpieces (over all spans that hold the token), from the batch's
    `gates`; NaN for tokens without wordpieces (whitespace) and where the
    gate was not used."""
    n_layers = gates.shape[0]
    flat_gates = gates.reshape(n_layers, -1)
    lengths = numpy.asarray(batch.align.lengths, dtype=numpy.int64)
    pieces = numpy.asarray(batch.align.dataXd, dtype=numpy.int64).reshape(-1)
    token_of_pair = numpy.repeat(numpy.arange(len(lengths)), lengths)
    sums = numpy.zeros((n_layers, len(lengths)), dtype=numpy.float64)
    numpy.add.at(sums.T, token_of_pair, flat_gates[:, pieces].T)
    with numpy.errstate(invalid="ignore", divide="ignore"):
        means = (sums / lengths).astype(numpy.float32)  # 0/0 -> NaN for tokens without pieces
    # The alignment numbers the tokens of the Docs in the order the spans
    # first reach them; Docs without spans (empty Docs) have no rows.
    offsets: Dict[int, int] = {}
    n_seen = 0
    for doc_spans in batch.spans:
        for span in doc_spans:
            if id(span.doc) not in offsets:
                offsets[id(span.doc)] = n_seen
                n_seen += len(span.doc)
    result = []
    for doc in docs:
        if id(doc) in offsets:
            start = offsets[id(doc)]
            result.append(means[:, start : start + len(doc)])
        else:
            result.append(numpy.full((n_layers, len(doc)), numpy.nan, dtype=numpy.float32))
    return result
