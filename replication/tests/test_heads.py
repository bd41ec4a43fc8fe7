"""sla-replication.TextCatReduce.v1: spaCy's TextCatReduce.v1 with a random output layer."""
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
    _, output = textcat("sla-replication.TextCatReduce.v1", init_std=0.02)
    weights = output.get_param("W")
    assert weights.shape == (2, 16)
    assert 0.005 < float(weights.std()) < 0.05 and float(numpy.abs(output.get_param("b")).max()) == 0.0
    _, spacy_output = textcat("spacy.TextCatReduce.v1")
    assert float(numpy.abs(spacy_output.get_param("W")).max()) == 0.0  # what the new architecture changes


def test_init_std_zero_is_spacys_start_and_the_seed_fixes_the_weights():
    _, output = textcat("sla-replication.TextCatReduce.v1", init_std=0.0)
    assert float(numpy.abs(output.get_param("W")).max()) == 0.0
    first = textcat("sla-replication.TextCatReduce.v1")[1].get_param("W")
    assert numpy.array_equal(first, textcat("sla-replication.TextCatReduce.v1")[1].get_param("W"))


def test_it_trains_and_predicts_exclusive_classes():
    nlp, _ = textcat("sla-replication.TextCatReduce.v1")
    doc = nlp("a b")
    assert set(doc.cats) == {"A", "B"} and sum(doc.cats.values()) == pytest.approx(1.0, abs=1e-5)


# --- sla-replication.TextCatCLS.v1: the [CLS] vector, dropout, a random softmax layer -----------------------------

TEXTS = ("the cat sat", "a big dog ran on the mat and she saw it")


@pytest.fixture(scope="module")
def cls_pipeline(tiny_bert):
    nlp = spacy.blank("en")
    nlp.add_pipe("transformer", config={"model": {"name": str(tiny_bert)}})
    component = nlp.add_pipe("textcat", config={"model": {"@architectures": "sla-replication.TextCatCLS.v1"}})
    examples = [Example.from_dict(nlp.make_doc(TEXTS[0]), {"cats": {"A": 1.0, "B": 0.0}}),
                Example.from_dict(nlp.make_doc(TEXTS[1]), {"cats": {"A": 0.0, "B": 1.0}})]
    numpy.random.seed(0)
    nlp.initialize(lambda: examples)
    return nlp, component, examples


def softmax(z):
    z = numpy.exp(z - z.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def test_the_cls_head_is_softmax_of_the_cls_vector_computed_by_hugging_face(cls_pipeline, tiny_bert):
    import torch
    from transformers import AutoModel, AutoTokenizer

    nlp, component, _ = cls_pipeline
    output = component.model.get_ref("output_layer")
    W, b = output.get_param("W"), output.get_param("b")
    assert W.shape == (2, 32) and 0.01 < float(W.std()) < 0.03 and not b.any()  # N(0, 0.02²), zero biases
    tokenizer, encoder = AutoTokenizer.from_pretrained(str(tiny_bert)), AutoModel.from_pretrained(str(tiny_bert)).eval()
    for text in TEXTS:
        with torch.no_grad():
            cls = encoder(**tokenizer(text, return_tensors="pt")).last_hidden_state[0, 0].numpy()
        expected = softmax(W @ cls + b)
        cats = nlp(text).cats
        assert [cats["A"], cats["B"]] == pytest.approx(expected.tolist(), abs=1e-5)


def trf_data(shape, seed):
    from spacy_transformers.data_classes import TransformerData
    from transformers.utils import ModelOutput

    data = TransformerData.zeros(shape[1], shape[2])
    data.model_output = ModelOutput(last_hidden_state=numpy.random.RandomState(seed).normal(size=shape).astype("f"))
    return data


def test_trfs2cls_takes_row_0_0_and_sends_the_gradient_there_only():
    from replication.heads import trfs2cls

    datas = [trf_data((2, 5, 4), 0), trf_data((1, 3, 4), 1)]  # the first doc read in two spans
    layer = trfs2cls(grad_factor=0.5)
    X, backprop = layer(datas, is_train=True)
    assert numpy.array_equal(X, numpy.stack([data.model_output.last_hidden_state[0, 0] for data in datas]))
    dX = numpy.arange(8, dtype="f").reshape(2, 4) + 1
    d_datas = backprop(dX)
    for data, d_data, row in zip(datas, d_datas, dX):
        d = d_data.model_output.last_hidden_state
        assert d.shape == data.model_output.last_hidden_state.shape
        assert numpy.array_equal(d[0, 0], 0.5 * row)
        d[0, 0] = 0
        assert not d.any()  # nothing anywhere else, the first span's other pieces and the second span included
        assert d_data.wordpieces is data.wordpieces and d_data.align is data.align


def test_the_cls_heads_gradient_reaches_the_cls_row_as_w_transpose_dy(cls_pipeline):
    from thinc.api import set_dropout_rate

    nlp, component, examples = cls_pipeline
    model = component.model
    listener = model.get_ref("listener")
    docs = [example.predicted for example in examples]
    datas = [trf_data((1, len(doc) + 2, 32), i) for i, doc in enumerate(docs)]
    received = []
    listener.receive(listener.get_batch_id(docs), datas, received.append)
    set_dropout_rate(model, 0.0)
    W, b = model.get_ref("output_layer").get_param("W"), model.get_ref("output_layer").get_param("b")
    Y, backprop = model(docs, is_train=True)
    cls = numpy.stack([data.model_output.last_hidden_state[0, 0] for data in datas])
    assert numpy.allclose(Y, softmax(cls @ W.T + b), atol=1e-6)
    dY = Y - numpy.array([[1.0, 0.0], [0.0, 1.0]], dtype="f")  # the textcat's d_scores
    backprop(dY)
    (d_datas,) = received
    for d_data, d_row in zip(d_datas, dY @ W):
        d = d_data.model_output.last_hidden_state
        assert numpy.allclose(d[0, 0], d_row, atol=1e-7)
        d[0, 0] = 0
        assert not d.any()


def test_two_updates_train_the_encoder_and_the_head(tiny_bert):
    nlp = spacy.blank("en")
    nlp.add_pipe("transformer", config={"model": {"name": str(tiny_bert)}})
    component = nlp.add_pipe("textcat", config={"model": {"@architectures": "sla-replication.TextCatCLS.v1"}})
    examples = [Example.from_dict(nlp.make_doc(TEXTS[0]), {"cats": {"A": 1.0, "B": 0.0}}),
                Example.from_dict(nlp.make_doc(TEXTS[1]), {"cats": {"A": 0.0, "B": 1.0}})]
    nlp.initialize(lambda: examples)
    encoder = nlp.get_pipe("transformer").model.transformer
    before = {name: parameter.detach().clone() for name, parameter in encoder.named_parameters()}
    W = component.model.get_ref("output_layer").get_param("W").copy()
    optimizer = nlp.create_optimizer()
    for _ in range(2):
        losses = nlp.update(examples, sgd=optimizer, losses={})
    assert losses["transformer"] > 0 and losses["textcat"] > 0
    changed = [name for name, parameter in encoder.named_parameters() if not (parameter == before[name]).all()]
    assert any("encoder.layer" in name for name in changed)
    assert not numpy.array_equal(W, component.model.get_ref("output_layer").get_param("W"))
