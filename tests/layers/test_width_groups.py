"""Prediction on the CPU computes the local branch of the sequences that need
one in groups of similar length, each group cut to the pieces of its longest
sequence (AttentionBatch.width_groups): contexts, encoder outputs and gates
equal those of the plain path, and training, dropout and the bias variants
keep the plain path. The materialised prediction of short inputs is turned
off (saving_paths), so that every call goes through SDPA."""
import itertools
from typing import List, Tuple

import numpy
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.tokens import Doc
from torch.nn import functional as F

from spacy_sla.layers import AttentionBatch, AttentionPaths, SyntaxAwareAttention, SyntaxAwareTransformer, attending
from spacy_sla.layers.width_groups import cheapest_cuts, width_groups, width_order

from util import english_vocab, parsed_doc, sla_nlp, the_cat_sat, tiny_encoder, trf_output

N_HEADS, HEAD_SIZE, N_PIECES = 2, 4, 12
HIDDEN = N_HEADS * HEAD_SIZE
LENGTHS = [12, 5, 12, 3, 7]
N_SEQUENCES = len(LENGTHS)
PLAIN = 1.0  # a width_groups_min_saving that no grouping meets
MAX_GROUPS = AttentionPaths().max_width_groups


def saving_paths(saving: float, **paths) -> AttentionPaths:
    """Groups by width where they spare `saving` of the work, and two SDPA
    calls at every length (the materialised path has no groups)."""
    return AttentionPaths(materialise_up_to=0, width_groups_min_saving=saving, **paths)


class SdpaShapes:
    """Records (batch, width) of every fused attention call."""

    def __init__(self, monkeypatch):
        self.shapes: List[Tuple[int, int]] = []
        original = F.scaled_dot_product_attention

        def recorded(query, *args, **kwargs):
            self.shapes.append((query.shape[0], query.shape[2]))
            return original(query, *args, **kwargs)

        monkeypatch.setattr(F, "scaled_dot_product_attention", recorded)


def attention_mask(lengths: List[int] = LENGTHS) -> torch.Tensor:
    mask = torch.zeros(len(lengths), N_PIECES, dtype=torch.long)
    for i, length in enumerate(lengths):
        mask[i, :length] = 1
    return mask


def local_mask(restricted: List[int], lengths: List[int] = LENGTHS) -> torch.Tensor:
    """Random masks that hide real pieces only in the `restricted` sequences."""
    generator = torch.Generator().manual_seed(5)
    n = len(lengths)
    mask = (torch.rand(n, N_PIECES, N_PIECES, generator=generator) < 0.4) | torch.eye(N_PIECES, dtype=torch.bool)
    for i, length in enumerate(lengths):
        if i not in restricted:
            mask[i, :length, :length] = True
    return mask


def attend(batch: AttentionBatch, grad: bool = False, dropout: float = 0.0):
    torch.manual_seed(7)
    module = SyntaxAwareAttention(HIDDEN, N_HEADS, dropout).eval()
    with torch.no_grad():
        module.gate.weight.normal_(std=0.5)
    generator = torch.Generator().manual_seed(3)
    hidden = torch.randn(N_SEQUENCES, N_PIECES, HIDDEN, generator=generator)
    qkv = [torch.randn(N_SEQUENCES, N_HEADS, N_PIECES, HEAD_SIZE, generator=generator) for _ in range(3)]
    if grad:
        qkv = [tensor.requires_grad_() for tensor in qkv]
    with torch.set_grad_enabled(grad), attending(batch):
        context, _ = module.attend(hidden, *qkv)
    return context


def batch_of(restricted: List[int], saving: float, **paths) -> AttentionBatch:
    return AttentionBatch.from_inputs(
        attention_mask(), local_mask(restricted), record_gates=True, paths=saving_paths(saving, **paths)
    )


def brute_force_cuts(widths: List[int], max_groups: int) -> float:
    n = len(widths)
    best = float("inf")
    for n_cuts in range(max_groups):
        for cuts in itertools.combinations(range(1, n), n_cuts):
            bounds = [0, *cuts, n]
            best = min(best, sum((end - start) * widths[end - 1] ** 2 for start, end in zip(bounds, bounds[1:])))
    return best


def test_the_cheapest_cuts_by_hand():
    # one group of three 10s, two 100s, the 200: 3 * 100 + 2 * 10,000 + 40,000
    assert cheapest_cuts(numpy.array([10, 10, 10, 100, 100, 200]), MAX_GROUPS) == (60300.0, [3, 5, 6])
    assert cheapest_cuts(numpy.array([100] * 5), MAX_GROUPS) == (50000.0, [5])


