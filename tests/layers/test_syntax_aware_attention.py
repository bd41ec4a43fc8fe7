"""SyntaxAwareAttention: the gated two-branch attention follows its formulas
on every path, and each prediction path gives what the plain path gives.

Prediction leaves out the local branch of the sequences whose boolean mask
hides nothing (their local context is the global one, whatever the gate):
the outputs, gates and gradients equal those of computing every branch, and
the skip happens only in prediction, only for boolean masks. Short inputs on
the CPU (float32, no dropout, no gradients) are predicted from one score
matrix, the two probability matrices mixed, instead of two SDPA calls: the
outputs equal those of the SDPA path, and the other paths are kept where
they apply. These tests count SDPA calls, so their batches compute by PATHS
(no groups by width; two SDPA calls unless a test materialises)."""
from dataclasses import replace

import numpy
import pytest
import torch
from spacy.tokens import Doc
from torch.nn import functional as F

from spacy_sla.layers import AttentionBatch, AttentionPaths, SyntaxAwareAttention, attending

from .masked_batches import (
    N_PIECES,
    N_SEQUENCES,
    PATHS,
    SdpaCalls,
    attend,
    attention_mask,
    batch_of,
    encoder_outputs,
    local_mask,
    make_inputs,
    make_module,
)
from util import (
    batch_inputs,
    english_vocab,
    parsed_doc,
    random_local_mask,
    sla_nlp,
    the_cat_sat,
    trf_output,
)


def reference_attention(hidden, query, key, value, gate, key_is_real, local_visible):
    """The SLA formulas written out with an explicit softmax."""
    head_size = query.shape[-1]
    scores = query @ key.transpose(-1, -2) / head_size**0.5
    padding = torch.where(key_is_real[:, None, None, :], 0.0, float("-inf"))
    local = torch.where(local_visible[:, None] | ~key_is_real[:, None, :, None], 0.0, float("-inf"))
    global_probs = torch.softmax(scores + padding, -1)
    local_probs = torch.softmax(scores + padding + local, -1)
    g = torch.sigmoid(gate(hidden))  # (batch, pieces, 1)
    merge = lambda x: x.transpose(1, 2).reshape(hidden.shape[0], hidden.shape[1], -1)  # noqa: E731
    return g * merge(local_probs @ value) + (1 - g) * merge(global_probs @ value)


@pytest.mark.parametrize("output_attentions", [False, True])
def test_gated_attention_follows_the_formulas(output_attentions):
    torch.manual_seed(3)
    attention = SyntaxAwareAttention(hidden_size=16, n_heads=2, dropout_prob=0.5).eval()
    with torch.no_grad():
        attention.gate.weight.normal_(std=0.5)
        attention.gate.bias.fill_(0.3)
    hidden = torch.randn(2, 9, 16)
    query, key, value = (torch.randn(2, 2, 9, 8) for _ in range(3))
    _, attention_mask = batch_inputs()
    local_visible = random_local_mask()
    with torch.no_grad(), attending(AttentionBatch.from_inputs(attention_mask, local_visible)):
        context, probs = attention.attend(hidden, query, key, value, output_attentions)
        expected = reference_attention(
            hidden, query, key, value, attention.gate, attention_mask.bool(), local_visible
        )
    assert torch.allclose(context, expected, atol=1e-5)
    if output_attentions:
        assert torch.allclose(probs.sum(-1), torch.ones(2, 2, 9))
        hidden_by_both = ~local_visible[:, None] & torch.ones(2, 2, 9, 9, dtype=torch.bool)
        hidden_by_both &= ~attention_mask.bool()[:, None, None, :] | ~local_visible[:, None]
        # where the local mask hides a real key, only the global branch's
        # share (1 - g) of the probability remains
        g = torch.sigmoid(attention.gate(hidden))[:, None]
        assert (probs <= (1 - g) + 1e-6).masked_select(hidden_by_both).all()
    else:
        assert probs is None


