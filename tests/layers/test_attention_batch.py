"""AttentionBatch: a forward pass's inputs (the sequences whose local mask
hides a key, read from the mask or given from the CPU), and the binding of
a forward pass's batch to the wrapped layers: its own for each call, a
nested call's for the nested call only, and one call at a time per model."""
import threading
import time

import numpy
import pytest
import torch

from spacy_sla.layers import AttentionBatch, SyntaxAwareTransformer
from spacy_sla.syntax.syntax_inputs import SyntaxInputs

from .masked_batches import N_SEQUENCES, SHORT, attention_mask, lengths_of, local_mask
from util import batch_inputs, random_local_mask, tiny_encoder

LENGTHS = lengths_of(SHORT)


def test_the_flags_given_from_the_cpu_equal_those_read_from_the_mask():
    for restricted in ([], [2], [0, 3], [0, 1, 2, 3]):
        mask = local_mask(restricted, LENGTHS)
        flags = torch.tensor([i in restricted for i in range(N_SEQUENCES)])
        given = AttentionBatch.from_inputs(attention_mask(LENGTHS), mask, local_restricted=flags)
        read = AttentionBatch.from_inputs(attention_mask(LENGTHS), mask)
        assert given.restricted.tolist() == read.restricted.tolist() == flags.tolist()
        if len(restricted) == N_SEQUENCES:
            assert given.local_rows is None and read.local_rows is None
        else:
            assert given.local_rows.tolist() == read.local_rows.tolist() == restricted
    # no boolean mask, no rows: the bias variants always compute every branch
    buckets = torch.zeros(N_SEQUENCES, SHORT, SHORT, dtype=torch.long)
    batch = AttentionBatch.from_inputs(attention_mask(LENGTHS), local_buckets=buckets)
    assert batch.local_rows is None and batch.restricted is None


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


def test_a_forward_pass_binds_its_batch_and_a_nested_one_gives_the_outer_back():
    sla = SyntaxAwareTransformer(tiny_encoder("bert")).eval()
    modules = sla.wrapped_modules()
    input_ids, mask = batch_inputs()
    outer = AttentionBatch.from_inputs(mask, random_local_mask(), record_gates=True)
    hidden = torch.randn(2, 9, 32)
    with torch.no_grad(), sla.attending(outer):
        assert all(module.batch is outer for module in modules)
        # a nested forward pass has its own batch and leaves the outer one bound
        inner = sla(input_ids, mask, local_mask=torch.eye(9, dtype=torch.bool).expand(2, 9, 9), record_gates=True)
        assert inner.gates.shape == (3, 2, 9) and outer.gates == []
        assert all(module.batch is outer for module in modules)
        modules[0](hidden)
    assert len(outer.gates) == 1
    assert all(module.bound_batch is None for module in modules)
    with pytest.raises(RuntimeError, match="outside"):
        modules[0](hidden)


def test_threads_sharing_a_model_take_turns_in_the_encoder():
    sla = SyntaxAwareTransformer(tiny_encoder("bert")).eval()
    _, mask = batch_inputs()
    first, second = (AttentionBatch.from_inputs(mask, random_local_mask()) for _ in range(2))
    seen = []

    def bind_second():
        with sla.attending(second):
            seen.append(sla.wrapped_modules()[0].batch)

    with sla.attending(first):
        thread = threading.Thread(target=bind_second)
        thread.start()
        time.sleep(0.2)
        # the other thread waits for this binding's end
        assert seen == [] and sla.wrapped_modules()[0].batch is first
    thread.join(timeout=10)
    assert seen == [second]


def test_a_copy_and_a_pickle_have_their_own_lock_and_no_bound_batch():
    import copy
    import pickle

    sla = SyntaxAwareTransformer(tiny_encoder("bert")).eval()
    input_ids, mask = batch_inputs()
    for copied in (copy.deepcopy(sla), pickle.loads(pickle.dumps(sla))):
        assert copied._lock is not sla._lock
        assert all(module.bound_batch is None for module in copied.wrapped_modules())
        with torch.no_grad():
            expected = sla(input_ids, mask, local_mask=random_local_mask()).last_hidden_state
            assert torch.equal(copied(input_ids, mask, local_mask=random_local_mask()).last_hidden_state, expected)
