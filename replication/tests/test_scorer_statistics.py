"""The per-document statistics of the replication's scorers, registered with
the A/B library: they add up to each scorer's value on the whole set and
give a draw's value on the drawn documents."""
import math
import random
from typing import List, Sequence

import numpy
import pytest
import spacy
from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.training import Example

import replication.scorer_statistics  # noqa: F401  (registers the statistics)
from replication.scorers import (
    entity_score,
    error_detection_counts,
    make_error_detection_scorer,
    make_textcat_scorer,
    textcat_score,
)
from spacy_sla.tools.ab.counts import component_statistics
from spacy_sla.tools.ab.statistics import bootstrap_weights, full_set_value, statistic_from_json

LABELS = ["NEGATIVE", "POSITIVE"]


@pytest.fixture(scope="module")
def nlp() -> Language:
    return spacy.blank("en")


def _numeric(scores):
    return {key: value for key, value in scores.items() if isinstance(value, float)}


def random_cats_examples(nlp: Language, n_docs: int = 40, seed: int = 0) -> List[Example]:
    rng = random.Random(seed)
    examples = []
    for _ in range(n_docs):
        predicted = nlp.make_doc("a film")
        score = rng.random()
        predicted.cats = {"POSITIVE": score, "NEGATIVE": 1 - score}
        gold = rng.random() < 0.4
        examples.append(Example.from_dict(predicted, {"cats": {"POSITIVE": float(gold), "NEGATIVE": float(not gold)}}))
    return examples


def error_examples(nlp: Language, n_docs: int = 30, seed: int = 1) -> List[Example]:
    rng = random.Random(seed)
    words = "the cat saw a dog in the big park near Paris and Berlin .".split()
    examples = []
    for _ in range(n_docs):
        chosen = words[: rng.randint(3, len(words))]
        gold = Doc(nlp.vocab, words=chosen, tags=[rng.choice("cci") for _ in chosen])
        predicted = Doc(nlp.vocab, words=chosen, tags=[rng.choice("ci") for _ in chosen])
        examples.append(Example(predicted, gold))
    return examples


def test_the_textcat_statistics_give_the_scorers_values_on_the_whole_set_and_on_a_draw(nlp):
    examples = random_cats_examples(nlp)
    kwargs = {"labels": LABELS, "threshold": 0.0}
    reported = _numeric(make_textcat_scorer()(examples, **kwargs))
    statistics = component_statistics({"@scorers": "sla-replication.textcat_scorer.v1"}, examples, kwargs)
    assert {"cats_accuracy", "cats_mcc", "cats_macro_auc"} <= set(reported) <= set(statistics)
    for key, value in reported.items():
        assert full_set_value(statistic_from_json(statistics[key].to_json())) == pytest.approx(value, abs=1e-12), key
    for draw in bootstrap_weights(len(examples), 3, random_seed=7):
        drawn = [examples[i] for i in numpy.repeat(numpy.arange(len(examples)), draw)]
        for key, value in _numeric(make_textcat_scorer()(drawn, **kwargs)).items():
            assert statistics[key].values(draw[None, :])[0] == pytest.approx(value, abs=1e-12), key


def test_the_error_detection_statistics_take_the_scorers_arguments(nlp):
    examples = error_examples(nlp)
    for error_tag, beta in (("i", 0.5), ("c", 1.0)):
        reported = _numeric(make_error_detection_scorer(error_tag, beta)(examples))
        statistics = component_statistics({"@scorers": "sla-replication.error_detection_scorer.v1", "error_tag": error_tag,
                                           "beta": beta}, examples, {})
        assert set(reported) == {"ged_p", "ged_r", "ged_f05" if beta == 0.5 else "ged_f1", "tag_acc"}
        for key, value in reported.items():
            assert full_set_value(statistics[key]) == pytest.approx(value, abs=1e-12), key


def cats_examples(nlp: Language, pairs: Sequence[Sequence[str]]) -> List[Example]:
    """One example per (gold, predicted) label pair."""
    examples = []
    for gold, pred in pairs:
        predicted = nlp.make_doc("a film")
        predicted.cats = {label: 0.9 if label == pred else 0.1 for label in LABELS}
        examples.append(Example.from_dict(predicted, {"cats": {label: float(label == gold) for label in LABELS}}))
    return examples


def test_cats_counts_add_up_to_the_scorers_accuracy_and_mcc(nlp):
    pairs = [("POSITIVE", "POSITIVE")] * 5 + [("POSITIVE", "NEGATIVE")] * 2 + [("NEGATIVE", "NEGATIVE")] * 4 + [("NEGATIVE", "POSITIVE")]
    examples = cats_examples(nlp, pairs)
    statistics = component_statistics({"@scorers": "sla-replication.textcat_scorer.v1"}, examples, {"labels": LABELS})
    counts = statistics["cats_mcc"].counts
    assert counts.shape == (12, 4) and counts.sum(axis=1).tolist() == [1] * 12  # one cell of the 2 x 2 matrix each
    assert counts.sum(axis=0).tolist() == [4, 1, 2, 5]  # rows gold NEGATIVE, POSITIVE; columns predicted
    scores = textcat_score(examples, labels=LABELS)
    assert full_set_value(statistics["cats_accuracy"]) == pytest.approx(9 / 12) == scores["cats_accuracy"]
    expected_mcc = (5 * 4 - 1 * 2) / math.sqrt(6 * 7 * 5 * 6)
    assert full_set_value(statistics["cats_mcc"]) == pytest.approx(expected_mcc) == pytest.approx(scores["cats_mcc"])


def test_the_entity_scorer_has_spacys_entity_statistics(nlp):
    words = ["Anna", "lives", "in", "New", "York", "."]
    doc = Doc(nlp.vocab, words=words)
    doc.ents = [Span(doc, 0, 1, label="PER"), Span(doc, 3, 5, label="ORG")]
    examples = [Example(doc, Doc(nlp.vocab, words=words, ents=["B-PER", "O", "O", "B-LOC", "I-LOC", "O"]))]
    statistic = component_statistics({"@scorers": "sla-replication.entity_scorer.v1"}, examples, {})["ents_f"]
    assert statistic.counts.tolist() == [[1, 1, 1]]
    assert full_set_value(statistic) == pytest.approx(entity_score(examples)["ents_f"]) == pytest.approx(0.5)


def test_error_detection_counts_add_up(nlp):
    examples = []
    for gold, pred in [(["c", "i", "c"], ["c", "i", "i"]), (["i", "c"], ["c", "c"])]:
        doc = Doc(nlp.vocab, words=["w"] * len(pred), tags=pred)
        examples.append(Example(doc, Doc(nlp.vocab, words=["w"] * len(gold), tags=gold)))
    statistic = component_statistics({"@scorers": "sla-replication.error_detection_scorer.v1"}, examples, {})["ged_f05"]
    assert statistic.counts.tolist() == [[1, 1, 0], [0, 0, 1]]
    assert tuple(statistic.counts.sum(axis=0)) == error_detection_counts(examples, "i")
    precision, recall = 1 / 2, 1 / 2
    assert full_set_value(statistic) == pytest.approx(1.25 * precision * recall / (0.25 * precision + recall))