@settings(max_examples=100, deadline=None)
@given(widths=st.lists(st.integers(1, 300) | st.sampled_from([3, 5, 40, 200]), min_size=1, max_size=9))  # repeats too
def test_the_cheapest_cuts_are_the_cheapest_of_all(widths):
    widths = sorted(widths)
    cost, ends = cheapest_cuts(numpy.array(widths), MAX_GROUPS)
    assert 1 <= len(ends) <= MAX_GROUPS and ends[-1] == len(widths)
    assert ends == sorted(set(ends)) and ends[0] > 0
    bounds = [0, *ends]
    assert cost == sum((end - start) * widths[end - 1] ** 2 for start, end in zip(bounds, bounds[1:]))
    assert cost == brute_force_cuts(widths, MAX_GROUPS)


def test_the_groups_of_a_batch_by_hand():
    batch = batch_of([0, 1, 3, 4], 0.15)
    # widths 12, 5, 3, 7 in at most three groups: {3, 5} {7} {12} costs 2 x 25 + 49 + 144 = 243, {3} {5, 7} {12}
    # 251, {3} {5} {7, 12} 322; the restricted rows at the padded width 4 x 144 = 576
    groups = [(group.rows.tolist(), group.width) for group in batch.width_groups]
    assert groups == [([3, 1], 5), ([4], 7), ([0], 12)]
    # 4 of 5 sequences is above gather_max_share: the plain path would run all five
    assert batch.local_rows is None
    # equal widths spare nothing
    full = AttentionBatch.from_inputs(
        attention_mask([12] * 5), local_mask([0, 1, 2, 3, 4], [12] * 5), paths=saving_paths(0.15)
    )
    assert full.width_groups is None
    # nothing restricted, nothing to group
    assert batch_of([], 0.15).width_groups is None


@pytest.mark.parametrize("restricted", [[1], [0, 3], [0, 1, 3, 4], [0, 1, 2, 3, 4]])
def test_contexts_by_width_equal_the_plain_path(restricted, monkeypatch):
    expected = attend(batch_of(restricted, PLAIN))
    batch = batch_of(restricted, -1.0)  # any grouping is taken
    shapes = SdpaShapes(monkeypatch)
    context = attend(batch)
    expected_shapes = [(len(group.rows), group.width) for group in batch.width_groups]
    assert shapes.shapes == [(N_SEQUENCES, N_PIECES)] + expected_shapes
    assert sum(n for n, _ in expected_shapes) == len(restricted)
    assert torch.allclose(context, expected, atol=1e-5), (context - expected).abs().max()


def test_a_row_that_sees_no_key_keeps_the_boolean_mask():
    mask = local_mask([1, 3])
    mask[1, 2] = False
    expected = attend(AttentionBatch.from_inputs(attention_mask(), mask, paths=saving_paths(PLAIN)))
    batch = AttentionBatch.from_inputs(attention_mask(), mask, paths=saving_paths(-1.0))
    context = attend(batch)
    assert all(batch.group_local_mask(torch.float32, i).dtype == torch.bool for i in range(len(batch.width_groups)))
    assert torch.allclose(context, expected, atol=1e-5)


def test_gradients_and_dropout_keep_the_plain_path(monkeypatch):
    shapes = SdpaShapes(monkeypatch)
    attend(batch_of([1, 3], -1.0, memory_saving_training=False), grad=True)
    assert shapes.shapes == [(N_SEQUENCES, N_PIECES)] * 2
    shapes.shapes.clear()
    module_dropout = 0.3
    torch.manual_seed(0)
    module = SyntaxAwareAttention(HIDDEN, N_HEADS, module_dropout).train()
    qkv = [torch.randn(N_SEQUENCES, N_HEADS, N_PIECES, HEAD_SIZE) for _ in range(3)]
    with torch.no_grad(), attending(batch_of([1, 3], -1.0)):
        module.attend(torch.randn(N_SEQUENCES, N_PIECES, HIDDEN), *qkv)
    assert shapes.shapes == [(N_SEQUENCES, N_PIECES)] * 2