def test_without_a_local_mask_only_global_attention_runs():
    attention = SyntaxAwareAttention(hidden_size=16, n_heads=2, dropout_prob=0.0).eval()
    hidden = torch.randn(2, 9, 16)
    query, key, value = (torch.randn(2, 2, 9, 8) for _ in range(3))
    _, attention_mask = batch_inputs()
    with torch.no_grad(), attending(AttentionBatch.from_inputs(attention_mask, None)):
        context, _ = attention.attend(hidden, query, key, value)
        everything = torch.ones(2, 9, 9, dtype=torch.bool)
        expected = reference_attention(hidden, query, key, value, attention.gate, attention_mask.bool(), everything)
    assert torch.allclose(context, expected, atol=1e-5)


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
def test_the_materialised_path_normalises_the_local_branch_by_its_own_maximum(dtype, atol):
    """With every locally visible score ~200 below the row maximum (past
    exp's underflow in any float type), the local branch must still be a
    softmax over its visible keys, as in the fused path, not zeros."""
    torch.manual_seed(5)
    attention = SyntaxAwareAttention(hidden_size=16, n_heads=2, dropout_prob=0.0).eval()
    hidden, query, key, value, local_visible = far_below_the_maximum_inputs(gap=200.0)
    attention_mask = torch.ones(1, 6, dtype=torch.long)
    with torch.no_grad():
        expected = reference_attention(
            hidden.double(), query.double(), key.double(), value.double(), attention.double().gate,
            attention_mask.bool(), local_visible,
        )
    attention = attention.to(dtype)
    outputs = {}
    for fused in (True, False):
        batch = AttentionBatch.from_inputs(attention_mask, local_visible, paths=AttentionPaths(fused_attention=fused))
        try:
            with torch.no_grad(), attending(batch):
                outputs[fused], _ = attention.attend(*(x.to(dtype) for x in (hidden, query, key, value)))
        except RuntimeError as error:  # an operator this CPU build lacks for the type
            pytest.skip(f"{dtype} on this CPU: {error}")
    for fused, output in outputs.items():
        assert torch.allclose(output.double(), expected, atol=atol), (fused, (output.double() - expected).abs().max())
    with torch.no_grad(), attending(AttentionBatch.from_inputs(attention_mask, local_visible)):
        _, probs = attention.attend(*(x.to(dtype) for x in (hidden, query, key, value)), output_attentions=True)
    # row 1 cannot see key 0 locally: its local share (g) goes to keys 1 and 2
    assert probs[0, :, 1, 1:3].float().sum(-1).min() > 0.3


@pytest.mark.parametrize(
    "restricted,local_batch_sizes",
    [
        ([], []),  # every sequence fully visible: no local call at all
        ([2], [1]),
        ([0, 3], [2]),
        ([0, 1, 3], [3]),  # 3 / 4 <= gather_max_share
        ([0, 1, 2, 3], [N_SEQUENCES]),  # all: the plain batched call
    ],
)
def test_prediction_computes_the_local_branch_of_restricted_sequences_only(restricted, local_batch_sizes, monkeypatch):
    module = make_module()
    batch = batch_of(attention_mask(), local_mask(restricted), record_gates=True)
    expected, _ = attend(module, batch_of(attention_mask(), local_mask(restricted), record_gates=True), False)
    calls = SdpaCalls(monkeypatch)
    context, _ = attend(module, batch, True)
    assert calls.batch_sizes == [N_SEQUENCES] + local_batch_sizes
    assert torch.allclose(context, expected, atol=1e-5), (context - expected).abs().max()
    # the gates of every sequence, skipped or not, as before
    assert len(batch.gates) == 1 and batch.gates[0].shape == (N_SEQUENCES, N_PIECES)
    assert torch.isfinite(batch.gates[0]).all()
    hidden, _ = make_inputs()
    with torch.no_grad():
        assert torch.equal(batch.gates[0], torch.sigmoid(module.gate(hidden))[..., 0])


def test_skipped_sequences_get_exactly_their_global_context():
    module = make_module()
    batch = batch_of(attention_mask(), local_mask([2]))
    context, (query, key, value) = attend(module, batch, True)
    global_context = module.merge_heads(F.scaled_dot_product_attention(query, key, value, attn_mask=batch.global_mask))
    skipped = [0, 1, 3]
    assert torch.equal(context[skipped], global_context[skipped])
    assert not torch.allclose(context[2], global_context[2], atol=1e-3)


def test_above_the_gather_share_every_sequence_takes_the_batched_call(monkeypatch):
    half = replace(PATHS, gather_max_share=0.5)
    module = make_module()
    expected, _ = attend(module, batch_of(attention_mask(), local_mask([0, 1, 3]), paths=half), False)
    batch = batch_of(attention_mask(), local_mask([0, 1, 3]), paths=half)
    assert batch.local_rows is None
    calls = SdpaCalls(monkeypatch)
    context, _ = attend(module, batch, True)
    assert calls.batch_sizes == [N_SEQUENCES, N_SEQUENCES]
    assert torch.allclose(context, expected, atol=1e-5)
    # at or below the share it gathers
    assert batch_of(attention_mask(), local_mask([0, 3]), paths=half).local_rows.tolist() == [0, 3]


