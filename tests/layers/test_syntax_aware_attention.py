"""SyntaxAwareAttention computes the gated two-branch attention of its
definition (tests/reference.py) in every situation, and each situation
takes the computation production relies on.

Prediction mixes the two probability matrices up to MATERIALISE_UP_TO
pieces on the CPU in float32 (SHORT: no SDPA call), and beyond calls SDPA
(LONG), leaving out the local branch of the sequences whose boolean mask
hides nothing (their local context is the global one, whatever the gate),
gathering the others while they are few, or grouping them by width
(tests/layers/test_prediction_schedule.py); bias variants and position
terms compute every branch; training (dropout or gradients) goes through
TwoBranchAttention; output_attentions materialises the probabilities."""
from typing import List, Optional, Tuple

import numpy
import pytest
import torch
from spacy.tokens import Doc
from torch.nn import functional as F

from spacy_sla.layers import AttentionBatch, SyntaxAwareAttention, SyntaxAwareTransformer, two_branch
from spacy_sla.layers.family_adapters import BertStyleSelfAttention
from spacy_sla.layers.local_bias import DependencyScale

from .masked_batches import (
    HIDDEN,
    LONG,
    N_BUCKETS,
    N_HEADS,
    N_SEQUENCES,
    SHORT,
    SdpaCalls,
    attend,
    attention_mask,
    buckets,
    encoder_inputs,
    lengths_of,
    local_mask,
    make_inputs,
    make_module,
    position_term,
    reference_context,
    reference_encoder,
    reference_pipeline,
)
from reference import two_branch_attention
from util import (
    batch_inputs,
    english_vocab,
    parsed_doc,
    sla_nlp,
    the_cat_sat,
    tiny_encoder,
    trf_output,
)