def encoder_outputs(saving: float, restricted: List[int]):
    sla = SyntaxAwareTransformer(tiny_encoder("bert"), attention_paths=saving_paths(saving)).eval()
    input_ids = torch.randint(5, 50, (N_SEQUENCES, N_PIECES), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        output = sla(input_ids, attention_mask(), local_mask=local_mask(restricted), record_gates=True)
    return output.last_hidden_state, output.gates


@pytest.mark.parametrize("restricted", [[2, 3], [0, 1, 2, 3, 4]])
def test_the_encoder_output_and_gates_are_unchanged(restricted, monkeypatch):
    expected, expected_gates = encoder_outputs(PLAIN, restricted)
    shapes = SdpaShapes(monkeypatch)
    output, gates = encoder_outputs(-1.0, restricted)
    assert any(width < N_PIECES for _, width in shapes.shapes)
    for length, real_output, real_expected in zip(LENGTHS, output, expected):
        # the real pieces; padding rows are never read
        assert torch.allclose(real_output[:length], real_expected[:length], atol=1e-5)
    assert torch.allclose(output, expected, atol=1e-5)
    assert torch.allclose(gates, expected_gates, atol=1e-6)


def test_the_order_puts_each_group_in_a_block():
    flags = torch.tensor([True, True, False, True, True])
    # groups {3, 1} {4} {0} (test_the_groups_of_a_batch_by_hand), then the unrestricted sequence 2
    order = width_order(attention_mask(), flags, AttentionPaths())
    assert order.tolist() == [3, 1, 4, 0, 2]
    ordered = attention_mask().index_select(0, order)
    assert width_order(ordered, flags.index_select(0, order), AttentionPaths()) is None
    groups = width_groups(ordered.bool(), flags.index_select(0, order), AttentionPaths())
    assert [(group.block, group.width) for group in groups] == [((0, 2), 5), ((2, 3), 7), ((3, 4), 12)]


def test_the_encoder_runs_the_groups_as_blocks_and_answers_in_the_callers_order(monkeypatch):
    restricted = [0, 1, 3, 4]
    flags = torch.tensor([i in restricted for i in range(N_SEQUENCES)])
    batches = []
    original = AttentionBatch.from_inputs.__func__

    def recorded(cls, *args, **kwargs):
        batches.append(original(cls, *args, **kwargs))
        return batches[-1]

    outputs = {}
    for saving in (PLAIN, 0.15):
        monkeypatch.setattr(AttentionBatch, "from_inputs", classmethod(recorded))
        sla = SyntaxAwareTransformer(tiny_encoder("bert"), attention_paths=saving_paths(saving)).eval()
        input_ids = torch.randint(5, 50, (N_SEQUENCES, N_PIECES), generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            output = sla(
                input_ids, attention_mask(), local_mask=local_mask(restricted), record_gates=True,
                local_restricted=flags,
            )
        outputs[saving] = output
    assert batches[0].width_groups is None
    assert [(group.block, group.width) for group in batches[1].width_groups] == [((0, 2), 5), ((2, 3), 7), ((3, 4), 12)]
    plain, grouped = outputs[PLAIN], outputs[0.15]
    assert torch.allclose(grouped.last_hidden_state, plain.last_hidden_state, atol=1e-5)
    assert torch.allclose(grouped.pooler_output, plain.pooler_output, atol=1e-5)
    assert torch.allclose(grouped.gates, plain.gates, atol=1e-6)


def test_the_pipeline_outputs_and_gates_are_unchanged(tiny_bert, monkeypatch):
    vocab = english_vocab()
    chain = parsed_doc(vocab, "a b c d e f g".split(), [1, 2, 3, 4, 5, 6, 6])
    short = parsed_doc(vocab, ["she", "ran", "home"], [1, 1, 1])
    article = Doc.from_docs([the_cat_sat(vocab), chain, the_cat_sat(vocab), short, chain])
    docs = [chain, short, article, Doc.from_docs([the_cat_sat(vocab), short]), chain]
    component = sla_nlp(tiny_bert).get_pipe("sla_transformer")
    component.store_gates = True
    results = {}
    shapes = SdpaShapes(monkeypatch)
    for saving in (PLAIN, 0.15):
        component.model.transformer.attention_paths = saving_paths(saving)
        shapes.shapes = []
        predicted = list(component.pipe([doc.copy() for doc in docs]))
        results[saving] = ([trf_output(doc) for doc in predicted], [doc._.sla_gates for doc in predicted], shapes.shapes)
    # the groups: more, narrower calls than the plain path's
    assert len(results[0.15][2]) > len(results[PLAIN][2])
    assert sum(n * width**2 for n, width in results[0.15][2]) < sum(n * width**2 for n, width in results[PLAIN][2])
    for grouped, plain in zip(results[0.15][0], results[PLAIN][0]):
        assert numpy.allclose(grouped, plain, atol=1e-5)
    for grouped, plain in zip(results[0.15][1], results[PLAIN][1]):
        assert grouped.shape == plain.shape and numpy.allclose(grouped, plain, atol=1e-6)