def test_a_mask_with_an_empty_row_keeps_the_boolean_form_when_gathered(monkeypatch):
    """No builder makes a row that sees no key; SDPA gives its local branch
    zeros with the boolean mask, gathered or not."""
    mask = local_mask([1])
    mask[1, 2] = False
    module = make_module()
    expected, _ = attend(module, batch_of(attention_mask(), mask), False)
    calls = SdpaCalls(monkeypatch)
    context, _ = attend(module, batch_of(attention_mask(), mask), True)
    assert calls.batch_sizes == [N_SEQUENCES, 1]
    assert torch.allclose(context, expected, atol=1e-5)


def test_bias_variants_compute_every_local_branch(monkeypatch):
    module = make_module(bias=True)
    buckets = torch.randint(0, 5, (N_SEQUENCES, N_PIECES, N_PIECES), generator=torch.Generator().manual_seed(4))
    expected, _ = attend(module, batch_of(attention_mask(), local_buckets=buckets), False)
    calls = SdpaCalls(monkeypatch)
    context, _ = attend(module, batch_of(attention_mask(), local_buckets=buckets), True)
    assert calls.batch_sizes == [N_SEQUENCES, N_SEQUENCES]
    assert torch.equal(context, expected)


def test_with_dropout_every_local_branch_is_computed(monkeypatch):
    """Each branch draws its own dropout mask, so a fully visible sequence's
    local context is not its global one."""
    module = make_module(dropout=0.3).train()
    calls = SdpaCalls(monkeypatch)
    attend(module, batch_of(attention_mask(), local_mask([2])), True)
    assert calls.batch_sizes == [N_SEQUENCES, N_SEQUENCES]
    # without dropout (p = 0) in train mode and no gradients, it skips
    calls.batch_sizes.clear()
    attend(make_module(dropout=0.0).train(), batch_of(attention_mask(), local_mask([2])), True)
    assert calls.batch_sizes == [N_SEQUENCES, 1]


@pytest.mark.parametrize("memory_saving", [True, False])
def test_with_gradients_nothing_is_skipped_and_the_gradients_are_unchanged(memory_saving, monkeypatch):
    paths = replace(PATHS, memory_saving_training=memory_saving)
    results = {}
    for skip in (True, False):
        module = make_module(dropout=0.0)
        calls = SdpaCalls(monkeypatch)
        context, qkv = attend(module, batch_of(attention_mask(), local_mask([2]), paths=paths), skip, grad=True)
        weights = torch.randn(context.shape, generator=torch.Generator().manual_seed(9))
        (context * weights).sum().backward()
        results[skip] = (context.detach(), [t.grad for t in qkv] + [module.gate.weight.grad, module.gate.bias.grad])
        assert calls.batch_sizes == ([] if memory_saving else [N_SEQUENCES, N_SEQUENCES])
    assert torch.equal(results[True][0], results[False][0])
    for with_skip, without in zip(results[True][1], results[False][1]):
        assert with_skip.abs().sum() > 0 and torch.equal(with_skip, without)


@pytest.mark.parametrize("restricted", [[], [1], [0, 2, 3], [0, 1, 2, 3]])
def test_the_encoder_output_and_gates_are_unchanged(restricted, monkeypatch):
    expected, expected_gates = encoder_outputs(False, restricted)
    calls = SdpaCalls(monkeypatch)
    output, gates = encoder_outputs(True, restricted)
    local_size = len(restricted) if len(restricted) < N_SEQUENCES else N_SEQUENCES
    assert calls.batch_sizes == ([N_SEQUENCES] + ([local_size] if restricted else [])) * 3
    assert torch.allclose(output, expected, atol=1e-5), (output - expected).abs().max()
    assert gates.shape == (3, N_SEQUENCES, N_PIECES)
    assert torch.allclose(gates, expected_gates, atol=1e-6)


def test_the_pipeline_passes_the_flags_and_its_outputs_and_gates_are_unchanged(tiny_bert, monkeypatch):
    """Two Docs the syntax mask hides nothing in (3 words; one sentence of
    m + 1 tokens), two it restricts (two sentences, which never see each
    other; a chain longer than m)."""
    vocab = english_vocab()
    chain = parsed_doc(vocab, "a b c d e f g".split(), [1, 2, 3, 4, 5, 6, 6])
    short = parsed_doc(vocab, ["she", "ran", "home"], [1, 1, 1])
    two_sentences = Doc.from_docs([the_cat_sat(vocab), short])
    docs = [short, two_sentences, chain, parsed_doc(vocab, "she ran .".split(), [1, 1, 1])]
    mask = {"@misc": "spacy-sla.syntax_mask.v1", "threshold": 3, "punct_rule": "spacy"}
    component = sla_nlp(tiny_bert, mask=mask).get_pipe("sla_transformer")
    component.store_gates = True
    flags = []
    original = AttentionBatch.from_inputs.__func__

    def recorded(cls, *args, **kwargs):
        flags.append(args[5].tolist() if len(args) > 5 else kwargs.get("local_restricted"))
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(AttentionBatch, "from_inputs", classmethod(recorded))
    results = {}
    calls = SdpaCalls(monkeypatch)
    for skip in (False, True):
        component.model.transformer.attention_paths = replace(PATHS, skip_fully_visible=skip)
        calls.batch_sizes = []
        predicted = list(component.pipe([doc.copy() for doc in docs]))
        results[skip] = ([trf_output(doc) for doc in predicted], [doc._.sla_gates for doc in predicted], calls.batch_sizes)
    assert flags == [[False, True, True, False]] * 2
    assert results[False][2] == [4, 4] * 2
    assert results[True][2] == [4, 2] * 2
    for with_skip, without in zip(results[True][0], results[False][0]):
        assert numpy.allclose(with_skip, without, atol=1e-5)
    for with_skip, without in zip(results[True][1], results[False][1]):
        assert with_skip.shape == without.shape and numpy.isfinite(with_skip).all()
        assert numpy.allclose(with_skip, without, atol=1e-6)


