"""Per-document counts of spaCy's entity scores, which add up to the
scorer's values on the whole dev set, and the statistics of a scorer that
the user's code registers."""
from typing import Any, Dict, List, Sequence

import numpy
import pytest
import spacy
from spacy.language import Language
from spacy.scorer import get_ner_prf
from spacy.tokens import Doc, Span
from spacy.training import Example

from spacy_sla.tools.ab import CountStatistic, register_scorer_statistics
from spacy_sla.tools.ab.counts import SCORER_FAMILIES, component_statistics, entity_counts
from spacy_sla.tools.ab.statistics import full_set_value


@pytest.fixture(scope="module")
def nlp() -> Language:
    return spacy.blank("en")


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
    statistic = component_statistics({"@scorers": "spacy.ner_scorer.v1"}, examples, {})["ents_f"]
    assert statistic.counts.sum(axis=0).tolist() == [2, 1, 3]
    assert full_set_value(statistic) == pytest.approx(get_ner_prf(examples)["ents_f"]) == pytest.approx(2 * 2 / (2 * 2 + 1 + 3))


def test_a_scorer_without_statistics_gets_none(nlp):
    """Its scores are recomputed by the scorer on every draw instead (dev_evaluation)."""
    assert component_statistics({"@scorers": "my.scorer.v1"}, [], {}) == {}
    assert component_statistics(None, [], {}) == {}


def test_a_registered_scorer_gets_its_statistics_with_its_arguments(nlp, monkeypatch):
    """What a --code file does for its own scorer: the share of documents
    whose text is longer than `min_length` words, as a ratio of counts."""
    monkeypatch.setattr("spacy_sla.tools.ab.counts.SCORER_FAMILIES", dict(SCORER_FAMILIES))

    def long_documents(min_length: int = 2):
        def statistics(examples: Sequence[Example], **kwargs: Any) -> Dict[str, CountStatistic]:
            counts = [[int(len(example.reference) > min_length), 0, int(len(example.reference) <= min_length)]
                      for example in examples]  # (tp, fp, fn): recall is the share
            return {"long_share": CountStatistic("recall", numpy.array(counts))}

        return statistics

    register_scorer_statistics("my.long_documents.v1", long_documents)
    examples = [Example(nlp.make_doc(text), nlp.make_doc(text)) for text in ("a b c", "a", "a b c d", "a b")]
    statistic = component_statistics({"@scorers": "my.long_documents.v1", "min_length": 2}, examples, {})["long_share"]
    assert full_set_value(statistic) == pytest.approx(2 / 4)
    statistic = component_statistics({"@scorers": "my.long_documents.v1", "min_length": 1}, examples, {})["long_share"]
    assert full_set_value(statistic) == pytest.approx(3 / 4)
    assert "my.long_documents.v1" not in SCORER_FAMILIES  # the test's registration stayed in the test
