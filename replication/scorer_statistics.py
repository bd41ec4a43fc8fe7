"""The per-document statistics of the replication's scorers, registered with
the A/B library (spacy_sla.tools.ab.register_scorer_statistics) on import, so that
the bootstrap of `spacy sla ab` and of `python -m replication bootstrap`
recomputes their scores from counts instead of rerunning them on every draw.
The formulas they name (mcc, confusion_accuracy, ged_*) are the A/B
library's (spacy_sla/tools/ab/statistics.py)."""
from typing import Any, Callable, Dict, Sequence

import numpy
from spacy.training import Example

from spacy_sla.tools.ab import (
    CountStatistic,
    cats_statistics,
    ner_statistics,
    register_scorer_statistics,
    token_attr_statistics,
)

from .scorers import cat_labels, cats_confusion_matrix, error_detection_counts, f_beta_key

Statistics = Dict[str, Any]  # score key -> CountStatistic or AucStatistic


def textcat_statistics(examples: Sequence[Example], **kwargs: Any) -> Statistics:
    """sla-replication.textcat_scorer.v1's scores: spaCy's exclusive textcat scores
    with the labels the scorer infers where the component gives none, plus
    cats_accuracy and cats_mcc from each document's confusion matrix."""
    kwargs = {**kwargs, "labels": list(kwargs.get("labels") or cat_labels(examples))}
    kwargs.setdefault("multi_label", False)
    result = cats_statistics(None)(examples, **kwargs)
    confusion = numpy.array([cats_confusion_matrix([example], kwargs["labels"]).ravel()
                             for example in examples], dtype=numpy.int64)
    result["cats_accuracy"] = CountStatistic("confusion_accuracy", confusion)
    result["cats_mcc"] = CountStatistic("mcc", confusion)
    return result


def error_detection_statistics(error_tag: str = "i", beta: float = 0.5) -> Callable[..., Statistics]:
    """sla-replication.error_detection_scorer.v1's scores, with its arguments."""
    def statistics(examples: Sequence[Example], **kwargs: Any) -> Statistics:
        counts = numpy.array([error_detection_counts([example], error_tag) for example in examples],
                             dtype=numpy.int64).reshape(-1, 3)
        result = token_attr_statistics("tag")(examples, **kwargs)
        result["ged_p"] = CountStatistic("ged_precision", counts)
        result["ged_r"] = CountStatistic("ged_recall", counts)
        result[f_beta_key("ged", beta)] = CountStatistic("ged_f_beta", counts, {"beta": beta})
        return result

    return statistics


register_scorer_statistics("sla-replication.textcat_scorer.v1", lambda: textcat_statistics)
register_scorer_statistics("sla-replication.entity_scorer.v1", lambda: ner_statistics)
register_scorer_statistics("sla-replication.error_detection_scorer.v1", error_detection_statistics)
