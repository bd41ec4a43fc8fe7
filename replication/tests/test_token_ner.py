"""sla_replication_token_ner: NER as a softmax over BIO tags on each token (spaCy's Tagger
with entity tags), and sla-replication.Tagger.v1, the tagger with a random start."""
import numpy
import pytest
import spacy
from spacy.tokens import Doc, Span
from spacy.training import Example
from spacy.vocab import Vocab

from replication.token_ner import TokenNER, biluo_to_bio, bio_spans

TOK2VEC = {"@architectures": "spacy.HashEmbedCNN.v2", "width": 32, "depth": 1, "embed_size": 200, "window_size": 1,
           "maxout_pieces": 2, "subword_features": True, "pretrained_vectors": None}
SENTENCES = [
    (["Alice", "met", "Bob", "Smith", "in", "Paris", "."], [(0, 1, "PER"), (2, 4, "PER"), (5, 6, "LOC")]),
    (["Carol", "flew", "to", "New", "York", "today", "."], [(0, 1, "PER"), (3, 5, "LOC")]),
    (["the", "weather", "is", "fine", "."], []),
]


def example(nlp, words, entities) -> Example:
    reference = Doc(nlp.vocab, words=words)
    reference.ents = [Span(reference, start, end, label=label) for start, end, label in entities]
    return Example(Doc(nlp.vocab, words=words), reference)


def trained_pipeline(steps: int = 40):
    nlp = spacy.blank("en")
    nlp.add_pipe("sla_replication_token_ner", config={"model": {"@architectures": "sla-replication.Tagger.v1", "tok2vec": TOK2VEC}})
    examples = [example(nlp, words, entities) for words, entities in SENTENCES]
    numpy.random.seed(0)
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(steps):
        nlp.update(examples, sgd=optimizer)
    return nlp, examples


def entities(doc):
    return [(ent.start, ent.end, ent.label_) for ent in doc.ents]


@pytest.mark.parametrize("biluo,bio", [
    ("B-PER", "B-PER"), ("I-PER", "I-PER"), ("L-PER", "I-PER"), ("U-LOC", "B-LOC"), ("O", "O"),
    ("-", None), (None, None), ("", None)])
def test_biluo_tags_become_bio_tags(biluo, bio):
    assert biluo_to_bio(biluo) == bio


def test_bio_tags_become_entities_as_conlleval_reads_them():
    doc = Doc(Vocab(), words=["a", "b", "c", "d", "e", "f"])
    spans = bio_spans(doc, ["B-PER", "I-PER", "I-LOC", "O", "I-ORG", "B-ORG"])
    assert [(s.start, s.end, s.label_) for s in spans] == [(0, 2, "PER"), (2, 3, "LOC"), (4, 5, "ORG"), (5, 6, "ORG")]


def test_labels_are_bio_tags_of_the_entity_types_in_the_data():
    nlp, _ = trained_pipeline(steps=0)
    component = nlp.get_pipe("sla_replication_token_ner")
    assert isinstance(component, TokenNER)
    assert component.labels == ("O", "B-LOC", "I-LOC", "B-PER", "I-PER")
    assert component.label_data == component.entity_types == ("LOC", "PER")


def test_gold_tags_come_from_the_reference_with_none_where_it_has_no_annotation():
    nlp = spacy.blank("en")
    component = nlp.add_pipe("sla_replication_token_ner")
    (words, spans), *_ = SENTENCES
    assert component.gold_tags(example(nlp, words, spans)) == ["B-PER", "O", "B-PER", "I-PER", "O", "B-LOC", "O"]
    partial = Doc(nlp.vocab, words=["Alice", "ran", "off"], ents=["B-PER", "O", None])
    assert component.gold_tags(Example(Doc(nlp.vocab, words=partial.text.split()), partial)) == ["B-PER", "O", None]
    unannotated = Doc(nlp.vocab, words=["Alice", "ran"])
    assert component.gold_tags(Example(Doc(nlp.vocab, words=["Alice", "ran"]), unannotated)) == [None, None]


def test_it_learns_the_training_entities_and_scores_them_as_entities():
    nlp, examples = trained_pipeline()
    for (words, spans), predicted in zip(SENTENCES, nlp.pipe(" ".join(words) for words, _ in SENTENCES)):
        assert entities(predicted) == spans
    scores = nlp.evaluate(examples)
    assert scores["ents_f"] == 1.0 and scores["ents_per_type"]["LOC"]["f"] == 1.0


