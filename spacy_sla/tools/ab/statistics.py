"""Per-document statistics of any score a spaCy pipeline reports, so that a
paired bootstrap over the dev documents can recompute the score for every
draw without running the scorer again.

A spaCy score is computed from all dev documents at once. Most are a ratio
of sums (P/R/F over spans, token accuracies, micro and macro averages over
labels: each document adds counts, the score is a function of their sums);
those get one row of counts per document (`CountStatistic`). Ranking scores
(ROC AUC) are not: they get each document's predicted score and gold value
per label (`AucStatistic`) and are recomputed from the drawn documents. A
draw is a vector of document multiplicities (`bootstrap_weights`), so a
score on a draw is the score of the dev set with each document repeated
that many times.

The counts mirror spaCy's own scorers (`spacy.scorer.Scorer` and the
scoring functions of its components, spaCy 3.8) and those registered with
counts.register_scorer_statistics, and take the keyword arguments the component passes to
its scorer (`Pipe.score`: the component's cfg and labels). Every statistic
is checked against the score the scorer reported on the full set before it
is used (`matches`); a score no statistic covers (a third-party scorer) is
recomputed by its own scorer for every draw (tools/ab/evaluation.py).
"""
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Tuple

import numpy

# spaCy's PRFScore adds this to every denominator.
_EPSILON = 1e-100

Counts = numpy.ndarray  # (documents, k) int64 for one score family
Sums = numpy.ndarray  # (draws, k) float: the counts summed with a draw's weights


def _prf(sums: Sums) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    """spaCy's PRFScore precision, recall and F1 of (tp, fp, fn) columns."""
    tp, fp, fn = sums[:, 0], sums[:, 1], sums[:, 2]
    precision = tp / (tp + fp + _EPSILON)
    recall = tp / (tp + fn + _EPSILON)
    return precision, recall, 2 * (precision * recall) / (precision + recall + _EPSILON)


def _none_if_empty(values: numpy.ndarray, sums: Sums) -> numpy.ndarray:
    """NaN where spaCy reports None: a PRF score with no counts at all."""
    return numpy.where(sums.sum(axis=1) > 0, values, numpy.nan)


def _precision(sums: Sums, **_: Any) -> numpy.ndarray:
    return _none_if_empty(_prf(sums)[0], sums)


def _recall(sums: Sums, **_: Any) -> numpy.ndarray:
    return _none_if_empty(_prf(sums)[1], sums)


def _f1(sums: Sums, **_: Any) -> numpy.ndarray:
    return _none_if_empty(_prf(sums)[2], sums)


def _per_label(sums: Sums) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    """P, R and F1 per label of (tp, fp, fn) per label, label-major columns:
    each of shape (draws, labels)."""
    draws = sums.shape[0]
    by_label = sums.reshape(draws, -1, 3)
    tp, fp, fn = by_label[:, :, 0], by_label[:, :, 1], by_label[:, :, 2]
    precision = tp / (tp + fp + _EPSILON)
    recall = tp / (tp + fn + _EPSILON)
    return precision, recall, 2 * (precision * recall) / (precision + recall + _EPSILON)


def _macro(which: int) -> Callable[..., numpy.ndarray]:
    """The mean over labels of P (0), R (1) or F (2), divided as score_cats
    divides it: by the number of labels + 1e-100."""
    def score(sums: Sums, **_: Any) -> numpy.ndarray:
        values = _per_label(sums)[which]
        return values.sum(axis=1) / (values.shape[1] + _EPSILON)

    return score


def _micro(which: int) -> Callable[..., numpy.ndarray]:
    """Micro P/R/F over labels: the per-label counts summed first (never
    None in score_cats)."""
    def score(sums: Sums, **_: Any) -> numpy.ndarray:
        draws = sums.shape[0]
        return _prf(sums.reshape(draws, -1, 3).sum(axis=1))[which]

    return score


def _label_f(sums: Sums, *, label: int, **_: Any) -> numpy.ndarray:
    return _per_label(sums)[2][:, label]


