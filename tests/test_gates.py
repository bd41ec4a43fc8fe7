import numpy
import pytest
import spacy
from spacy.tokens import Doc

from util import english_vocab, parsed_doc, the_cat_sat


def gate_nlp(tiny_bert, store_gates, **model):
    nlp = spacy.blank("en")
    nlp.add_pipe("sla_transformer", config={"store_gates": store_gates, "model": {"name": str(tiny_bert), **model}})
    nlp.initialize()
    return nlp


def test_gates_are_off_by_default(tiny_bert):
    nlp = spacy.blank("en")
    nlp.add_pipe("sla_transformer", config={"model": {"name": str(tiny_bert)}})
    nlp.initialize()
    doc = nlp(the_cat_sat(nlp.vocab))
    assert doc._.sla_gates is None
    # the model returns them all the same: storing them is the component's choice
    assert nlp.get_pipe("sla_transformer").predict([doc]).gates.shape == (2, 1, 9)


def test_stored_gates_have_a_value_per_layer_and_token(tiny_bert):
    nlp = gate_nlp(tiny_bert, True)
    docs = [
        parsed_doc(nlp.vocab, ["she", "was", "walking", "."], [2, 2, 2, 2]),
        parsed_doc(nlp.vocab, ["a", "  ", "cat"], [2, 2, 2]),
        Doc(nlp.vocab, words=[]),
    ]
    walking, whitespace, empty = nlp.pipe(docs)
    gates = walking._.sla_gates
    assert gates.shape == (2, 4) and gates.dtype == numpy.float32
    assert ((gates > 0) & (gates < 1)).all()
    # the gate of "walking" is the mean over its pieces walk + ##ing
    model = nlp.get_pipe("sla_transformer").model
    batch = model.predict([walking])
    piece_gates = batch.gates[:, 0, 3:5]
    numpy.testing.assert_allclose(gates[:, 2], piece_gates.mean(axis=1), rtol=1e-6)
    assert numpy.isnan(whitespace._.sla_gates[:, 1]).all() and not numpy.isnan(whitespace._.sla_gates[:, [0, 2]]).any()
    assert empty._.sla_gates.shape == (2, 0)


def test_gates_of_a_subset_of_layers_and_of_long_docs(tiny_bert):
    nlp = gate_nlp(
        tiny_bert, True, sla_layers=[1],
        get_spans={"@span_getters": "spacy-transformers.strided_spans.v1", "window": 10, "stride": 7},
    )
    long_doc = Doc.from_docs([the_cat_sat(english_vocab()) for _ in range(4)])
    gates = nlp(long_doc)._.sla_gates
    assert gates.shape == (1, 28)
    assert ((gates > 0) & (gates < 1)).all()


def test_unparsed_docs_still_get_gates_under_the_global_policy(tiny_bert):
    # their local mask hides nothing, so the gate mixes two equal branches
    nlp = gate_nlp(tiny_bert, True, on_missing_parse="global")
    with pytest.warns(UserWarning, match="SLA-W001"):
        doc = nlp("no parse here")
    assert doc._.sla_gates.shape == (2, 3) and ((doc._.sla_gates > 0) & (doc._.sla_gates < 1)).all()


def test_gate_storage_can_be_switched_on_when_loading(tiny_bert, tmp_path):
    nlp = gate_nlp(tiny_bert, False)
    nlp.to_disk(tmp_path / "pipeline")
    on = spacy.load(tmp_path / "pipeline", config={"components": {"sla_transformer": {"store_gates": True}}})
    assert on(the_cat_sat(on.vocab))._.sla_gates.shape == (2, 7)
    off = spacy.load(tmp_path / "pipeline")
    assert off(the_cat_sat(off.vocab))._.sla_gates is None
    restored = spacy.blank("en").from_config(on.config).from_bytes(nlp.to_bytes())
    assert restored(the_cat_sat(restored.vocab))._.sla_gates.shape == (2, 7)
