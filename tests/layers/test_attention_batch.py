"""AttentionBatch: a forward pass's inputs (the sequences whose local mask
hides a key, read from the mask or given from the CPU), its paths, and the
per-thread active batch the layers read."""
from dataclasses import FrozenInstanceError

import numpy
import pytest
import torch

from spacy_sla.layers import AttentionBatch, AttentionPaths, SyntaxAwareAttention, SyntaxAwareTransformer, attending
from spacy_sla.syntax.syntax_inputs import SyntaxInputs

from .masked_batches import N_PIECES, N_SEQUENCES, attention_mask, local_mask
from util import batch_inputs, random_local_mask, tiny_encoder


def test_the_flags_given_from_the_cpu_equal_those_read_from_the_mask():
    for restricted in ([], [2], [0, 3], [0, 1, 2, 3]):
        mask = local_mask(restricted)
        flags = torch.tensor([i in restricted for i in range(N_SEQUENCES)])
        given = AttentionBatch.from_inputs(attention_mask(), mask, local_restricted=flags).local_rows
        read = AttentionBatch.from_inputs(attention_mask(), mask).local_rows
        if len(restricted) == N_SEQUENCES:
            assert given is None and read is None
        else:
            assert given.tolist() == read.tolist() == restricted
    # no boolean mask, no rows: the bias variants always compute every branch
    buckets = torch.zeros(N_SEQUENCES, N_PIECES, N_PIECES, dtype=torch.long)
    assert AttentionBatch.from_inputs(attention_mask(), local_buckets=buckets).local_rows is None


def test_syntax_inputs_flag_what_the_mask_hides_within_each_span():
    mask = numpy.ones((3, 5, 5), dtype=bool)
    mask[1, 3:, :] = False  # padding rows of a 3-piece span: hides nothing real
    mask[1, :, 4] = False
    mask[2, 0, 1] = False  # a real pair
    inputs = SyntaxInputs(lengths=[5, 3, 5], local_mask=mask)
    assert inputs.locally_restricted().tolist() == [False, False, True]
    tensors = inputs.to_torch(torch.device("cpu"))
    assert tensors["local_restricted"].tolist() == [False, False, True]
    buckets = SyntaxInputs(lengths=[5], local_buckets=numpy.zeros((1, 5, 5), dtype=numpy.int16))
    assert buckets.locally_restricted() is None and buckets.to_torch(torch.device("cpu"))["local_restricted"] is None


def test_attention_outside_a_forward_pass_is_refused():
    attention = SyntaxAwareAttention(16, 2, 0.0)
    with pytest.raises(RuntimeError, match="outside"):
        attention.attend(torch.randn(1, 3, 16), *(torch.randn(1, 2, 3, 8) for _ in range(3)))


def test_the_active_batch_belongs_to_the_call_and_is_restored_afterwards():
    sla = SyntaxAwareTransformer(tiny_encoder("bert")).eval()
    attention = sla.sla_modules()[0]
    input_ids, attention_mask = batch_inputs()
    outer = AttentionBatch.from_inputs(attention_mask, random_local_mask(), record_gates=True)
    hidden = torch.randn(2, 9, 32)
    query, key, value = (torch.randn(2, 4, 9, 8) for _ in range(3))
    with torch.no_grad(), attending(outer):
        # a nested forward pass has its own batch and leaves the outer one active
        inner = sla(input_ids, attention_mask, local_mask=torch.eye(9, dtype=torch.bool).expand(2, 9, 9), record_gates=True)
        assert inner.gates.shape == (3, 2, 9) and outer.gates == []
        attention.attend(hidden, query, key, value)
    assert len(outer.gates) == 1
    with pytest.raises(RuntimeError, match="outside"):
        attention.attend(hidden, query, key, value)


def test_a_batch_carries_the_paths_it_was_made_with():
    paths = AttentionPaths(skip_fully_visible=False, gather_max_share=1.0)
    assert AttentionBatch.from_inputs(attention_mask(), local_mask([2]), paths=paths).paths is paths
    assert AttentionBatch.from_inputs(attention_mask()).paths == AttentionPaths()
    # every sequence but one restricted: gathered at a share of 1, not at the default 0.75
    restricted = [0, 1, 3]
    assert AttentionBatch.from_inputs(attention_mask(), local_mask(restricted), paths=paths).local_rows.tolist() == restricted
    assert AttentionBatch.from_inputs(attention_mask(), local_mask([0, 1, 2])).local_rows.tolist() == [0, 1, 2]
    assert AttentionBatch.from_inputs(
        attention_mask(), local_mask(restricted), paths=AttentionPaths(gather_max_share=0.5)
    ).local_rows is None
    with pytest.raises(FrozenInstanceError):
        paths.skip_fully_visible = True
