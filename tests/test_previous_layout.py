"""Pipelines saved by an earlier version of spacy-sla (commit 8494195: the
flat package layout, settings kept in the model's attrs) still load and
compute what they computed then."""
import json
import warnings
from pathlib import Path

import numpy
import pytest
import spacy
from spacy.tokens import Doc

from spacy_sla import MissingParseError

from util import parsed_doc

DATA = Path(__file__).parent / "data" / "previous_layout"


def the_sentence(nlp) -> Doc:
    expected = json.loads((DATA / "sla-v1-expected.json").read_text())
    return parsed_doc(nlp.vocab, expected["words"], expected["heads"])


def test_an_sla_v1_pipeline_computes_what_it_computed():
    nlp = spacy.load(DATA / "sla-v1")
    expected = json.loads((DATA / "sla-v1-expected.json").read_text())
    doc = nlp(the_sentence(nlp))
    hidden = doc._.trf_data.model_output.last_hidden_state
    assert numpy.allclose(hidden, numpy.load(DATA / "sla-v1-hidden.npy"), atol=1e-5)
    assert [t.tag_ for t in doc] == expected["tags"]
    # store_gates was saved as true
    assert numpy.allclose(doc._.sla_gates, numpy.array(expected["gates"]), atol=1e-5)


def test_a_v2_pipeline_with_every_variant_computes_what_it_computed():
    nlp = spacy.load(DATA / "v2-softbias-sgnet-lisa")
    doc = nlp(the_sentence(nlp))
    hidden = doc._.trf_data.model_output.last_hidden_state
    assert numpy.allclose(hidden, numpy.load(DATA / "v2-softbias-sgnet-lisa-hidden.npy"), atol=1e-5)
    # its saved on_missing_parse ("global") applies to an unparsed Doc
    with pytest.warns(UserWarning, match=r"\[SLA-W001\]"):
        nlp("no parse here")


def test_a_load_time_setting_wins_over_the_saved_one():
    overrides = {"components": {"transformer": {"model": {"on_missing_parse": "error"}}}}
    nlp = spacy.load(DATA / "v2-softbias-sgnet-lisa", config=overrides)
    with pytest.raises(MissingParseError, match=r"\[SLA-E001\]"):
        nlp("no parse here")
    nlp = spacy.load(DATA / "sla-v1", config={"components": {"transformer": {"store_gates": False}}})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        doc = nlp(the_sentence(nlp))
    assert doc._.sla_gates is None