ALL = list(range(N_SEQUENCES))
# id: (width, varied lengths, restricted sequences, a row that sees no key,
# bias variant, position term, the (batch, width) of every SDPA call of prediction)
SITUATIONS = {
    "short, nothing hidden": (SHORT, True, [], False, False, False, [(4, SHORT)]),
    "short, some hidden": (SHORT, True, [2], False, False, False, []),
    "short, all hidden": (SHORT, True, ALL, False, False, False, []),
    "short, a row sees no key": (SHORT, True, [1], True, False, False, []),
    "short, bias": (SHORT, True, None, False, True, False, []),
    "short, position term": (SHORT, True, [1], False, False, True, []),
    "short, position term and bias": (SHORT, True, None, False, True, True, []),
    "long, nothing hidden": (LONG, False, [], False, False, False, [(4, LONG)]),
    "long, one gathered": (LONG, False, [2], False, False, False, [(4, LONG), (1, LONG)]),
    "long, three gathered": (LONG, False, [0, 1, 3], False, False, False, [(4, LONG), (3, LONG)]),
    "long, all hidden": (LONG, False, ALL, False, False, False, [(4, LONG), (4, LONG)]),
    "long, by width": (LONG, True, ALL, False, False, False, [(4, LONG), (1, LONG // 2), (1, 2 * LONG // 3), (2, LONG)]),
    "long, a row sees no key": (LONG, False, [1], True, False, False, [(4, LONG), (1, LONG)]),
    "long, bias": (LONG, True, None, False, True, False, [(4, LONG), (4, LONG)]),
    "long, position term": (LONG, True, [1, 2], False, False, True, [(4, LONG), (4, LONG)]),
    "long, position term and bias": (LONG, True, None, False, True, True, [(4, LONG), (4, LONG)]),
}


def situation(name: str, record_gates: bool = False) -> Tuple[SyntaxAwareAttention, AttentionBatch, Optional[torch.Tensor]]:
    """The layer, the batch and the position term (or None) of a situation."""
    n_pieces, varied, restricted, empty_row, bias, position, _ = SITUATIONS[name]
    lengths = lengths_of(n_pieces, varied)
    if bias:
        batch = AttentionBatch.from_inputs(attention_mask(lengths), local_buckets=buckets(n_pieces), record_gates=record_gates)
    else:
        mask = local_mask(restricted, lengths)
        if empty_row:  # no builder makes one; SDPA gives the row's local branch zeros
            mask[restricted[0], 2] = False
        batch = AttentionBatch.from_inputs(attention_mask(lengths), mask, record_gates=record_gates)
    return make_module(bias), batch, position_term(n_pieces) if position else None


def real_rows(batch: AttentionBatch) -> torch.Tensor:
    return batch.global_mask[:, 0, 0, :, None]  # (batch, n, 1): padding rows are never read


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


@pytest.mark.parametrize("name", [name for name in SITUATIONS if "nothing" not in name])
def test_training_computes_the_reference_and_its_gradients_through_two_branch_attention(name, monkeypatch):
    module, batch, score_bias = situation(name)
    module.train()  # dropout_prob 0: the reference draws no dropout
    if score_bias is not None:
        score_bias.requires_grad_()
    applied = []
    original = two_branch.TwoBranchAttention.apply
    monkeypatch.setattr(two_branch.TwoBranchAttention, "apply", lambda *args: applied.append(1) or original(*args))
    calls = SdpaCalls(monkeypatch)
    context, qkv = attend(module, batch, grad=True, score_bias=score_bias)
    assert applied == [1] and calls.shapes == []
    expected = reference_context(module, batch, qkv, score_bias)
    inputs = qkv + list(module.parameters()) + ([] if score_bias is None else [score_bias])
    weights = torch.randn(context.shape, generator=torch.Generator().manual_seed(9)) * real_rows(batch)
    grads = torch.autograd.grad((context * weights).sum(), inputs)
    expected_grads = torch.autograd.grad((expected * weights).sum(), inputs)
    assert torch.allclose(context * real_rows(batch), expected * real_rows(batch), atol=1e-5)
    for grad, expected_grad in zip(grads, expected_grads):
        assert grad.abs().sum() > 0 and torch.allclose(grad, expected_grad, atol=1e-5), (grad - expected_grad).abs().max()


def test_skipped_sequences_get_exactly_their_global_context():
    module, batch, _ = situation("long, one gathered")
    context, (query, key, value) = attend(module, batch)
    global_context = module.merge_heads(F.scaled_dot_product_attention(query, key, value, attn_mask=batch.global_mask))
    assert torch.equal(context[[0, 1, 3]], global_context[[0, 1, 3]])
    assert not torch.allclose(context[2], global_context[2], atol=1e-3)


def test_with_dropout_each_branch_draws_its_own_mask_without_gradients(monkeypatch):
    """Training's dropout in prediction's mode (no gradients) still goes
    through TwoBranchAttention: a fully visible sequence's local context is
    not its global one."""
    module, batch, _ = situation("long, one gathered")
    module.dropout_prob = 0.3
    module.train()
    calls = SdpaCalls(monkeypatch)
    masks = []
    original = two_branch.drop_out_pair
    monkeypatch.setattr(two_branch, "drop_out_pair", lambda *args: masks.append(original(*args)) or masks[-1])
    attend(module, batch)
    assert calls.shapes == [] and len(masks) == 1
    global_keep, local_keep = masks[0]
    assert not torch.equal(global_keep[0], local_keep[0])


@pytest.mark.parametrize("name", ["short, some hidden", "long, by width", "short, position term and bias"])
def test_output_attentions_gives_the_reference_probabilities(name):
    module, batch, score_bias = situation(name)
    hidden, qkv = make_inputs(batch.global_mask.shape[-1])
    with torch.no_grad():
        context, probs = module.attend(batch, hidden, *qkv, output_attentions=True, score_bias=score_bias)
        gate = torch.sigmoid(module.gate(hidden)).transpose(1, 2)[..., None]
        expected, expected_probs = two_branch_attention(
            *qkv, batch.global_mask, gate, module.local_input(batch, torch.float32, hidden), score_bias
        )
    real = real_rows(batch)
    assert torch.allclose(context * real, module.merge_heads(expected) * real, atol=1e-5)
    assert torch.allclose(probs * real[:, None], expected_probs * real[:, None], atol=1e-6)
    assert torch.allclose(probs.sum(-1), torch.ones(probs.shape[:-1]), atol=1e-5)


def test_without_a_local_input_only_global_attention_runs(monkeypatch):
    attention = SyntaxAwareAttention(hidden_size=16, n_heads=2, dropout_prob=0.0).eval()
    hidden = torch.randn(2, 9, 16)
    query, key, value = (torch.randn(2, 2, 9, 8) for _ in range(3))
    _, mask = batch_inputs()
    batch = AttentionBatch.from_inputs(mask, None, record_gates=True)
    calls = SdpaCalls(monkeypatch)
    with torch.no_grad():
        context, _ = attention.attend(batch, hidden, query, key, value)
    expected, _ = two_branch_attention(query, key, value, batch.global_mask)
    assert calls.shapes == [(2, 9)]
    assert torch.allclose(context, attention.merge_heads(expected), atol=1e-5)
    assert torch.isnan(batch.gates[0]).all()  # the layer's gate, unused


def far_below_the_maximum_inputs(gap: float):
    """Queries and keys whose scores put key 0 `gap` above every other key of
    each row; the local mask hides key 0 from every row but its own, so each
    local branch only sees scores far below the row maximum."""
    generator = torch.Generator().manual_seed(4)
    head_size = 8
    query = torch.zeros(1, 2, 6, head_size)
    query[..., 0] = 1.0
    key = torch.randn(1, 2, 6, head_size, generator=generator) * 0.1
    key[..., 0] = torch.randn(1, 2, 6, generator=generator) * 0.1
    key[:, :, 0, 0] = gap * head_size**0.5  # score of key 0: gap / sqrt(d) * sqrt(d) = gap
    value = torch.randn(1, 2, 6, head_size, generator=generator)
    hidden = torch.randn(1, 6, 16, generator=generator)
    local_visible = torch.eye(6, dtype=torch.bool)[None] | torch.diag(torch.ones(5, dtype=torch.bool), 1)[None]
    return hidden, query, key, value, local_visible


@pytest.mark.parametrize("dtype,atol", [(torch.float32, 1e-5), (torch.bfloat16, 5e-2), (torch.float16, 1e-2)])
def test_the_local_branch_is_normalised_by_its_own_maximum(dtype, atol):
    """With every locally visible score ~200 below the row maximum (past
    exp's underflow in any float type), the local branch must still be a
    softmax over its visible keys, not zeros: in prediction (mixed
    probabilities in float32, SDPA in half precision) and with
    output_attentions."""
    torch.manual_seed(5)
    attention = SyntaxAwareAttention(hidden_size=16, n_heads=2, dropout_prob=0.0).eval()
    hidden, query, key, value, local_visible = far_below_the_maximum_inputs(gap=200.0)
    batch = AttentionBatch.from_inputs(torch.ones(1, 6, dtype=torch.long), local_visible)
    with torch.no_grad():
        gate = torch.sigmoid(attention.double().gate(hidden.double())).transpose(1, 2)[..., None]
        expected, _ = two_branch_attention(query.double(), key.double(), value.double(), batch.global_mask, gate, batch.local_mask)
    attention = attention.to(dtype)
    outputs = []
    try:
        with torch.no_grad():
            for output_attentions in (False, True):
                outputs.append(attention.attend(batch, *(x.to(dtype) for x in (hidden, query, key, value)), output_attentions))
    except RuntimeError as error:  # an operator this CPU build lacks for the type
        pytest.skip(f"{dtype} on this CPU: {error}")
    for context, _ in outputs:
        assert torch.allclose(context.double(), attention.merge_heads(expected), atol=atol)
    # row 1 cannot see key 0 locally: its local share (g) goes to keys 1 and 2
    assert outputs[1][1][0, :, 1, 1:3].float().sum(-1).min() > 0.3


def test_an_adapter_called_outside_a_forward_pass_is_refused():
    sla = SyntaxAwareTransformer(tiny_encoder("bert")).eval()
    module = sla.wrapped_modules()[0]
    assert isinstance(module, BertStyleSelfAttention) and module.bound_batch is None
    with pytest.raises(RuntimeError, match="outside SyntaxAwareTransformer.forward"):
        module(torch.randn(2, 9, 32))


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
    mask = {"@misc": "spacy-sla.syntax_mask.v3", "threshold": 3, "punct_rule": "spacy"}
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



def test_a_score_transform_materialises_the_probabilities_and_gives_the_references(monkeypatch):
    """The authors' soft threshold rescales the scores: no additive mask
    expresses it, so prediction and training take the probabilities."""
    torch.manual_seed(7)
    module = SyntaxAwareAttention(HIDDEN, N_HEADS, 0.0, local_bias=DependencyScale(HIDDEN, N_HEADS, N_BUCKETS - 3))
    with torch.no_grad():
        module.local_bias.threshold.weight.normal_(std=1.0)
    lengths = lengths_of(SHORT)
    batch = AttentionBatch.from_inputs(attention_mask(lengths), local_buckets=buckets(SHORT))
    calls = SdpaCalls(monkeypatch)
    for training in (False, True):
        context, qkv = attend(module.train(training), batch, grad=training)
        expected = reference_context(module, batch, qkv)
        assert torch.allclose(context * real_rows(batch), expected * real_rows(batch), atol=1e-5)
    assert calls.shapes == []
