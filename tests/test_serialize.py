import io

import numpy
import pytest
import spacy
import srsly
import torch
from spacy.training import Example

from spacy_sla.layers import SLATransformerModel, SyntaxAwareTransformer

from util import add_textcat_listener, english_vocab, sla_nlp, the_cat_sat, trf_output

SMALL_MASK = {"mask": {"@misc": "spacy-sla.syntax_mask.v1", "threshold": 1, "punct_visible": False}}


def trained_sla_nlp(tiny_bert, **model_config):
    """A pipeline whose gates and weights moved away from their initial
    values, so that a loader that re-initialises anything is caught."""
    torch.manual_seed(0)
    nlp = sla_nlp(tiny_bert, initialize=False, **model_config)
    add_textcat_listener(nlp)
    doc = the_cat_sat(nlp.vocab)
    examples = [Example.from_dict(doc, {"cats": {"POS": 1.0, "NEG": 0.0}})]
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(3):
        nlp.update(examples, sgd=optimizer)
    return nlp


def gates(nlp, pipe="sla_transformer"):
    return [m.gate.weight.detach().clone() for m in nlp.get_pipe(pipe).model.transformer.sla_modules()]


def assert_same_outputs(nlp_a, nlp_b):
    doc_a = nlp_a(the_cat_sat(nlp_a.vocab))
    doc_b = nlp_b(the_cat_sat(nlp_b.vocab))
    numpy.testing.assert_allclose(trf_output(doc_a), trf_output(doc_b), atol=1e-6)
    assert doc_a.cats == pytest.approx(doc_b.cats, abs=1e-6)


def test_to_disk_and_spacy_load_keep_gates_config_and_outputs(tiny_bert, tmp_path):
    nlp = trained_sla_nlp(tiny_bert, sla_layers=[1], **SMALL_MASK)
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    model = loaded.get_pipe("sla_transformer").model
    assert isinstance(model, SLATransformerModel)
    assert model.transformer.sla_layers == [1]
    assert model.attrs["mask"].threshold == 1 and not model.attrs["mask"].punct_visible
    assert all(torch.equal(a, b) for a, b in zip(gates(nlp), gates(loaded)))
    assert_same_outputs(nlp, loaded)


def test_to_bytes_and_from_bytes_keep_the_outputs(tiny_bert):
    nlp = trained_sla_nlp(tiny_bert, **SMALL_MASK)
    data = nlp.to_bytes()
    fresh = spacy.blank("en").from_config(nlp.config)
    fresh.from_bytes(data)
    assert all(torch.equal(a, b) for a, b in zip(gates(nlp), gates(fresh)))
    assert_same_outputs(nlp, fresh)


def test_a_pipeline_with_other_sla_layers_is_refused_not_silently_dropped(tiny_bert, tmp_path):
    nlp = trained_sla_nlp(tiny_bert, sla_layers=[1])
    nlp.to_disk(tmp_path / "one-layer")
    all_layers = {"components": {"sla_transformer": {"model": {"sla_layers": None}}}}
    with pytest.raises(ValueError, match=r"\[E006\].*missing.*layer\.0\.attention\.self\.gate\.weight.*not have: none"):
        spacy.load(tmp_path / "one-layer", config=all_layers)
    other_layer = {"components": {"sla_transformer": {"model": {"sla_layers": [0]}}}}
    with pytest.raises(ValueError, match=r"\[E006\].*layer\.0.*not have: .*layer\.1\.attention\.self\.gate"):
        spacy.load(tmp_path / "one-layer", config=other_layer)


def rewrite_saved_state(shim_bytes: bytes, change) -> bytes:
    message = srsly.msgpack_loads(shim_bytes)
    state = torch.load(io.BytesIO(message["state"]))
    change(state)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    message["state"] = buffer.getvalue()
    return srsly.msgpack_dumps(message)


def test_the_non_strict_fallback_of_spacy_transformers_never_drops_gates(tiny_bert):
    nlp = trained_sla_nlp(tiny_bert)
    shim = nlp.get_pipe("sla_transformer").model.layers[0].shims[0]
    gate_key = "transformer.encoder.layer.0.attention.self.gate.weight"
    without_gate = rewrite_saved_state(shim.to_bytes(), lambda state: state.pop(gate_key))
    with pytest.raises(ValueError, match=r"\[E006\]"):
        shim.from_bytes(without_gate)
    # a harmless extra key takes spacy-transformers' non-strict path; the
    # gates must still be loaded
    before = gates(nlp)
    extra = rewrite_saved_state(shim.to_bytes(), lambda state: state.update({"transformer.legacy_buffer": torch.zeros(1)}))
    with pytest.warns(UserWarning, match="strict=False"):
        shim.from_bytes(extra)
    assert isinstance(shim._model, SyntaxAwareTransformer)
    assert all(torch.equal(a, b) for a, b in zip(before, gates(nlp)))


def test_model_copy_keeps_sla_with_its_own_weights(tiny_bert):
    nlp = trained_sla_nlp(tiny_bert, **SMALL_MASK)
    model = nlp.get_pipe("sla_transformer").model
    copied = model.copy()
    assert isinstance(copied, SLATransformerModel) and copied.id != model.id
    assert isinstance(copied.transformer, SyntaxAwareTransformer)
    docs = [the_cat_sat(english_vocab())]
    expected = model.predict(docs).model_output.last_hidden_state
    numpy.testing.assert_allclose(copied.predict(docs).model_output.last_hidden_state, expected, atol=1e-6)
    with torch.no_grad():
        copied.transformer.sla_modules()[0].gate.weight.add_(1.0)
    assert not torch.equal(copied.transformer.sla_modules()[0].gate.weight, model.transformer.sla_modules()[0].gate.weight)


def test_replace_listeners_gives_the_component_its_own_sla_transformer(tiny_bert, tmp_path):
    nlp = trained_sla_nlp(tiny_bert, **SMALL_MASK)
    before = nlp(the_cat_sat(nlp.vocab)).cats
    nlp.replace_listeners("sla_transformer", "textcat", ["model.tok2vec"])
    tok2vec_config = nlp.config["components"]["textcat"]["model"]["tok2vec"]
    assert tok2vec_config["@architectures"] == "spacy-sla.SLATok2VecTransformer.v1"
    assert tok2vec_config["mask"]["threshold"] == 1
    own = [node for node in nlp.get_pipe("textcat").model.walk() if isinstance(node, SLATransformerModel)]
    assert len(own) == 1 and len(own[0].transformer.sla_modules()) == 2
    assert nlp(the_cat_sat(nlp.vocab)).cats == pytest.approx(before, abs=1e-6)
    nlp.to_disk(tmp_path / "replaced")
    loaded = spacy.load(tmp_path / "replaced")
    assert loaded(the_cat_sat(loaded.vocab)).cats == pytest.approx(before, abs=1e-6)


def test_an_uninitialized_model_round_trips(tiny_bert):
    nlp = sla_nlp(tiny_bert, initialize=False)
    model = nlp.get_pipe("sla_transformer").model
    restored = SLATransformerModel(str(tiny_bert), model.attrs["get_spans"], model.attrs["mask"])
    restored.from_bytes(model.to_bytes())
    assert restored.transformer is None and not restored.attrs["has_transformer"]
