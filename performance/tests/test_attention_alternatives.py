"""The performance measurements' formulations of SLA's layers compute what production
computes (the reference of tests/reference.py), in prediction on either
side of MATERIALISE_UP_TO and in training, and reach a pipeline's layers
at construction; the span-by-span syntax mask builds the masks production
slices from whole Docs."""
import numpy
import pytest
import torch
from layers.masked_batches import LONG, SHORT, encoder_inputs, reference_encoder
from spacy.tokens import Doc

from performance.attention_alternatives import ALTERNATIVES, computing_by, create_computing_by
from spacy_sla.layers import SyntaxAwareTransformer

from util import english_vocab, parsed_doc, sla_nlp, the_cat_sat, tiny_encoder


@pytest.mark.parametrize("n_pieces", [SHORT, LONG])
@pytest.mark.parametrize("formulation", sorted(ALTERNATIVES))
def test_every_formulation_computes_the_reference(formulation, n_pieces):
    torch.manual_seed(0)
    sla = SyntaxAwareTransformer(tiny_encoder("bert"), gated_attention=ALTERNATIVES[formulation]).eval()
    for module in sla.sla_modules():
        module.dropout_prob = 0.0
    reference = reference_encoder(sla, tiny_encoder("bert"))
    inputs = encoder_inputs(n_pieces, restricted=[0, 3])
    real = inputs["attention_mask"].bool()[..., None]
    with torch.no_grad():
        predicted, expected = sla(**inputs).last_hidden_state, reference(**inputs).last_hidden_state
    assert torch.allclose(predicted * real, expected * real, atol=1e-5)
    grads = []
    for model in (sla, reference):
        (model(**inputs).last_hidden_state * real).pow(2).sum().backward()
        grads.append(torch.cat([module.gate.weight.grad.flatten() for module in model.sla_modules()]))
    assert torch.allclose(grads[0], grads[1], atol=1e-5)


def test_a_pipeline_computes_by_the_formulation_given_before_its_initialisation(tiny_bert):
    nlp = computing_by(sla_nlp(tiny_bert, initialize=False), "two-sdpa-calls")
    nlp.initialize()
    modules = nlp.get_pipe("sla_transformer").model.transformer.wrapped_modules()
    assert modules and all(module.gated_attention is ALTERNATIVES["two-sdpa-calls"] for module in modules)
    with pytest.raises(ValueError, match="before its initialisation"):
        computing_by(nlp, "two-sdpa-calls")
    with pytest.raises(ValueError, match="one of production"):
        create_computing_by("no-such-formulation")


def test_the_span_by_span_mask_gives_the_whole_doc_masks(tiny_bert):
    vocab = english_vocab()
    chain = parsed_doc(vocab, "a b c d e f g".split(), [1, 2, 3, 4, 5, 6, 6])
    docs = [Doc.from_docs([the_cat_sat(vocab), chain]), chain]
    masks = []
    for name in ("spacy-sla.syntax_mask.v1", "sla-performance.span_by_span_syntax_mask.v1"):
        nlp = sla_nlp(tiny_bert, mask={"@misc": name, "threshold": 1, "punct_rule": "spacy"})
        masks.append(nlp.get_pipe("sla_transformer").local_masks(docs))
    assert len(masks[0]) == len(masks[1]) == 2 and not masks[0][0].all()
    for whole_doc, span_by_span in zip(*masks):
        assert numpy.array_equal(whole_doc, span_by_span)
    assert type(nlp.get_pipe("sla_transformer").model.settings.mask).__name__ == "SpanBySpanSyntaxMask"
