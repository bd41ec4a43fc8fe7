"""How much of a difference between two variants could come from the choice
of evaluation sentences: a paired bootstrap over the dev set's documents.

The seed interval of `compare` (intervals.py) covers the randomness of
training on one fixed dev set. A dev set of 872 sentences is itself a sample:
two models that disagree on a dozen of them differ by a point of accuracy
that another sample of sentences could reverse. This module resamples the
documents (the same draw for every model, so the comparison stays paired)
and recomputes the task's metric from per-document counts, which works for
metrics that are not means over documents (MCC, entity F1, F0.5): each
document contributes counts (a confusion matrix, tp/fp/fn), the metric is
computed from their sums.
"""
from typing import Any, Callable, Dict, Iterable, List, Sequence

import numpy
from spacy.training import Example

from ..training.scorers import (
    _divide,
    cats_confusion_matrix,
    error_detection_counts,
    f_beta,
    matthews_corrcoef,
)
from .intervals import ALPHA, BETTER, NOT_SHOWN, TOO_FEW, WORSE

FCE_ERROR_TAG = "i"  # the tag of spacy-sla.error_detection_scorer.v1's default, FCE's "incorrect"


def entity_counts(example: Example) -> List[int]:
    """(tp, fp, fn) of exact-match entities in one example, counted as
    spaCy's `get_ner_prf` counts them (and so `spacy-sla.entity_scorer.v1`):
    predicted spans over gold tokens with missing entity annotation are
    neither right nor wrong, an example without gold entity annotation
    counts nothing."""
    if not example.y.has_annotation("ENT_IOB"):
        return [0, 0, 0]
    golds = {(entity.label_, entity.start, entity.end) for entity in example.y.ents}
    tp = fp = 0
    align_x2y = example.alignment.x2y
    for entity in example.x.ents:
        indices = align_x2y[entity.start:entity.end]
        if not len(indices):
            continue
        if all(token.ent_iob != 0 for token in example.y[indices[0]:indices[-1] + 1]):
            key = (entity.label_, int(indices[0]), int(indices[-1]) + 1)
            if key in golds:
                tp += 1
                golds.remove(key)
            else:
                fp += 1
    return [tp, fp, len(golds)]


def _cats_statistics(labels: Sequence[str]) -> Callable[[Example], List[int]]:
    return lambda example: cats_confusion_matrix([example], labels).ravel().tolist()


def _error_detection_statistics(example: Example) -> List[int]:
    return list(error_detection_counts([example], FCE_ERROR_TAG))


def _confusion(counts: numpy.ndarray) -> numpy.ndarray:
    """The K x K confusion matrix that _cats_statistics flattened."""
    side = int(round(len(counts) ** 0.5))
    return counts.reshape(side, side)


def _accuracy(counts: numpy.ndarray) -> float:
    return _divide(float(numpy.trace(_confusion(counts))), float(counts.sum()))


def _mcc(counts: numpy.ndarray) -> float:
    return matthews_corrcoef(_confusion(counts))


def _f_score(beta: float) -> Callable[[numpy.ndarray], float]:
    def score(counts: numpy.ndarray) -> float:
        tp, fp, fn = (float(value) for value in counts)
        return f_beta(_divide(tp, tp + fp), _divide(tp, tp + fn), beta)

    return score


# metric -> the metric computed from the sum of the documents' counts
METRIC_FROM_COUNTS: Dict[str, Callable[[numpy.ndarray], float]] = {
    "cats_accuracy": _accuracy,
    "cats_mcc": _mcc,
    "ents_f": _f_score(1.0),
    "ged_f05": _f_score(0.5),
}


def example_statistics(examples: Iterable[Example], metric: str, labels: Sequence[str] = ()) -> numpy.ndarray:
    """One row of counts per example (rows in the examples' order) from
    which `metric_from_counts(metric, rows.sum(axis=0))` is the metric of
    the whole set, as the task's scorer computes it. labels: the text
    classifier's labels (for the cats metrics)."""
    if metric not in METRIC_FROM_COUNTS:
        raise ValueError(f"No per-document counts for the metric {metric}; supported: {', '.join(METRIC_FROM_COUNTS)}")
    if metric.startswith("cats_"):
        counts_of: Callable[[Example], List[int]] = _cats_statistics(labels)
    elif metric == "ents_f":
        counts_of = entity_counts
    else:
        counts_of = _error_detection_statistics
    return numpy.array([counts_of(example) for example in examples], dtype=numpy.int64)


def metric_from_counts(metric: str, counts: numpy.ndarray) -> float:
    return METRIC_FROM_COUNTS[metric](numpy.asarray(counts))


def paired_bootstrap(
    variant: Dict[int, numpy.ndarray],
    reference: Dict[int, numpy.ndarray],
    metric: str,
    resamples: int = 10000,
    random_seed: int = 0,
) -> Dict[str, Any]:
    """The mean over seeds of metric(variant) − metric(reference), and its
    95% percentile interval over `resamples` draws of the documents with
    replacement, the same draw for every seed and both variants. The
    arguments map a seed to its per-document counts (example_statistics),
    documents in the same order for every model. The two-sided p-value is
    twice the smaller share of draws on either side of 0."""
    seeds = sorted(set(variant) & set(reference))
    result: Dict[str, Any] = {"seeds": seeds, "n": len(seeds), "resamples": resamples, "mean": None,
                              "low": None, "high": None, "p_value": None, "verdict": TOO_FEW}
    if not seeds:
        return result
    n_documents = {len(variant[seed]) for seed in seeds} | {len(reference[seed]) for seed in seeds}
    if len(n_documents) != 1:
        raise ValueError(f"The models were scored on different numbers of documents: {sorted(n_documents)}")
    documents = n_documents.pop()

    def mean_difference(weights: numpy.ndarray) -> float:
        return float(numpy.mean([
            metric_from_counts(metric, weights @ variant[seed]) - metric_from_counts(metric, weights @ reference[seed])
            for seed in seeds
        ]))

    observed = mean_difference(numpy.ones(documents, dtype=numpy.int64))
    rng = numpy.random.default_rng(random_seed)
    # A draw as each document's multiplicity: its counts' weight in the sums.
    draws = numpy.array([
        mean_difference(numpy.bincount(rng.integers(0, documents, documents), minlength=documents))
        for _ in range(resamples)
    ])
    low, high = numpy.percentile(draws, [100 * ALPHA / 2, 100 * (1 - ALPHA / 2)])
    p_value = min(1.0, 2 * min(float(numpy.mean(draws <= 0)), float(numpy.mean(draws >= 0))))
    verdict = BETTER if low > 0 else WORSE if high < 0 else NOT_SHOWN
    result.update({"mean": observed, "low": float(low), "high": float(high), "p_value": p_value, "verdict": verdict})
    return result
