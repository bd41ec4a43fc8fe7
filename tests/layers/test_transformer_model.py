"""SLATransformerModel: saved and loaded with its gates and outputs, copied,
given to a listener by replace_listeners, and with the settings of the config
it is loaded with in effect rather than those it was saved with."""
import io

import numpy
import pytest
import spacy
import srsly
import torch
from spacy.training import Example

from spacy_sla.layers import SLATransformerModel, SyntaxAwareTransformer

from util import add_textcat_listener, english_vocab, sla_nlp, the_cat_sat, trf_output

SMALL_MASK = {"mask": {"@misc": "spacy-sla.syntax_mask.v1", "threshold": 1, "punct_rule": "none"}}


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
    assert model.settings.mask.threshold == 1 and model.settings.sla_layers == [1]
    assert all(torch.equal(a, b) for a, b in zip(gates(nlp), gates(loaded)))
    assert_same_outputs(nlp, loaded)


def test_to_bytes_and_from_bytes_keep_the_outputs(tiny_bert):
    nlp = trained_sla_nlp(tiny_bert, **SMALL_MASK)
    data = nlp.to_bytes()
    fresh = spacy.blank("en").from_config(nlp.config)
    fresh.from_bytes(data)
    assert all(torch.equal(a, b) for a, b in zip(gates(nlp), gates(fresh)))
    assert_same_outputs(nlp, fresh)


@pytest.mark.parametrize("family", ["tiny_bert_relative", "tiny_mpnet", "tiny_albert", "tiny_deberta_v3", "tiny_modernbert"])
def test_the_families_with_a_position_term_or_shared_layers_round_trip(family, request, tmp_path):
    torch.manual_seed(0)
    nlp = sla_nlp(request.getfixturevalue(family), initialize=False, **SMALL_MASK)
    add_textcat_listener(nlp)
    examples = [Example.from_dict(the_cat_sat(nlp.vocab), {"cats": {"POS": 1.0, "NEG": 0.0}})]
    optimizer = nlp.initialize(lambda: examples)
    initial = gates(nlp)
    for _ in range(3):
        nlp.update(examples, sgd=optimizer)
    assert initial and not any(torch.equal(a, b) for a, b in zip(initial, gates(nlp)))
    fresh = spacy.blank("en").from_config(nlp.config)
    fresh.from_bytes(nlp.to_bytes())
    assert all(torch.equal(a, b) for a, b in zip(gates(nlp), gates(fresh)))
    assert_same_outputs(nlp, fresh)
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    assert all(torch.equal(a, b) for a, b in zip(gates(nlp), gates(loaded)))
    assert_same_outputs(nlp, loaded)


def test_a_pipeline_with_other_sla_layers_is_refused_not_silently_dropped(tiny_bert, tmp_path):
    nlp = trained_sla_nlp(tiny_bert, sla_layers=[1])
    nlp.to_disk(tmp_path / "one-layer")
    all_layers = {"components": {"sla_transformer": {"model": {"sla_layers": None}}}}
    with pytest.raises(ValueError, match=r"\[SLA-E006\].*missing.*layer\.0\.attention\.self\.gate\.weight.*not have: none"):
        spacy.load(tmp_path / "one-layer", config=all_layers)
    other_layer = {"components": {"sla_transformer": {"model": {"sla_layers": [0]}}}}
    with pytest.raises(ValueError, match=r"\[SLA-E006\].*layer\.0.*not have: .*layer\.1\.attention\.self\.gate"):
        spacy.load(tmp_path / "one-layer", config=other_layer)


def rewrite_saved_state(shim_bytes: bytes, change) -> bytes:
    message = srsly.msgpack_loads(shim_bytes)
    state = torch.load(io.BytesIO(message["state"]))
    change(state)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    message["state"] = buffer.getvalue()
    return srsly.msgpack_dumps(message)


