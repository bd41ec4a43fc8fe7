"""Scorers for the paper's evaluation metrics, registered in spaCy's `scorers`
registry so that a component's config can select them and their keys show up
in `spacy train` / `spacy evaluate` / `nlp.evaluate` results:

* `sla-replication.textcat_scorer.v1`: spaCy's exclusive textcat scores plus
  `cats_accuracy` (SST-2) and `cats_mcc` (CoLA).
* `sla-replication.entity_scorer.v1`: conlleval-style entity P/R/F (CoNLL-2003).
* `sla-replication.error_detection_scorer.v1`: token-level P/R/F0.5 of the
  "incorrect" tag (FCE grammatical error detection) plus `tag_acc`.

`spacy train` only prints the scores named in `[training.score_weights]`, so a
config that wants e.g. `cats_mcc` as a column (or as the model-selection
score) must list it there.
"""
from operator import itemgetter
from typing import Any, Callable, Dict, Iterable, List, Sequence, Tuple

import numpy
from spacy.scorer import Scorer, get_ner_prf
from spacy.training import Example
from spacy.util import registry

ScorerFunction = Callable[..., Dict[str, Any]]


def matthews_corrcoef(confusion: numpy.ndarray) -> float:
    """Matthews correlation coefficient of a K x K confusion matrix (rows:
    gold class, columns: predicted class), in Gorodkin's (2004) R_K form so
    that one formula covers binary and multiclass tasks; for K = 2 it equals
    (tp*tn - fp*fn) / sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn)).

    Undefined (zero denominator: all gold or all predicted labels fall in one
    class, or no items) is reported as 0.0, as scikit-learn (and so the GLUE
    CoLA evaluation) does, so that a constant classifier scores as
    uninformative.
    """
    matrix = numpy.asarray(confusion, dtype=numpy.float64)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"Expected a square 2-d confusion matrix, got shape {matrix.shape}")
    gold_totals = matrix.sum(axis=1)
    pred_totals = matrix.sum(axis=0)
    correct = numpy.trace(matrix)
    total = matrix.sum()
    covariance = correct * total - gold_totals @ pred_totals
    pred_variance = total**2 - pred_totals @ pred_totals
    gold_variance = total**2 - gold_totals @ gold_totals
    denominator = numpy.sqrt(pred_variance * gold_variance)
    if denominator == 0.0:
        return 0.0
    return float(covariance / denominator)


def f_beta(precision: float, recall: float, beta: float) -> float:
    """F_beta, weighting recall beta times as much as precision (beta = 0.5
    favours precision, as GED does because false alarms hurt learners more
    than missed errors). 0.0 when precision and recall are both 0."""
    beta2 = beta * beta
    denominator = beta2 * precision + recall
    if denominator == 0.0:
        return 0.0
    return (1.0 + beta2) * precision * recall / denominator


def f_beta_key(prefix: str, beta: float) -> str:
    """Score key for an F_beta value: `prefix` + "_f" + beta written with the
    shortest float format ("%g") with its decimal point dropped, so that
    beta 0.5 -> "ged_f05", 1 -> "ged_f1", 2 -> "ged_f2", 0.25 -> "ged_f025".
    The key must be stable, because configs name it in score_weights."""
    return f"{prefix}_f{beta:g}".replace(".", "")