def _confusion_accuracy(sums: Sums, **_: Any) -> numpy.ndarray:
    side = int(round(sums.shape[1] ** 0.5))
    matrices = sums.reshape(-1, side, side)
    total = matrices.sum(axis=(1, 2))
    correct = numpy.trace(matrices, axis1=1, axis2=2)
    return numpy.divide(correct, total, out=numpy.zeros_like(correct, dtype=float), where=total > 0)


def _mcc(sums: Sums, **_: Any) -> numpy.ndarray:
    """training.scorers.matthews_corrcoef (Gorodkin's R_K, 0 where undefined)
    for every draw at once."""
    side = int(round(sums.shape[1] ** 0.5))
    matrices = sums.reshape(-1, side, side)
    gold_totals, pred_totals = matrices.sum(axis=2), matrices.sum(axis=1)
    correct = numpy.trace(matrices, axis1=1, axis2=2)
    total = matrices.sum(axis=(1, 2))
    covariance = correct * total - (gold_totals * pred_totals).sum(axis=1)
    pred_variance = total**2 - (pred_totals * pred_totals).sum(axis=1)
    gold_variance = total**2 - (gold_totals * gold_totals).sum(axis=1)
    denominator = numpy.sqrt(pred_variance * gold_variance)
    return numpy.divide(covariance, denominator, out=numpy.zeros_like(denominator), where=denominator > 0)


def _zero_division(numerator: numpy.ndarray, denominator: numpy.ndarray) -> numpy.ndarray:
    """training.scorers._divide: 0 where the denominator is 0."""
    return numpy.divide(numerator, denominator, out=numpy.zeros_like(numerator, dtype=float), where=denominator > 0)


def _ged(which: str) -> Callable[..., numpy.ndarray]:
    """P, R and F_beta of (tp, fp, fn), 0 where a ratio is 0/0: the error
    detection scores of the paper's replication (replication/scorers.py)."""
    def score(sums: Sums, beta: float = 0.5, **_: Any) -> numpy.ndarray:
        tp, fp, fn = sums[:, 0], sums[:, 1], sums[:, 2]
        precision, recall = _zero_division(tp, tp + fp), _zero_division(tp, tp + fn)
        if which == "p":
            return precision
        if which == "r":
            return recall
        denominator = beta * beta * precision + recall
        return _zero_division((1 + beta * beta) * precision * recall, denominator)

    return score


# formula name -> the score of every draw from the draws' summed counts
FORMULAS: Dict[str, Callable[..., numpy.ndarray]] = {
    "precision": _precision,
    "recall": _recall,
    "f1": _f1,
    "micro_precision": _micro(0),
    "micro_recall": _micro(1),
    "micro_f1": _micro(2),
    "macro_precision": _macro(0),
    "macro_recall": _macro(1),
    "macro_f1": _macro(2),
    "label_f1": _label_f,
    "confusion_accuracy": _confusion_accuracy,
    "mcc": _mcc,
    "ged_precision": _ged("p"),
    "ged_recall": _ged("r"),
    "ged_f_beta": _ged("f"),
}


@dataclass
class CountStatistic:
    """A score that is a function (FORMULAS[formula]) of per-document counts
    summed over the documents."""

    formula: str
    counts: Counts
    params: Dict[str, Any] = field(default_factory=dict)
    kind: str = "counts"

    def values(self, weights: numpy.ndarray) -> numpy.ndarray:
        """The score for each row of document multiplicities (draws, documents)."""
        return FORMULAS[self.formula](weights @ self.counts, **self.params)

    def to_json(self) -> Dict[str, Any]:
        return {"kind": self.kind, "formula": self.formula, "params": self.params, "counts": self.counts.tolist()}


