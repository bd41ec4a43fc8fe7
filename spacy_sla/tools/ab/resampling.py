"""How much of a difference between two variants could come from the choice
of evaluation documents: a paired bootstrap over the dev set's documents.

The seed interval (intervals.py) covers the randomness of training on one
fixed dev set. A dev set of 872 sentences is itself a sample: two models
that disagree on a dozen of them differ by a point of accuracy that another
sample of sentences could reverse. Here the documents are resampled (the
same draws for every model, so the comparison stays paired) and every score
is recomputed on each draw from the models' per-document statistics
(score_statistics.py), which works for scores that are not means over
documents (MCC, entity F1, F0.5, macro averages, ROC AUC).
"""
from typing import Any, Dict, Hashable, Iterable, Mapping, Optional, Sequence

import numpy

from .intervals import ALPHA, BETTER, NOT_SHOWN, TOO_FEW, WORSE
from .statistics import bootstrap_weights, statistic_from_json

DRAW_CHUNK = 500  # draws computed at once (memory: draws x documents)


class DrawValues:
    """Every model's value of every score on every draw of the dev
    documents. evaluations: model (any key, e.g. (variant, seed)) -> the
    model's dev evaluation (dev_evaluation.evaluate_model: its number of
    documents and its per-score statistics); keys: the scores needed (all
    by default)."""

    def __init__(self, evaluations: Mapping[Any, Dict[str, Any]], resamples: int, random_seed: int = 0,
                 keys: Optional[Iterable[str]] = None):
        n_documents = {evaluation["documents"] for evaluation in evaluations.values()}
        if len(n_documents) > 1:
            raise ValueError(f"The models were scored on different numbers of documents: {sorted(n_documents)}")
        self.n_documents = n_documents.pop() if n_documents else 0
        self.resamples = resamples
        wanted = None if keys is None else set(keys)
        self.values: Dict[Hashable, Dict[str, numpy.ndarray]] = {model: {} for model in evaluations}
        weights = bootstrap_weights(self.n_documents, resamples, random_seed)
        for model, evaluation in evaluations.items():
            for key, entry in evaluation["statistics"].items():
                if wanted is not None and key not in wanted:
                    continue
                if entry["method"] == "recomputed":  # the scorer itself ran on each draw, in dev_evaluation
                    if (entry["resamples"], entry["random_seed"]) != (resamples, random_seed):
                        raise ValueError(f"{key} was recomputed on other draws ({entry['resamples']} with seed "
                                         f"{entry['random_seed']}); evaluate the models again with these")
                    self.values[model][key] = numpy.array(
                        [numpy.nan if value is None else value for value in entry["draws"]], dtype=float)
                    continue
                statistic = statistic_from_json(entry["statistic"])
                self.values[model][key] = numpy.concatenate([
                    statistic.values(weights[start:start + DRAW_CHUNK]) for start in range(0, resamples, DRAW_CHUNK)])

    def difference(self, variant: str, reference: str, seeds: Sequence[int], key: str,
                   weights: Optional[Dict[str, float]] = None) -> Optional[numpy.ndarray]:
        """Per draw, the mean over seeds of (variant, seed) − (reference,
        seed) of a score; with weights, of the weighted sum of scores
        (spaCy's training score: a score that is None on a draw counts 0;
        scores without statistics, of frozen components, are the same in
        both models and cancel). None where a model lacks the score."""
        per_seed = []
        for seed in seeds:
            ours, theirs = self.values[(variant, seed)], self.values[(reference, seed)]
            if weights is None:
                if key not in ours or key not in theirs:
                    return None
                per_seed.append(ours[key] - theirs[key])
                continue
            total = numpy.zeros(self.resamples)
            for name, weight in weights.items():
                if name in ours and name in theirs:
                    total += weight * (numpy.nan_to_num(ours[name]) - numpy.nan_to_num(theirs[name]))
            per_seed.append(total)
        return numpy.mean(per_seed, axis=0) if per_seed else None


def bootstrap_interval(draws: Optional[numpy.ndarray], observed: Optional[float], resamples: int) -> Dict[str, Any]:
    """The 95% percentile interval of the draws of a difference (NaN draws,
    where a score is undefined, left out), the two-sided p-value (twice the
    smaller share of draws on either side of 0) and a verdict ("better",
    "worse": the interval excludes 0; "not shown")."""
    result: Dict[str, Any] = {"mean": observed, "low": None, "high": None, "p_value": None, "verdict": TOO_FEW,
                              "resamples": resamples}
    if draws is None or observed is None:
        return result
    valid = draws[~numpy.isnan(draws)]
    if len(valid) == 0:
        return result
    low, high = numpy.percentile(valid, [100 * ALPHA / 2, 100 * (1 - ALPHA / 2)])
    p_value = min(1.0, 2 * min(float(numpy.mean(valid <= 0)), float(numpy.mean(valid >= 0))))
    result.update({"low": float(low), "high": float(high), "p_value": p_value, "n_draws": int(len(valid)),
                   "verdict": BETTER if low > 0 else WORSE if high < 0 else NOT_SHOWN})
    return result