def _divide(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 0.0


def cats_confusion_matrix(examples: Iterable[Example], labels: Sequence[str]) -> numpy.ndarray:
    """Confusion matrix of exclusive text classification, rows gold, columns
    predicted, with the argmax label on each side chosen as spaCy's
    `Scorer.score_cats` chooses it (first of equal maxima in dict order, only
    labels in `labels` considered), so that accuracy agrees with spaCy's
    micro-averaged scores. Docs without gold cats carry no annotation and
    are skipped; so are docs without predicted cats, which a text classifier
    never leaves (and on which spaCy's `score_cats` itself fails).
    """
    index = {label: i for i, label in enumerate(labels)}
    confusion = numpy.zeros((len(labels), len(labels)), dtype=numpy.int64)
    for example in examples:
        gold_cats = {k: v for k, v in example.reference.cats.items() if k in index}
        pred_cats = {k: v for k, v in example.predicted.cats.items() if k in index}
        if gold_cats and pred_cats:
            gold_label = max(gold_cats.items(), key=itemgetter(1))[0]
            pred_label = max(pred_cats.items(), key=itemgetter(1))[0]
            confusion[index[gold_label], index[pred_label]] += 1
    return confusion


def cat_labels(examples: Sequence[Example]) -> List[str]:
    """Labels seen in the examples, for standalone calls that pass none
    (a pipeline component always passes its own labels)."""
    found = set()
    for example in examples:
        found.update(example.reference.cats)
        found.update(example.predicted.cats)
    return sorted(found)


def textcat_score(examples: Iterable[Example], **kwargs: Any) -> Dict[str, Any]:
    """spaCy's exclusive-textcat scores (as `spacy.textcat_scorer.v2`) plus
    `cats_accuracy` (SST-2's metric) and `cats_mcc` (CoLA's metric), which
    spaCy does not report. kwargs are those TextCategorizer.score passes
    (labels, threshold, positive_label, ...); `multi_label` defaults to False
    as this scorer is for mutually exclusive classes."""
    scored = list(examples)  # read twice: by spaCy's scorer and by ours
    labels = list(kwargs.pop("labels", None) or cat_labels(scored))
    kwargs.setdefault("multi_label", False)
    scores = Scorer.score_cats(scored, "cats", labels=labels, **kwargs)
    confusion = cats_confusion_matrix(scored, labels)
    scores["cats_accuracy"] = _divide(float(numpy.trace(confusion)), float(confusion.sum()))
    scores["cats_mcc"] = matthews_corrcoef(confusion)
    return scores


def entity_score(examples: Iterable[Example], **kwargs: Any) -> Dict[str, Any]:
    """Entity P/R/F equal to the conlleval script's on fully annotated data:
    an entity counts only on exact span and type match, so a partial overlap
    or a wrong type is both a false positive and a false negative, micro-
    averaged over types, with per-type scores under `ents_per_type`. This is
    spaCy's own NER scoring (`spacy.ner_scorer.v1`), reused so the numbers
    agree with spaCy's; it also ignores predictions over gold tokens whose
    entity annotation is missing, which conlleval data never has. Returns
    None scores (not conlleval's 0) when there are no entities at all."""
    return get_ner_prf(examples, **kwargs)


def error_detection_counts(examples: Iterable[Example], error_tag: str) -> Tuple[int, int, int]:
    """(tp, fp, fn) of `error_tag` over predicted tokens, each compared with
    the gold tag it aligns to, so that the counts stay right when the
    predicted tokenization differs from the reference. Tokens without a
    single gold tag (misaligned, or aligned to gold tokens with different
    tags) or with a missing gold tag have nothing to be compared with and
    are skipped; a gold token split into several predicted tokens counts
    once per predicted token.
    """
    tp = fp = fn = 0
    for example in examples:
        gold_tags = example.get_aligned("TAG", as_string=True)
        for token, gold_tag in zip(example.predicted, gold_tags):
            if not gold_tag:
                continue
            predicted_error = token.tag_ == error_tag
            gold_error = gold_tag == error_tag
            tp += predicted_error and gold_error
            fp += predicted_error and not gold_error
            fn += gold_error and not predicted_error
    return tp, fp, fn


def error_detection_score(
    examples: Iterable[Example], error_tag: str, beta: float, **kwargs: Any
) -> Dict[str, Any]:
    """Token-level P, R and F_beta of the error class, the FCE GED metrics
    (Rei and Yannakoudakis 2016), plus spaCy's `tag_acc` so that training
    logs still show overall tagging accuracy. kwargs are those Tagger.score
    passes, forwarded to spaCy's tag accuracy."""
    scored = list(examples)  # read twice: for the GED counts and for tag_acc
    tp, fp, fn = error_detection_counts(scored, error_tag)
    precision = _divide(tp, tp + fp)
    recall = _divide(tp, tp + fn)
    scores: Dict[str, Any] = {
        "ged_p": precision,
        "ged_r": recall,
        f_beta_key("ged", beta): f_beta(precision, recall, beta),
    }
    scores.update(Scorer.score_token_attr(scored, "tag", **kwargs))
    return scores


@registry.scorers("sla-replication.textcat_scorer.v1")
def make_textcat_scorer() -> ScorerFunction:
    return textcat_score


@registry.scorers("sla-replication.entity_scorer.v1")
def make_entity_scorer() -> ScorerFunction:
    return entity_score


@registry.scorers("sla-replication.error_detection_scorer.v1")
def make_error_detection_scorer(error_tag: str = "i", beta: float = 0.5) -> ScorerFunction:
    """Defaults fit FCE, whose tokens are tagged "c" (correct) or "i"
    (incorrect) and whose standard score is F0.5 of "i"."""
    def score(examples: Iterable[Example], **kwargs: Any) -> Dict[str, Any]:
        return error_detection_score(examples, error_tag, beta, **kwargs)

    return score