def test_predictions_replace_the_entities_a_doc_had():
    nlp, _ = trained_pipeline()
    doc = nlp.make_doc("the weather is fine .")
    doc.ents = [Span(doc, 0, 2, label="ORG")]
    assert entities(nlp.get_pipe("sla_replication_token_ner")(doc)) == []


def test_it_survives_to_disk_and_load(tmp_path):
    nlp, _ = trained_pipeline()
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    assert loaded.get_pipe("sla_replication_token_ner").labels == nlp.get_pipe("sla_replication_token_ner").labels
    text = "Alice met Bob Smith in Paris ."
    assert entities(loaded(text)) == entities(nlp(text)) == SENTENCES[0][1]


@pytest.mark.parametrize("label", ["B-PER", "O", "", "U-LOC"])
def test_a_tag_is_not_an_entity_type(label):
    component = spacy.blank("en").add_pipe("sla_replication_token_ner")
    with pytest.raises(ValueError, match=r"\[SLA-REPLICATION-E016\]"):
        component.add_label(label)


def test_adding_a_type_twice_adds_it_once():
    component = spacy.blank("en").add_pipe("sla_replication_token_ner")
    assert component.add_label("PER") == 1 and component.add_label("PER") == 0
    assert component.labels == ("O", "B-PER", "I-PER")


def test_training_data_without_entities_is_a_coded_error():
    nlp = spacy.blank("en")
    nlp.add_pipe("sla_replication_token_ner")
    examples = [example(nlp, ["no", "names", "here"], [])]
    with pytest.raises(ValueError, match=r"\[SLA-REPLICATION-E018\]"):
        nlp.initialize(lambda: examples)


def test_labels_given_to_initialize_are_entity_types():
    nlp = spacy.blank("en")
    component = nlp.add_pipe("sla_replication_token_ner", config={"model": {"tok2vec": TOK2VEC}})
    component.initialize(lambda: [example(nlp, *SENTENCES[0])], nlp=nlp, labels=["ORG", "PER"])
    assert component.entity_types == ("ORG", "PER") and len(component.labels) == 5


# --- sla-replication.Tagger.v1 --------------------------------------------------------------------------------------

def tagger_output_layer(architecture: str, **settings):
    nlp = spacy.blank("en")
    component = nlp.add_pipe("tagger", config={"model": {"@architectures": architecture, "tok2vec": TOK2VEC, **settings}})
    examples = [Example.from_dict(nlp.make_doc("a b c"), {"tags": ["X", "Y", "X"]})]
    numpy.random.seed(0)
    nlp.initialize(lambda: examples)
    return component.model.get_ref("output_layer")


def test_the_tagger_softmax_starts_random_not_at_zero():
    weights = tagger_output_layer("sla-replication.Tagger.v1").get_param("W")
    assert weights.shape == (2, 32) and 0.005 < float(weights.std()) < 0.05
    assert float(numpy.abs(tagger_output_layer("spacy.Tagger.v2").get_param("W")).max()) == 0.0
    assert float(numpy.abs(tagger_output_layer("sla-replication.Tagger.v1", init_std=0.0).get_param("W")).max()) == 0.0


def test_it_trains_on_a_transformer_through_a_listener(tiny_bert):
    """The docs' way of adding it to a transformer pipeline (docs/usage.md)."""
    nlp = spacy.blank("en")
    nlp.add_pipe("transformer", config={"model": {"name": str(tiny_bert)}})
    nlp.add_pipe("sla_replication_token_ner", name="ner", config={"model": {"tok2vec": {
        "@architectures": "spacy-transformers.TransformerListener.v1", "grad_factor": 1.0, "upstream": "*",
        "pooling": {"@layers": "reduce_mean.v1"}}}})
    examples = [example(nlp, words, entities) for words, entities in SENTENCES]
    numpy.random.seed(0)
    optimizer = nlp.initialize(lambda: examples)
    first = nlp.update(examples, sgd=optimizer)["ner"]
    for _ in range(5):
        last = nlp.update(examples, sgd=optimizer)["ner"]
    assert 0.0 < last < first
    doc = nlp("Alice met Bob Smith in Paris .")
    assert all(ent.label_ in ("PER", "LOC") for ent in doc.ents)
