"""spacy-sla.TextCatReduce.v1: spaCy's TextCatReduce.v1 with a random output layer."""
import numpy
import pytest
import spacy
from spacy.training import Example

import spacy_sla  # noqa: F401  (registers the architecture)

TOK2VEC = {"@architectures": "spacy.HashEmbedCNN.v2", "width": 16, "depth": 1, "embed_size": 100, "window_size": 1,
           "maxout_pieces": 2, "subword_features": False, "pretrained_vectors": None}


def textcat(architecture: str, **settings):
    nlp = spacy.blank("en")
    model = {"@architectures": architecture, "exclusive_classes": True, "use_reduce_first": False,
             "use_reduce_last": False, "use_reduce_max": False, "use_reduce_mean": True, "tok2vec": TOK2VEC, **settings}
    component = nlp.add_pipe("textcat", config={"model": model})
    examples = [Example.from_dict(nlp.make_doc("a b"), {"cats": {"A": 1.0, "B": 0.0}}),
                Example.from_dict(nlp.make_doc("c"), {"cats": {"A": 0.0, "B": 1.0}})]
    numpy.random.seed(0)
    nlp.initialize(lambda: examples)
    return nlp, component.model.get_ref("output_layer")


def test_the_output_layer_starts_random_not_at_zero():
    _, output = textcat("spacy-sla.TextCatReduce.v1", init_std=0.02)
    weights = output.get_param("W")
    assert weights.shape == (2, 16)
    assert 0.005 < float(weights.std()) < 0.05 and float(numpy.abs(output.get_param("b")).max()) == 0.0
    _, spacy_output = textcat("spacy.TextCatReduce.v1")
    assert float(numpy.abs(spacy_output.get_param("W")).max()) == 0.0  # what the new architecture changes


def test_init_std_zero_is_spacys_start_and_the_seed_fixes_the_weights():
    _, output = textcat("spacy-sla.TextCatReduce.v1", init_std=0.0)
    assert float(numpy.abs(output.get_param("W")).max()) == 0.0
    first = textcat("spacy-sla.TextCatReduce.v1")[1].get_param("W")
    assert numpy.array_equal(first, textcat("spacy-sla.TextCatReduce.v1")[1].get_param("W"))


def test_it_trains_and_predicts_exclusive_classes():
    nlp, _ = textcat("spacy-sla.TextCatReduce.v1")
    doc = nlp("a b")
    assert set(doc.cats) == {"A", "B"} and sum(doc.cats.values()) == pytest.approx(1.0, abs=1e-5)
