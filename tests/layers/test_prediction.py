"""Prediction (prediction.py) computes the gated two-branch attention of
its definition (tests/reference.py) by the computation its situation calls
for: up to MATERIALISE_UP_TO pieces on the CPU in float32 (SHORT) the two
probability matrices mixed, no SDPA call; beyond (LONG) two SDPA calls,
leaving out the local branch of the sequences whose boolean mask hides
nothing (their local context is the global one, whatever the gate),
gathering the others while they are few, or grouping them by width
(test_prediction_schedule.py); bias variants and position terms compute
every sequence's branches. The encoder and the pipeline predict the
reference's outputs and gates."""
from typing import List

import numpy
import pytest
import torch
from spacy.tokens import Doc
from torch.nn import functional as F

from spacy_sla.layers import AttentionBatch, SyntaxAwareTransformer

from .masked_batches import (
    ALL,
    LONG,
    N_SEQUENCES,
    SHORT,
    SITUATIONS,
    SdpaCalls,
    attend,
    encoder_inputs,
    make_inputs,
    real_rows,
    reference_context,
    reference_encoder,
    reference_pipeline,
    situation,
)
from util import english_vocab, parsed_doc, sla_nlp, the_cat_sat, tiny_encoder, trf_output


@pytest.mark.parametrize("name", SITUATIONS)
def test_prediction_computes_the_reference_by_the_computation_of_its_situation(name, monkeypatch):
    module, batch, score_bias = situation(name, record_gates=True)
    calls = SdpaCalls(monkeypatch)
    context, qkv = attend(module, batch, score_bias=score_bias)
    assert calls.shapes == SITUATIONS[name][-1]
    expected = reference_context(module, batch, qkv, score_bias)
    assert torch.allclose(context * real_rows(batch), expected * real_rows(batch), atol=1e-5), (context - expected).abs().max()
    # the gates of every sequence, skipped or not
    hidden, _ = make_inputs(context.shape[1])
    assert len(batch.gates) == 1 and torch.equal(batch.gates[0], torch.sigmoid(module.gate(hidden)).mean(-1).detach())


def test_skipped_sequences_get_exactly_their_global_context():
    module, batch, _ = situation("long, one gathered")
    context, (query, key, value) = attend(module, batch)
    global_context = module.merge_heads(F.scaled_dot_product_attention(query, key, value, attn_mask=batch.global_mask))
    assert torch.equal(context[[0, 1, 3]], global_context[[0, 1, 3]])
    assert not torch.allclose(context[2], global_context[2], atol=1e-3)


@pytest.mark.parametrize("n_pieces", [SHORT, LONG])
@pytest.mark.parametrize("restricted", [[], [1], [0, 3], ALL])
def test_the_encoder_output_and_gates_are_the_references(n_pieces, restricted, monkeypatch):
    model = tiny_encoder("bert")
    sla = SyntaxAwareTransformer(tiny_encoder("bert")).eval()
    reference = reference_encoder(sla, model)
    inputs = encoder_inputs(n_pieces, restricted)
    with torch.no_grad():
        expected = reference(**inputs, record_gates=True)
        calls = SdpaCalls(monkeypatch)
        output = sla(**inputs, record_gates=True)
    if n_pieces == LONG:  # every layer: the global call, and the restricted sequences' local branch
        local_calls = len(restricted) if restricted != ALL else 3  # three groups by width
        assert len(calls.shapes) == 3 * (1 + local_calls)
    else:
        assert calls.shapes == ([(N_SEQUENCES, SHORT)] * 3 if not restricted else [])
    real = inputs["attention_mask"].bool()[..., None]
    assert torch.allclose(output.last_hidden_state * real, expected.last_hidden_state * real, atol=1e-5)
    assert output.gates.shape == (3, N_SEQUENCES, n_pieces)
    assert torch.allclose(output.gates, expected.gates, atol=1e-6)


def docs_restricted_and_not() -> List[Doc]:
    """Two Docs the syntax mask hides nothing in (3 words; one sentence of
    m + 1 tokens), two it restricts (two sentences, which never see each
    other; a chain longer than m)."""
    vocab = english_vocab()
    chain = parsed_doc(vocab, "a b c d e f g".split(), [1, 2, 3, 4, 5, 6, 6])
    short = parsed_doc(vocab, ["she", "ran", "home"], [1, 1, 1])
    two_sentences = Doc.from_docs([the_cat_sat(vocab), short])
    return [short, two_sentences, chain, parsed_doc(vocab, "she ran .".split(), [1, 1, 1])]


def test_the_pipeline_passes_the_flags_and_predicts_the_reference(tiny_bert, monkeypatch):
    mask = {"@misc": "spacy-sla.syntax_mask.v1", "threshold": 3, "punct_rule": "spacy"}
    nlp = sla_nlp(tiny_bert, mask=mask)
    reference = reference_pipeline(nlp, tiny_bert, mask=mask)
    flags = []
    original = AttentionBatch.from_inputs.__func__

    def recorded(cls, *args, **kwargs):
        flags.append(args[5].tolist() if len(args) > 5 else kwargs.get("local_restricted"))
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(AttentionBatch, "from_inputs", classmethod(recorded))
    results = []
    for pipeline in (nlp, reference):
        component = pipeline.get_pipe("sla_transformer")
        component.store_gates = True
        predicted = list(component.pipe([doc.copy() for doc in docs_restricted_and_not()]))
        results.append(([trf_output(doc) for doc in predicted], [doc._.sla_gates for doc in predicted]))
    assert flags == [[False, True, True, False]] * 2
    for got, expected in zip(results[0][0], results[1][0]):
        assert numpy.allclose(got, expected, atol=1e-5)
    for got, expected in zip(results[0][1], results[1][1]):
        assert got.shape == expected.shape and numpy.isfinite(got).all() and numpy.allclose(got, expected, atol=1e-6)
