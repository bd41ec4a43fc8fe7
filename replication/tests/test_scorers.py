import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy
import pytest
import spacy
from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.training import Example
from spacy.util import registry

from replication.scorers import f_beta, f_beta_key, matthews_corrcoef

Entity = Tuple[int, int, str]


@pytest.fixture(scope="module")
def nlp() -> Language:
    return spacy.blank("en")


def cats_example(nlp: Language, gold: Optional[str], pred: str, labels: Sequence[str]) -> Example:
    """A doc whose gold class is `gold` (None: no gold cats) and whose
    predicted argmax is `pred`."""
    predicted = nlp.make_doc("some text")
    predicted.cats = {label: 0.8 if label == pred else 0.1 for label in labels}
    gold_cats = {} if gold is None else {label: float(label == gold) for label in labels}
    return Example.from_dict(predicted, {"cats": gold_cats})


def examples_from_confusion(nlp: Language, confusion: List[List[int]], labels: Sequence[str]) -> List[Example]:
    """confusion[g][p] docs with gold labels[g] and predicted labels[p]."""
    return [
        cats_example(nlp, labels[g], labels[p], labels)
        for g, row in enumerate(confusion)
        for p, count in enumerate(row)
        for _ in range(count)
    ]


# tp=6, fn=1 (gold POS row), fp=2, tn=3 (gold NEG row).
# MCC = (tp*tn - fp*fn) / sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn))
#     = (18 - 2) / sqrt(8 * 7 * 5 * 4) = 16 / sqrt(1120) = 4 / sqrt(70) = 0.478091...
BINARY = [[6, 1], [2, 3]]
BINARY_MCC = 4 / math.sqrt(70)

# Rows gold, columns predicted. Gorodkin: s = 14 items, c = 9 correct,
# gold totals t = (5, 6, 3), predicted totals p = (6, 5, 3).
# (c*s - t.p) / sqrt((s^2 - p.p)(s^2 - t.t)) = (126 - 69) / sqrt((196 - 70)(196 - 70))
#     = 57 / 126 = 19 / 42 = 0.452380...
THREE_CLASS = [[4, 1, 0], [2, 3, 1], [0, 1, 2]]
THREE_CLASS_MCC = 19 / 42


def test_binary_mcc_by_hand():
    assert matthews_corrcoef(numpy.array(BINARY)) == pytest.approx(BINARY_MCC)


def test_three_class_mcc_by_hand():
    assert matthews_corrcoef(numpy.array(THREE_CLASS)) == pytest.approx(THREE_CLASS_MCC)


def test_mcc_extremes():
    assert matthews_corrcoef(numpy.array([[3, 0, 0], [0, 4, 0], [0, 0, 5]])) == pytest.approx(1.0)
    assert matthews_corrcoef(numpy.array([[0, 4], [5, 0]])) == pytest.approx(-1.0)


@pytest.mark.parametrize(
    "confusion",
    [
        [[5, 0], [0, 0]],  # gold and predictions all one class
        [[3, 0], [2, 0]],  # constant prediction
        [[0, 3], [0, 2]],  # constant prediction of the other class
        [[0, 0], [0, 0]],  # no items
    ],
)
def test_undefined_mcc_is_zero(confusion: List[List[int]]):
    assert matthews_corrcoef(numpy.array(confusion)) == 0.0


def test_mcc_rejects_non_square_matrix():
    with pytest.raises(ValueError):
        matthews_corrcoef(numpy.zeros((2, 3)))


def test_f_beta():
    # (1 + 0.25) * (2/3) * (1/2) / (0.25 * 2/3 + 1/2) = (5/12) / (2/3) = 5/8
    assert f_beta(2 / 3, 1 / 2, 0.5) == pytest.approx(5 / 8)
    assert f_beta(2 / 3, 1 / 2, 1.0) == pytest.approx(2 * (1 / 3) / (7 / 6))  # harmonic mean 4/7
    assert f_beta(0.0, 0.0, 0.5) == 0.0


@pytest.mark.parametrize("beta,key", [(0.5, "ged_f05"), (1.0, "ged_f1"), (2, "ged_f2"), (0.25, "ged_f025")])
def test_f_beta_key(beta: float, key: str):
    assert f_beta_key("ged", beta) == key


def test_textcat_scorer_binary(nlp: Language):
    score = registry.scorers.get("sla-replication.textcat_scorer.v1")()
    spacy_score = registry.scorers.get("spacy.textcat_scorer.v2")()
    examples = examples_from_confusion(nlp, BINARY, ["POS", "NEG"])
    scores = score(examples, labels=("POS", "NEG"), threshold=0.0, positive_label="POS")
    assert scores["cats_accuracy"] == pytest.approx(9 / 12)
    assert scores["cats_mcc"] == pytest.approx(BINARY_MCC)
    expected = spacy_score(examples, labels=("POS", "NEG"), threshold=0.0, positive_label="POS")
    assert {key: scores[key] for key in expected} == expected
    # positive_label reached spaCy: cats_score is F(POS) = 2*6 / (2*6 + 2 + 1) = 12/15.
    assert scores["cats_score"] == pytest.approx(12 / 15)


