"""The schedule of prediction (prediction_schedule.py): its constants, which
sequences need a local branch, and the groups of similar width in which
the CPU computes them beyond MATERIALISE_UP_TO pieces, each group cut to
the pieces of its longest sequence. Contexts, encoder outputs and gates
are the reference's (tests/reference.py); the encoder runs each group as a
block of the batch and answers in the callers' order."""
import itertools
from typing import List

import numpy
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.tokens import Doc

from spacy_sla.layers import AttentionBatch, SyntaxAwareTransformer
from spacy_sla.layers.prediction_schedule import (
    GATHER_MAX_SHARE,
    MATERIALISE_UP_TO,
    MAX_WIDTH_GROUPS,
    WIDTH_GROUPS_MIN_SAVING,
    cheapest_cuts,
    materialises,
    rows_needing_local,
    width_groups,
    width_order,
)

from .masked_batches import (
    LONG,
    SdpaCalls,
    attend,
    attention_mask,
    local_mask,
    make_module,
    reference_context,
    reference_encoder,
    reference_pipeline,
)
from tiny_models import save_tiny_model
from util import english_vocab, parsed_doc, sla_nlp, the_cat_sat, tiny_encoder, trf_output

# five sequences whose widths (the position after the last real piece) differ
LENGTHS = [LONG, LONG // 3, LONG, LONG // 4, LONG // 2]
N_SEQUENCES = len(LENGTHS)


def test_the_constants_are_the_measured_ones():
    assert (MATERIALISE_UP_TO, GATHER_MAX_SHARE, MAX_WIDTH_GROUPS, WIDTH_GROUPS_MIN_SAVING) == (128, 0.75, 3, 0.15)


def test_prediction_materialises_short_float32_inputs_on_the_cpu():
    short = torch.zeros(2, 4, MATERIALISE_UP_TO, 8)
    assert materialises(short)
    assert not materialises(torch.zeros(2, 4, MATERIALISE_UP_TO + 1, 8))
    assert not materialises(short.to(torch.bfloat16))
    assert not materialises(torch.zeros(2, 4, MATERIALISE_UP_TO, 8, device="meta"))


def test_the_sequences_needing_a_local_branch_are_gathered_up_to_the_share():
    for flags, expected in (([0, 0, 0, 0], []), ([0, 1, 0, 0], [1]), ([1, 1, 0, 1], [0, 1, 3]), ([1, 1, 1, 1], None)):
        rows = rows_needing_local(torch.tensor(flags, dtype=torch.bool), torch.device("cpu"))
        assert (rows if rows is None else rows.tolist()) == expected
    # 4 of 5 is above the share: every sequence's local branch in one call
    assert rows_needing_local(torch.tensor([1, 1, 1, 1, 0], dtype=torch.bool), torch.device("cpu")) is None


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
    assert cheapest_cuts(numpy.array([10, 10, 10, 100, 100, 200]), MAX_WIDTH_GROUPS) == (60300.0, [3, 5, 6])
    assert cheapest_cuts(numpy.array([100] * 5), MAX_WIDTH_GROUPS) == (50000.0, [5])


@settings(max_examples=100, deadline=None)
@given(widths=st.lists(st.integers(1, 300) | st.sampled_from([3, 5, 40, 200]), min_size=1, max_size=9))  # repeats too
def test_the_cheapest_cuts_are_the_cheapest_of_all(widths):
    widths = sorted(widths)
    cost, ends = cheapest_cuts(numpy.array(widths), MAX_WIDTH_GROUPS)
    assert 1 <= len(ends) <= MAX_WIDTH_GROUPS and ends[-1] == len(widths)
    assert ends == sorted(set(ends)) and ends[0] > 0
    bounds = [0, *ends]
    assert cost == sum((end - start) * widths[end - 1] ** 2 for start, end in zip(bounds, bounds[1:]))
    assert cost == brute_force_cuts(widths, MAX_WIDTH_GROUPS)


def batch_of(restricted: List[int], lengths: List[int] = LENGTHS) -> AttentionBatch:
    return AttentionBatch.from_inputs(attention_mask(lengths), local_mask(restricted, lengths), record_gates=True)


def test_the_groups_of_a_batch_by_hand():
    batch = batch_of([0, 1, 3, 4])
    # widths 136, 45, 34, 68 in at most three groups: {34, 45} {68} {136} costs 2 x 45^2 + 68^2 + 136^2 = 27,194,
    # the restricted rows at the padded width 4 x 136^2 = 73,984: a saving of 63 %
    groups = [(group.rows.tolist(), group.width) for group in batch.width_groups]
    assert groups == [([3, 1], LONG // 3), ([4], LONG // 2), ([0], LONG)]
    # 4 of 5 sequences is above GATHER_MAX_SHARE: one call would compute all five
    assert batch.local_rows is None
    # equal widths spare nothing, nor do widths within the saving
    assert batch_of([0, 1, 2, 3, 4], [LONG] * 5).width_groups is None
    assert batch_of([0, 1], [LONG, LONG - 8, LONG, LONG, LONG]).width_groups is None
    # nothing restricted, nothing to group
    assert batch_of([]).width_groups is None


@pytest.mark.parametrize("restricted", [[1], [0, 3], [0, 1, 3, 4], [0, 1, 2, 3, 4]])
def test_contexts_by_width_are_the_references(restricted, monkeypatch):
    batch = batch_of(restricted)
    shapes = SdpaCalls(monkeypatch)
    module = make_module()
    context, qkv = attend(module, batch)
    expected_shapes = [(len(group.rows), group.width) for group in batch.width_groups]
    assert shapes.shapes == [(N_SEQUENCES, LONG)] + expected_shapes
    assert sum(n for n, _ in expected_shapes) == len(restricted)
    real = batch.global_mask[:, 0, 0, :, None]
    assert torch.allclose(context * real, reference_context(module, batch, qkv) * real, atol=1e-5)


def test_a_row_that_sees_no_key_keeps_the_boolean_mask():
    mask = local_mask([1, 3], LENGTHS)
    mask[1, 2] = False
    batch = AttentionBatch.from_inputs(attention_mask(LENGTHS), mask)
    module = make_module()
    context, qkv = attend(module, batch)
    assert batch.width_groups is not None
    assert all(batch.group_local_mask(torch.float32, i).dtype == torch.bool for i in range(len(batch.width_groups)))
    real = batch.global_mask[:, 0, 0, :, None]
    assert torch.allclose(context * real, reference_context(module, batch, qkv) * real, atol=1e-5)


def test_the_order_puts_each_group_in_a_block():
    flags = torch.tensor([True, True, False, True, True])
    # groups {3, 1} {4} {0} (test_the_groups_of_a_batch_by_hand), then the unrestricted sequence 2
    order = width_order(attention_mask(LENGTHS), flags)
    assert order.tolist() == [3, 1, 4, 0, 2]
    ordered = attention_mask(LENGTHS).index_select(0, order)
    assert width_order(ordered, flags.index_select(0, order)) is None
    groups = width_groups(ordered.bool(), flags.index_select(0, order))
    assert [(group.block, group.width) for group in groups] == [((0, 2), LONG // 3), ((2, 3), LONG // 2), ((3, 4), LONG)]


def test_the_encoder_runs_the_groups_as_blocks_and_answers_in_the_callers_order(monkeypatch):
    restricted = [0, 1, 3, 4]
    flags = torch.tensor([i in restricted for i in range(N_SEQUENCES)])
    batches = []
    original = AttentionBatch.from_inputs.__func__

    def recorded(cls, *args, **kwargs):
        batches.append(original(cls, *args, **kwargs))
        return batches[-1]

    monkeypatch.setattr(AttentionBatch, "from_inputs", classmethod(recorded))
    sla = SyntaxAwareTransformer(tiny_encoder("bert")).eval()
    reference = reference_encoder(sla, tiny_encoder("bert"))
    input_ids = torch.randint(5, 50, (N_SEQUENCES, LONG), generator=torch.Generator().manual_seed(1))
    inputs = dict(input_ids=input_ids, attention_mask=attention_mask(LENGTHS), local_mask=local_mask(restricted, LENGTHS),
                  record_gates=True, local_restricted=flags)
    with torch.no_grad():
        output = sla(**inputs)
        expected = reference(**inputs)
    assert [(group.block, group.width) for group in batches[0].width_groups] == [
        ((0, 2), LONG // 3), ((2, 3), LONG // 2), ((3, 4), LONG)
    ]
    real = attention_mask(LENGTHS).bool()[..., None]
    assert torch.allclose(output.last_hidden_state * real, expected.last_hidden_state * real, atol=1e-5)
    assert torch.allclose(output.pooler_output, expected.pooler_output, atol=1e-5)
    assert torch.allclose(output.gates, expected.gates, atol=1e-6)


@pytest.fixture(scope="module")
def long_bert(tmp_path_factory):
    """A tiny BERT that reads spans of up to 256 pieces."""
    return save_tiny_model(tmp_path_factory.mktemp("long_bert"), max_length=256)


def test_the_pipeline_predicts_long_spans_by_width_as_the_reference(long_bert, monkeypatch):
    vocab = english_vocab()
    chain = parsed_doc(vocab, "a b c d e f g".split(), [1, 2, 3, 4, 5, 6, 6])
    short = parsed_doc(vocab, ["she", "ran", "home"], [1, 1, 1])
    article = Doc.from_docs([the_cat_sat(vocab), chain, the_cat_sat(vocab), short, chain] * 5)
    docs = [chain, short, article, Doc.from_docs([the_cat_sat(vocab), short] * 6), chain]
    nlp = sla_nlp(long_bert)
    reference = reference_pipeline(nlp, long_bert)
    shapes = SdpaCalls(monkeypatch)
    results = []
    for pipeline in (nlp, reference):
        component = pipeline.get_pipe("sla_transformer")
        component.store_gates = True
        predicted = list(component.pipe([doc.copy() for doc in docs]))
        results.append(([trf_output(doc) for doc in predicted], [doc._.sla_gates for doc in predicted]))
    # beyond MATERIALISE_UP_TO pieces, the groups: narrower calls than the padded width
    assert max(width for _, width in shapes.shapes) > MATERIALISE_UP_TO
    assert any(width < max(w for _, w in shapes.shapes) for _, width in shapes.shapes)
    for got, expected in zip(*[result[0] for result in results]):
        assert numpy.allclose(got, expected, atol=1e-5)
    for got, expected in zip(*[result[1] for result in results]):
        assert got.shape == expected.shape and numpy.allclose(got, expected, atol=1e-6)
