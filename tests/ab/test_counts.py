"""Per-document counts of the task scorers' metrics, which add up to the
scorers' values on the whole dev set."""
import math
from typing import List, Sequence

import pytest
import spacy
from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.training import Example

from replication.scorers import entity_score, error_detection_counts, textcat_score
from spacy_sla.ab.counts import component_statistics, entity_counts
from spacy_sla.ab.statistics import full_set_value

LABELS = ["NEGATIVE", "POSITIVE"]


@pytest.fixture(scope="module")
def nlp() -> Language:
    return spacy.blank("en")


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
    statistics = component_statistics({"@scorers": "spacy-sla.textcat_scorer.v1"}, examples, {"labels": LABELS})
    counts = statistics["cats_mcc"].counts
    assert counts.shape == (12, 4) and counts.sum(axis=1).tolist() == [1] * 12  # one cell of the 2 x 2 matrix each
    assert counts.sum(axis=0).tolist() == [4, 1, 2, 5]  # rows gold NEGATIVE, POSITIVE; columns predicted
    scores = textcat_score(examples, labels=LABELS)
    assert full_set_value(statistics["cats_accuracy"]) == pytest.approx(9 / 12) == scores["cats_accuracy"]
    expected_mcc = (5 * 4 - 1 * 2) / math.sqrt(6 * 7 * 5 * 6)
    assert full_set_value(statistics["cats_mcc"]) == pytest.approx(expected_mcc) == pytest.approx(scores["cats_mcc"])


def entity_example(nlp: Language, words: List[str], gold: List[str], predicted_words: List[str], predicted: List[tuple]) -> Example:
    """gold: IOB tags over words ("" = missing annotation); predicted:
    (start, end, label) spans over predicted_words."""
    doc = Doc(nlp.vocab, words=predicted_words)
    doc.ents = [Span(doc, start, end, label=label) for start, end, label in predicted]
    reference = Doc(nlp.vocab, words=words, ents=[tag or None for tag in gold] if any(gold) else None)
    return Example(doc, reference)


def test_entity_counts_follow_spacys_exact_match_rules(nlp):
    words = ["Anna", "lives", "in", "New", "York", "."]
    right_and_wrong_type = entity_example(nlp, words, ["B-PER", "O", "O", "B-LOC", "I-LOC", "O"],
                                          words, [(0, 1, "PER"), (3, 5, "ORG")])
    assert entity_counts(right_and_wrong_type) == [1, 1, 1]
    # "NewYork" as one predicted token: the alignment maps it onto gold tokens 3-4, an exact match
    merged = entity_example(nlp, words, ["B-PER", "O", "O", "B-LOC", "I-LOC", "O"],
                            ["Anna", "lives", "in", "NewYork", "."], [(3, 4, "LOC")])
    assert entity_counts(merged) == [1, 0, 1]
    # over gold tokens without entity annotation a prediction is neither right nor wrong
    missing = entity_example(nlp, words, ["B-PER", "O", "O", "", "", "O"], words, [(3, 5, "LOC")])
    assert entity_counts(missing) == [0, 0, 1]
    examples = [right_and_wrong_type, merged, missing]
    statistic = component_statistics({"@scorers": "spacy-sla.entity_scorer.v1"}, examples, {})["ents_f"]
    assert statistic.counts.sum(axis=0).tolist() == [2, 1, 3]
    assert full_set_value(statistic) == pytest.approx(entity_score(examples)["ents_f"]) == pytest.approx(2 * 2 / (2 * 2 + 1 + 3))


def test_error_detection_counts_add_up(nlp):
    examples = []
    for gold, pred in [(["c", "i", "c"], ["c", "i", "i"]), (["i", "c"], ["c", "c"])]:
        doc = Doc(nlp.vocab, words=["w"] * len(pred), tags=pred)
        examples.append(Example(doc, Doc(nlp.vocab, words=["w"] * len(gold), tags=gold)))
    statistic = component_statistics({"@scorers": "spacy-sla.error_detection_scorer.v1"}, examples, {})["ged_f05"]
    assert statistic.counts.tolist() == [[1, 1, 0], [0, 0, 1]]
    assert tuple(statistic.counts.sum(axis=0)) == error_detection_counts(examples, "i")
    precision, recall = 1 / 2, 1 / 2
    assert full_set_value(statistic) == pytest.approx(1.25 * precision * recall / (0.25 * precision + recall))


def test_a_scorer_without_statistics_gets_none(nlp):
    """Its scores are recomputed by the scorer on every draw instead (dev_evaluation)."""
    assert component_statistics({"@scorers": "my.scorer.v1"}, [], {}) == {}
    assert component_statistics(None, [], {}) == {}