def test_loading_never_drops_gates_and_leaves_out_only_buffers_kept_unsaved(tiny_bert):
    nlp = trained_sla_nlp(tiny_bert)
    shim = nlp.get_pipe("sla_transformer").model.layers[0].shims[0]
    gate_key = "transformer.encoder.layer.0.attention.self.gate.weight"
    without_gate = rewrite_saved_state(shim.to_bytes(), lambda state: state.pop(gate_key))
    with pytest.raises(ValueError, match=r"\[SLA-E006\]"):
        shim.from_bytes(without_gate)
    # position ids, which older transformers versions saved and newer ones
    # keep unsaved, are left out; the gates are still loaded
    before = gates(nlp)
    position_ids = "transformer.embeddings.position_ids"
    assert position_ids not in shim._model.state_dict() and position_ids in dict(shim._model.named_buffers())
    older = rewrite_saved_state(shim.to_bytes(), lambda state: state.update({position_ids: torch.arange(64)[None]}))
    shim.from_bytes(older)
    assert isinstance(shim._model, SyntaxAwareTransformer)
    assert all(torch.equal(a, b) for a, b in zip(before, gates(nlp)))
    foreign = rewrite_saved_state(shim.to_bytes(), lambda state: state.update({"transformer.legacy": torch.zeros(1)}))
    with pytest.raises(ValueError, match=r"\[SLA-E092\].*\(transformer\.legacy\)"):
        shim.from_bytes(foreign)


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
    restored = SLATransformerModel(str(tiny_bert), model.settings.get_spans, model.settings.mask)
    restored.from_bytes(model.to_bytes())
    assert restored.transformer is None and not restored.attrs["has_transformer"]


# Runtime settings: the config a pipeline is loaded with is in effect, not
# what was saved.

UNPARSED_TEXT = "no parse here"


def saved_pipeline(tiny_bert, path, store_gates: bool = False, max_batch_items: int = 4096, **model_config):
    nlp = spacy.blank("en")
    component = {"store_gates": store_gates, "max_batch_items": max_batch_items}
    nlp.add_pipe("sla_transformer", config={**component, "model": {"name": str(tiny_bert), **model_config}})
    nlp.initialize()
    nlp.to_disk(path)
    return nlp


def load_with(path, model=None, **component):
    settings = dict(component)
    if model is not None:
        settings["model"] = model
    return spacy.load(path, config={"components": {"sla_transformer": settings}})


def test_no_setting_is_serialized_with_the_model(tiny_bert):
    model = sla_nlp(tiny_bert, on_missing_parse="global", sla_layers=[1]).get_pipe("sla_transformer").model
    saved_attrs = srsly.msgpack_loads(model.to_bytes())["attrs"][0]
    assert set(saved_attrs) == {"has_transformer"}


def test_on_missing_parse_given_when_loading_is_in_effect(tiny_bert, tmp_path):
    saved_pipeline(tiny_bert, tmp_path / "error", on_missing_parse="error")
    relaxed = load_with(tmp_path / "error", model={"on_missing_parse": "global"})
    assert relaxed.get_pipe("sla_transformer").model.settings.on_missing_parse == "global"
    with pytest.warns(UserWarning, match=r"\[SLA-W001\]"):
        doc = relaxed(UNPARSED_TEXT)
    assert doc._.trf_data.align.lengths.shape == (3,)
    saved_pipeline(tiny_bert, tmp_path / "global", on_missing_parse="global")
    strict = load_with(tmp_path / "global", model={"on_missing_parse": "error"})
    with pytest.raises(ValueError, match=r"\[SLA-E001\]"):
        strict(UNPARSED_TEXT)


@pytest.mark.parametrize("saved,loaded", [(False, True), (True, False)])
def test_store_gates_given_when_loading_is_in_effect(tiny_bert, tmp_path, saved, loaded):
    saved_pipeline(tiny_bert, tmp_path / "pipeline", store_gates=saved)
    nlp = load_with(tmp_path / "pipeline", store_gates=loaded)
    gates = nlp(the_cat_sat(nlp.vocab))._.sla_gates
    assert (gates is not None) == loaded