def predicted(module, batch, materialise: bool):
    batch.paths = replace(batch.paths, materialise_up_to=N_PIECES if materialise else 0)
    return attend(module, batch, True)[0]


@pytest.mark.parametrize("restricted", [[2], [0, 3], [0, 1, 2, 3]])
def test_short_inputs_mix_the_probabilities_with_the_outputs_of_two_sdpa_calls(restricted, monkeypatch):
    module = make_module()
    expected = predicted(module, batch_of(attention_mask(), local_mask(restricted)), False)
    calls = SdpaCalls(monkeypatch)
    batch = batch_of(attention_mask(), local_mask(restricted), record_gates=True)
    context = predicted(module, batch, True)
    assert calls.batch_sizes == []
    assert torch.allclose(context, expected, atol=1e-5), (context - expected).abs().max()
    assert len(batch.gates) == 1 and torch.isfinite(batch.gates[0]).all()
    # no restricted sequence: the global call alone, as before
    context = predicted(module, batch_of(attention_mask(), local_mask([])), True)
    assert calls.batch_sizes == [N_SEQUENCES]
    hidden, (query, key, value) = make_inputs()
    global_context = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask().bool()[:, None, None])
    assert torch.equal(context, module.merge_heads(global_context))


def test_the_materialised_prediction_of_an_empty_row_and_of_a_bias_equals_sdpa(monkeypatch):
    mask = local_mask([1])
    mask[1, 2] = False  # a row that sees no key: SDPA gives its local branch zeros
    buckets = torch.randint(0, 5, (N_SEQUENCES, N_PIECES, N_PIECES), generator=torch.Generator().manual_seed(4))
    for module, inputs in ((make_module(), {"local_mask": mask}), (make_module(bias=True), {"local_buckets": buckets})):
        expected = predicted(module, batch_of(attention_mask(), **inputs), False)
        calls = SdpaCalls(monkeypatch)
        context = predicted(module, batch_of(attention_mask(), **inputs), True)
        assert calls.batch_sizes == []
        assert torch.allclose(context, expected, atol=1e-5), (context - expected).abs().max()


def test_longer_inputs_dropout_and_gradients_keep_their_paths(monkeypatch):
    def restricting(**paths) -> AttentionBatch:
        return batch_of(attention_mask(), local_mask([0, 1, 2, 3]), paths=replace(PATHS, **paths))

    calls = SdpaCalls(monkeypatch)
    attend(make_module(), restricting(materialise_up_to=N_PIECES - 1), True)
    assert calls.batch_sizes == [N_SEQUENCES, N_SEQUENCES]
    calls.batch_sizes.clear()
    attend(make_module(dropout=0.3).train(), restricting(materialise_up_to=N_PIECES), True)
    assert calls.batch_sizes == [N_SEQUENCES, N_SEQUENCES]
    calls.batch_sizes.clear()
    attend(make_module(dropout=0.0), restricting(materialise_up_to=N_PIECES, memory_saving_training=False), True, grad=True)
    assert calls.batch_sizes == [N_SEQUENCES, N_SEQUENCES]


@pytest.mark.parametrize("restricted", [[1], [0, 1, 2, 3]])
def test_the_encoder_output_is_the_same_materialised(restricted, monkeypatch):
    expected, expected_gates = encoder_outputs(True, restricted, replace(PATHS, materialise_up_to=0))
    calls = SdpaCalls(monkeypatch)
    output, gates = encoder_outputs(True, restricted, replace(PATHS, materialise_up_to=N_PIECES))
    assert calls.batch_sizes == []
    assert torch.allclose(output, expected, atol=1e-5), (output - expected).abs().max()
    assert torch.allclose(gates, expected_gates, atol=1e-6)
