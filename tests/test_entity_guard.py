"""`sla_entity_guard`: gold entities cut by a sentence start of the parsed
training Doc become missing, so that spaCy's `ner` trains instead of stopping
with E024; everything else is left as it is."""
import warnings

import pytest
import spacy
from spacy.tokens import Doc, Span
from spacy.training import Example
from spacy.vocab import Vocab

from spacy_sla.entity_guard import cut_entities, hide_cut_entities, sentence_start_chars

WORDS = ["Jane", "flew", "to", "New", "York", "City", "today", ".", "Bob", "stayed", "."]
# predicted sentences: 0-3 | 4-7 | 8-10; the first cuts "New York City" (3-5), the second starts at "Bob"
PREDICTED_STARTS = [True, False, False, False, True, False, False, False, True, False, False]


def gold_doc(vocab: Vocab) -> Doc:
    doc = Doc(vocab, words=WORDS)
    doc.ents = [Span(doc, 0, 1, "PER"), Span(doc, 3, 6, "LOC"), Span(doc, 8, 9, "PER")]
    return doc


def predicted_doc(vocab: Vocab, starts=PREDICTED_STARTS) -> Doc:
    return Doc(vocab, words=WORDS, sent_starts=list(starts))


def test_sentence_starts_are_character_offsets_after_the_first_token():
    doc = predicted_doc(Vocab())
    assert sentence_start_chars(doc) == [doc[4].idx, doc[8].idx]
    assert sentence_start_chars(Doc(Vocab(), words=WORDS)) == []  # no boundaries, none cut


def test_only_an_entity_with_a_start_strictly_inside_is_cut():
    doc = gold_doc(Vocab())
    new, york, bob = doc[3].idx, doc[4].idx, doc[8].idx
    assert [e.text for e in cut_entities(doc, [york])] == ["New York City"]
    assert cut_entities(doc, [new, bob]) == []  # a sentence may start where an entity starts
    assert cut_entities(doc, [doc[5].idx + 1]) == [doc.ents[1]]  # inside a token of another tokenisation
    assert cut_entities(doc, [doc[6].idx]) == []  # where it has ended


def test_hiding_marks_the_cut_entity_missing_and_keeps_the_others():
    vocab = Vocab()
    example = Example(predicted_doc(vocab), gold_doc(vocab))
    assert hide_cut_entities(example) == 1
    reference = example.reference
    assert [(e.text, e.label_) for e in reference.ents] == [("Jane", "PER"), ("Bob", "PER")]
    assert [t.ent_iob_ for t in reference] == ["B", "O", "O", "", "", "", "O", "O", "B", "O", "O"]
    assert hide_cut_entities(example) == 0  # idempotent


@pytest.fixture
def nlp_with_ner():
    nlp = spacy.blank("en")
    nlp.add_pipe("sla_entity_guard")
    # spaCy's ner consults its oracle only for Docs longer than a random cut of about this size: whole
    # documents, rarely sentences; a cut this short makes every Doc here consult it
    nlp.add_pipe("ner", config={"update_with_oracle_cut_size": 2})
    nlp.initialize(lambda: [Example(predicted_doc(nlp.vocab), gold_doc(nlp.vocab))])
    return nlp


def test_spacys_ner_cannot_learn_the_cut_entity_without_the_guard(nlp_with_ner):
    ner = nlp_with_ner.get_pipe("ner")
    example = Example(predicted_doc(nlp_with_ner.vocab), gold_doc(nlp_with_ner.vocab))
    with pytest.raises(ValueError, match="E024"):
        ner.moves.get_oracle_sequence(example)
    hide_cut_entities(example)
    assert len(ner.moves.get_oracle_sequence(example)) > 0


def test_training_runs_through_the_guard_and_warns_once(nlp_with_ner):
    vocab = nlp_with_ner.vocab

    def examples():
        return [Example(predicted_doc(vocab), gold_doc(vocab)) for _ in range(2)]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses = nlp_with_ner.update(examples())
        nlp_with_ner.update(examples())
    assert [str(w.message)[:10] for w in caught if "SLA-W004" in str(w.message)] == ["[SLA-W004]"]
    assert nlp_with_ner.get_pipe("sla_entity_guard").n_hidden == 4
    assert set(losses) == {"ner"} and losses["ner"] > 0
    with pytest.raises(ValueError, match="E024"):
        nlp_with_ner.update(examples(), exclude=["sla_entity_guard"])


def test_prediction_returns_the_doc_unchanged(nlp_with_ner):
    guard = nlp_with_ner.get_pipe("sla_entity_guard")
    doc = gold_doc(nlp_with_ner.vocab)
    assert guard(doc) is doc
    assert list(guard.pipe([doc])) == [doc]
    assert [e.text for e in doc.ents] == ["Jane", "New York City", "Bob"]