def test_max_batch_items_given_when_loading_is_in_effect(tiny_bert, tmp_path, monkeypatch):
    saved_pipeline(tiny_bert, tmp_path / "pipeline", max_batch_items=4096)
    docs = [the_cat_sat(english_vocab()) for _ in range(3)]

    def predicted_batches(nlp):
        pipe = nlp.get_pipe("sla_transformer")
        sizes = []
        predict = pipe.predict
        monkeypatch.setattr(pipe, "predict", lambda batch: sizes.append(len(batch)) or predict(batch))
        list(nlp.pipe(docs, batch_size=8))
        return sizes

    assert predicted_batches(spacy.load(tmp_path / "pipeline")) == [3]
    one_by_one = load_with(tmp_path / "pipeline", max_batch_items=1)
    assert one_by_one.get_pipe("sla_transformer").cfg["max_batch_items"] == 1
    assert predicted_batches(one_by_one) == [1, 1, 1]


def test_a_mask_setting_given_when_loading_is_in_effect(tiny_bert, tmp_path):
    saved_pipeline(tiny_bert, tmp_path / "pipeline", **SMALL_MASK)
    doc = the_cat_sat(english_vocab())
    saved = spacy.load(tmp_path / "pipeline").get_pipe("sla_transformer").local_masks([doc])[0]
    wide = load_with(tmp_path / "pipeline", model={"mask": {"threshold": 1000}})
    loaded = wide.get_pipe("sla_transformer").local_masks([doc])[0]
    assert not saved.all() and loaded.all()


def test_sla_layers_and_mixed_precision_given_when_loading_are_in_effect(tiny_bert, tmp_path):
    saved_pipeline(tiny_bert, tmp_path / "pipeline", sla_layers=[1])
    # [-1] names the same layer of the two-layer model, so the saved gates fit
    nlp = load_with(tmp_path / "pipeline", model={"sla_layers": [-1], "mixed_precision": True})
    model = nlp.get_pipe("sla_transformer").model
    assert model.settings.sla_layers == [-1] and model.transformer.sla_layers == [1]
    assert model.settings.mixed_precision and model.layers[0].shims[0]._mixed_precision
    copied = model.copy()
    assert copied.settings == model.settings and copied.layers[0].shims[0]._mixed_precision


def test_mixed_precision_training_on_the_cpu_is_refused_before_the_encoder_runs(tiny_bert, monkeypatch):
    """spacy-transformers would fail in thinc's gradient scaler after the
    forward pass ("Gradient scaling is not supported..."); SLA-E115 comes
    first and says what to do."""
    nlp = sla_nlp(tiny_bert, initialize=False, mixed_precision=True)
    add_textcat_listener(nlp)
    examples = [Example.from_dict(the_cat_sat(nlp.vocab), {"cats": {"POS": 1.0, "NEG": 0.0}})]
    optimizer = nlp.initialize(lambda: examples)
    calls = []
    original = SyntaxAwareTransformer.forward
    monkeypatch.setattr(SyntaxAwareTransformer, "forward", lambda *args, **kwargs: calls.append(1) or original(*args, **kwargs))
    with pytest.raises(ValueError, match=r"\[SLA-E115\].* on the CPU.*--gpu-id 0.*mixed_precision = false"):
        nlp.update(examples, sgd=optimizer)
    assert calls == []
    # prediction is left alone: a pipeline trained with mixed precision on a GPU predicts on the CPU in float32
    doc = nlp(the_cat_sat(nlp.vocab))
    assert calls == [1] and trf_output(doc).dtype == numpy.float32 and numpy.isfinite(trf_output(doc)).all()


def test_mixed_precision_with_its_gradient_scaler_disabled_trains_on_the_cpu(tiny_bert):
    nlp = sla_nlp(tiny_bert, initialize=False, mixed_precision=True, grad_scaler_config={"enabled": False})
    add_textcat_listener(nlp)
    examples = [Example.from_dict(the_cat_sat(nlp.vocab), {"cats": {"POS": 1.0, "NEG": 0.0}})]
    optimizer = nlp.initialize(lambda: examples)
    losses = {}
    nlp.update(examples, sgd=optimizer, losses=losses)
    assert numpy.isfinite(losses["sla_transformer"]) and numpy.isfinite(losses["textcat"])