@dataclass
class AucStatistic:
    """spaCy's macro ROC AUC over the labels of a text classifier: for each
    label the ROC AUC of the documents that have a gold value (the area
    under the trapezoidal ROC curve, which equals the Mann-Whitney statistic
    with ties counted half), 0 for a label whose drawn documents are all of
    one class, summed and divided by the number of labels + 1e-100; with
    `label`, one label's AUC instead."""

    scores: numpy.ndarray  # (documents, labels) predicted score
    golds: numpy.ndarray  # (documents, labels) gold value, NaN where missing
    label: Optional[int] = None
    kind: str = "auc"

    def values(self, weights: numpy.ndarray) -> numpy.ndarray:
        labels = range(self.scores.shape[1]) if self.label is None else [self.label]
        per_label = [self._label_auc(weights, index) for index in labels]
        total = numpy.sum(per_label, axis=0)
        return total / (self.scores.shape[1] + _EPSILON) if self.label is None else total

    def _label_auc(self, weights: numpy.ndarray, label: int) -> numpy.ndarray:
        has_gold = ~numpy.isnan(self.golds[:, label])
        scores, golds = self.scores[has_gold, label], self.golds[has_gold, label]
        drawn = weights[:, has_gold].astype(float)
        # documents grouped by their predicted score, in increasing order; ties share a group
        groups, group_of = numpy.unique(scores, return_inverse=True)
        n_groups = len(groups)
        draws = drawn.shape[0]
        offsets = (numpy.arange(draws) * n_groups)[:, None]
        index = (group_of[None, :] + offsets).ravel()
        positive = (golds == 1.0)[None, :]
        pos = numpy.bincount(index, (drawn * positive).ravel(), draws * n_groups).reshape(draws, n_groups)
        neg = numpy.bincount(index, (drawn * ~positive).ravel(), draws * n_groups).reshape(draws, n_groups)
        below = numpy.cumsum(neg, axis=1) - neg
        area = (pos * (below + 0.5 * neg)).sum(axis=1)
        n_pos, n_neg = pos.sum(axis=1), neg.sum(axis=1)
        return numpy.where((n_pos > 0) & (n_neg > 0), area / numpy.maximum(n_pos * n_neg, _EPSILON), 0.0)

    def to_json(self) -> Dict[str, Any]:
        golds = [[None if numpy.isnan(value) else float(value) for value in row] for row in self.golds]
        return {"kind": self.kind, "label": self.label, "scores": self.scores.tolist(), "golds": golds}


Statistic = Any  # CountStatistic or AucStatistic: both have values(weights) and to_json()


def statistic_from_json(data: Dict[str, Any]) -> Statistic:
    if data["kind"] == "counts":
        return CountStatistic(data["formula"], numpy.array(data["counts"], dtype=numpy.int64).reshape(
            len(data["counts"]), -1), dict(data.get("params", {})))
    if data["kind"] == "auc":
        golds = numpy.array([[numpy.nan if value is None else value for value in row] for row in data["golds"]],
                            dtype=float)
        return AucStatistic(numpy.array(data["scores"], dtype=float).reshape(golds.shape), golds, data.get("label"))
    raise ValueError(f"Unknown statistic kind {data['kind']!r}")


def full_set_value(statistic: Statistic) -> Optional[float]:
    """The statistic's score on the whole set (every document once); None
    where spaCy would report None."""
    n_documents = statistic.counts.shape[0] if isinstance(statistic, CountStatistic) else statistic.scores.shape[0]
    value = float(statistic.values(numpy.ones((1, n_documents)))[0])
    return None if numpy.isnan(value) else value


def restrict_statistic(statistic: Statistic, selected: numpy.ndarray) -> Statistic:
    """The statistic over the selected documents alone (a boolean per document)."""
    if isinstance(statistic, CountStatistic):
        return CountStatistic(statistic.formula, statistic.counts[selected], dict(statistic.params))
    return AucStatistic(statistic.scores[selected], statistic.golds[selected], statistic.label)


def matches(statistic: Statistic, reported: Any, tolerance: float = 1e-9) -> bool:
    """Whether the statistic gives the score the scorer reported on the full set."""
    value = full_set_value(statistic)
    if reported is None or value is None:
        return reported is None and value is None
    return isinstance(reported, (int, float)) and abs(value - float(reported)) <= tolerance


def bootstrap_weights(n_documents: int, resamples: int, random_seed: int = 0) -> numpy.ndarray:
    """(resamples, n_documents) multiplicities of the documents in draws with
    replacement. The same arguments give the same draws in any process, so
    that models scored apart are still paired by draw."""
    rng = numpy.random.default_rng(random_seed)
    weights = numpy.empty((resamples, n_documents), dtype=numpy.int32)
    for row in range(resamples):
        weights[row] = numpy.bincount(rng.integers(0, n_documents, n_documents), minlength=n_documents)
    return weights
