"""The bootstrap over dev documents: the paired resampling of per-document
counts."""
from typing import Sequence

import numpy
import pytest

import spacy_sla.tools.cli  # noqa: F401  (registers `sla` on spaCy's app)
from spacy_sla.tools.ab.resampling import DrawValues, bootstrap_interval
from spacy_sla.tools.ab.statistics import CountStatistic, full_set_value

LABELS = ["NEGATIVE", "POSITIVE"]



def accuracy_counts(correct: Sequence[bool]) -> numpy.ndarray:
    """Per-document 2 x 2 confusion cells of a binary classifier whose gold
    class is always POSITIVE."""
    return numpy.array([[0, 0, 0, 1] if right else [0, 0, 1, 0] for right in correct], dtype=numpy.int64)


def evaluation(counts: numpy.ndarray) -> dict:
    """A model's dev evaluation as dev_evaluation writes it, with accuracy's statistic alone."""
    return {"documents": len(counts), "statistics": {
        "cats_accuracy": {"method": "counts", "statistic": CountStatistic("confusion_accuracy", counts).to_json()}}}


def paired_bootstrap(variant: dict, reference: dict, resamples: int, random_seed: int = 0) -> dict:
    models = {**{("variant", seed): evaluation(counts) for seed, counts in variant.items()},
              **{("reference", seed): evaluation(counts) for seed, counts in reference.items()}}
    draws = DrawValues(models, resamples, random_seed)
    seeds = sorted(variant)
    observed = numpy.mean([full_set_value(CountStatistic("confusion_accuracy", variant[seed]))
                           - full_set_value(CountStatistic("confusion_accuracy", reference[seed])) for seed in seeds])
    return bootstrap_interval(draws.difference("variant", "reference", seeds, "cats_accuracy"), observed, resamples)


def test_identical_models_differ_by_nothing_in_every_draw():
    counts = accuracy_counts([True, False, True, True])
    result = paired_bootstrap({0: counts, 1: counts}, {0: counts, 1: counts}, resamples=200)
    assert result["mean"] == 0 and result["low"] == 0 and result["high"] == 0
    assert result["p_value"] == 1.0 and result["verdict"] == "not shown"


def test_the_bootstrap_interval_matches_the_normal_approximation():
    # 400 documents; the variant is right on 40 more of them than the reference, wrong on none more:
    # the per-document differences are Bernoulli(0.1), so the mean's sd is sqrt(0.1 * 0.9 / 400) = 0.015.
    reference = accuracy_counts([False] * 40 + [True] * 360)
    variant = accuracy_counts([True] * 400)
    result = paired_bootstrap({0: variant}, {0: reference}, resamples=4000, random_seed=1)
    assert result["mean"] == pytest.approx(0.1)
    assert result["low"] == pytest.approx(0.1 - 1.96 * 0.015, abs=0.004)
    assert result["high"] == pytest.approx(0.1 + 1.96 * 0.015, abs=0.004)
    assert result["verdict"] == "better" and result["p_value"] == 0.0
    reversed_result = paired_bootstrap({0: reference}, {0: variant}, resamples=4000, random_seed=1)
    assert reversed_result["verdict"] == "worse" and reversed_result["high"] == pytest.approx(-result["low"])


def test_seeds_share_each_draw_of_the_documents():
    # seed 0: the variant gains on document 0, seed 1: it loses on document 0. With a shared draw the
    # mean over seeds is 0 in every draw; independent draws would scatter it.
    right, wrong = accuracy_counts([True, True, True]), accuracy_counts([False, True, True])
    result = paired_bootstrap({0: right, 1: wrong}, {0: wrong, 1: right}, resamples=300)
    assert result["low"] == result["high"] == 0


def test_models_scored_on_different_documents_are_refused():
    with pytest.raises(ValueError, match="different numbers of documents"):
        paired_bootstrap({0: accuracy_counts([True])}, {0: accuracy_counts([True, False])}, resamples=10)