def test_textcat_scorer_three_classes_infers_labels(nlp: Language):
    score = registry.scorers.get("sla-replication.textcat_scorer.v1")()
    scores = score(examples_from_confusion(nlp, THREE_CLASS, ["A", "B", "C"]))
    assert scores["cats_accuracy"] == pytest.approx(9 / 14)
    assert scores["cats_mcc"] == pytest.approx(THREE_CLASS_MCC)


def test_textcat_skips_docs_without_gold(nlp: Language):
    score = registry.scorers.get("sla-replication.textcat_scorer.v1")()
    labels = ["POS", "NEG"]
    examples = [
        cats_example(nlp, "POS", "POS", labels),
        cats_example(nlp, "NEG", "POS", labels),
        cats_example(nlp, "NEG", "NEG", labels),
        cats_example(nlp, None, "NEG", labels),
    ]
    scores = score(examples, labels=labels)
    # Scored: [[1, 0], [1, 1]] (tp 1, fn 0, fp 1, tn 1): accuracy 2/3,
    # MCC = (1*1 - 1*0) / sqrt(2 * 1 * 2 * 1) = 1/2.
    assert scores["cats_accuracy"] == pytest.approx(2 / 3)
    assert scores["cats_mcc"] == pytest.approx(1 / 2)


def test_textcat_scorer_in_pipeline():
    pipeline = spacy.blank("en")
    textcat = pipeline.add_pipe("textcat", config={"scorer": {"@scorers": "sla-replication.textcat_scorer.v1"}})
    examples = examples_from_confusion(pipeline, BINARY, ["POS", "NEG"])
    for label in ("POS", "NEG"):
        textcat.add_label(label)
    pipeline.initialize(lambda: examples)
    scores = textcat.score(examples)
    assert scores["cats_accuracy"] == pytest.approx(9 / 12)
    assert scores["cats_mcc"] == pytest.approx(BINARY_MCC)
    evaluated = pipeline.evaluate(examples)
    assert 0.0 <= evaluated["cats_accuracy"] <= 1.0
    assert -1.0 <= evaluated["cats_mcc"] <= 1.0


def ner_example(nlp: Language, text: str, gold: List[Entity], pred: List[Entity]) -> Example:
    predicted = nlp.make_doc(text)
    predicted.ents = [Span(predicted, start, end, label=label) for start, end, label in pred]
    offsets = [(predicted[s:e].start_char, predicted[s:e].end_char, label) for s, e, label in gold]
    return Example.from_dict(predicted, {"entities": offsets})


def conlleval_examples(nlp: Language) -> List[Example]:
    """Token spans [start, end).
    Doc 1: PER[0,2) right; LOC[4,6) cuts gold LOC[4,7) short -> 1 fp LOC + 1 fn LOC.
    Doc 2: ORG[0,1) right; PER[3,4) inside gold PER[2,4) -> fp PER + fn PER;
           ORG[5,6) where gold has LOC[5,6) -> fp ORG + fn LOC.
    Doc 3: PER[0,1) right; LOC[2,3) spurious -> fp LOC.
    """
    return [
        ner_example(
            nlp,
            "John Smith lives in New York City .",
            [(0, 2, "PER"), (4, 7, "LOC")],
            [(0, 2, "PER"), (4, 6, "LOC")],
        ),
        ner_example(
            nlp,
            "Apple hired Tim Cook in California .",
            [(0, 1, "ORG"), (2, 4, "PER"), (5, 6, "LOC")],
            [(0, 1, "ORG"), (3, 4, "PER"), (5, 6, "ORG")],
        ),
        ner_example(nlp, "Mary visited Paris .", [(0, 1, "PER")], [(0, 1, "PER"), (2, 3, "LOC")]),
    ]


def assert_conlleval_scores(scores: Dict[str, object]):
    # tp = 3 (PER d1, ORG d2, PER d3), fp = 4 (LOC d1, PER d2, ORG d2, LOC d3), fn = 3 (LOC d1, PER d2, LOC d2).
    # conlleval: precision 3/7 = 42.86%, recall 3/6 = 50.00%, FB1 = 2PR/(P+R) = 6/13 = 46.15.
    assert scores["ents_p"] == pytest.approx(3 / 7)
    assert scores["ents_r"] == pytest.approx(1 / 2)
    assert scores["ents_f"] == pytest.approx(6 / 13)
    # PER: tp 2, fp 1, fn 1 -> 2/3, 2/3, 2/3. LOC: tp 0, fp 2, fn 2 -> 0, 0, 0.
    # ORG: tp 1, fp 1, fn 0 -> P 1/2, R 1, F 2/3.
    per_type = scores["ents_per_type"]
    assert per_type["PER"] == pytest.approx({"p": 2 / 3, "r": 2 / 3, "f": 2 / 3})
    assert per_type["LOC"] == pytest.approx({"p": 0.0, "r": 0.0, "f": 0.0})
    assert per_type["ORG"] == pytest.approx({"p": 1 / 2, "r": 1.0, "f": 2 / 3})


def test_entity_scorer_matches_conlleval_by_hand(nlp: Language):
    score = registry.scorers.get("sla-replication.entity_scorer.v1")()
    assert_conlleval_scores(score(conlleval_examples(nlp)))


def test_entity_scorer_in_pipeline():
    pipeline = spacy.blank("en")
    ner = pipeline.add_pipe("ner", config={"scorer": {"@scorers": "sla-replication.entity_scorer.v1"}})
    for label in ("PER", "LOC", "ORG"):
        ner.add_label(label)
    assert_conlleval_scores(ner.score(conlleval_examples(pipeline)))


def ged_example(
    nlp: Language, gold_words: List[str], gold_tags: List[str], pred_words: List[str], pred_tags: List[str]
) -> Example:
    predicted = Doc(nlp.vocab, words=pred_words, tags=pred_tags)
    return Example(predicted, Doc(nlp.vocab, words=gold_words, tags=gold_tags))


def ten_token_ged_example(nlp: Language) -> Example:
    """index: 0 1 2 3 4 5 6 7 8 9
    gold:     c c i c i i c c i c
    pred:     c i i c c i c c c c
    tp at 2, 5; fp at 1; fn at 4, 8 -> P = 2/3, R = 2/4, F0.5 = 5/8 (see test_f_beta);
    tags right on 7 of 10 tokens -> tag_acc 0.7."""
    words = "We has went to the shop yesterday and buyed bread".split()
    return ged_example(nlp, words, list("cciciiccic"), words, list("ciiccicccc"))


def assert_ten_token_scores(scores: Dict[str, object]):
    assert scores["ged_p"] == pytest.approx(2 / 3)
    assert scores["ged_r"] == pytest.approx(1 / 2)
    assert scores["ged_f05"] == pytest.approx(5 / 8)
    assert scores["tag_acc"] == pytest.approx(0.7)


def test_error_detection_scorer_by_hand(nlp: Language):
    score = registry.scorers.get("sla-replication.error_detection_scorer.v1")()
    assert_ten_token_scores(score([ten_token_ged_example(nlp)]))


def test_error_detection_beta_and_tag_are_configurable(nlp: Language):
    score = registry.scorers.get("sla-replication.error_detection_scorer.v1")(error_tag="c", beta=1.0)
    scores = score([ten_token_ged_example(nlp)])
    # Class "c": gold c at 0,1,3,6,7,9 (6), pred c at 0,3,4,6,7,8,9 (7); both at 0,3,6,7,9 -> tp 5.
    # P = 5/7, R = 5/6, F1 = 2 * 25/42 / (5/7 + 5/6) = (25/21) / (65/42) = 10/13.
    assert scores["ged_p"] == pytest.approx(5 / 7)
    assert scores["ged_r"] == pytest.approx(5 / 6)
    assert scores["ged_f1"] == pytest.approx(10 / 13)
    assert "ged_f05" not in scores


def test_error_detection_follows_alignment(nlp: Language):
    score = registry.scorers.get("sla-replication.error_detection_scorer.v1")()
    # Gold "do n't" (both i) is one predicted token "don't": it aligns to gold tag i.
    # Predicted tokens: He c/c, don't i/i (tp), go c/c, home c vs gold i (fn).
    # P = 1/1, R = 1/2, F0.5 = 1.25 * 0.5 / (0.25 + 0.5) = 5/6.
    example = Example(
        Doc(nlp.vocab, words=["He", "don't", "go", "home"], tags=list("cicc")),
        Doc(
            nlp.vocab,
            words=["He", "do", "n't", "go", "home"],
            spaces=[True, False, True, True, False],
            tags=list("ciici"),
        ),
    )
    scores = score([example])
    assert scores["ged_p"] == pytest.approx(1.0)
    assert scores["ged_r"] == pytest.approx(1 / 2)
    assert scores["ged_f05"] == pytest.approx(5 / 6)


def test_error_detection_without_errors_is_zero(nlp: Language):
    score = registry.scorers.get("sla-replication.error_detection_scorer.v1")()
    words = ["All", "fine"]
    scores = score([ged_example(nlp, words, ["c", "c"], words, ["c", "c"])])
    assert (scores["ged_p"], scores["ged_r"], scores["ged_f05"]) == (0.0, 0.0, 0.0)
    assert scores["tag_acc"] == pytest.approx(1.0)


def test_error_detection_scorer_in_pipeline():
    pipeline = spacy.blank("en")
    tagger = pipeline.add_pipe(
        "tagger", config={"scorer": {"@scorers": "sla-replication.error_detection_scorer.v1", "error_tag": "i", "beta": 0.5}}
    )
    for label in ("c", "i"):
        tagger.add_label(label)
    assert_ten_token_scores(tagger.score([ten_token_ged_example(pipeline)]))
