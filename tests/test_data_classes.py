"""SyntaxInputs: the per-span wordpiece matrices of a padded batch, checked
on construction, stripped of padding, and copied to torch."""
import numpy
import pytest
import torch

from spacy_sla.data_classes import IGNORED_TARGET, ParentAttention, SyntaxInputs


def padded_masks() -> numpy.ndarray:
    """Two spans of 3 and 2 pieces, padded to 3: the first hides piece 2
    from piece 0, the second hides nothing but its padding."""
    mask = numpy.ones((2, 3, 3), dtype=bool)
    mask[0, 0, 2] = False
    mask[1, 2, :] = mask[1, :, 2] = False
    return mask


def test_a_matrix_per_span_is_required():
    with pytest.raises(ValueError, match=r"local_mask.*\(2, 3, 4\) for 2 spans"):
        SyntaxInputs(lengths=[3, 2], local_mask=numpy.ones((2, 3, 4), dtype=bool))
    with pytest.raises(ValueError, match="parent_targets"):
        SyntaxInputs(lengths=[3, 2], parent_targets=numpy.zeros((1, 3), dtype=numpy.int64))


def test_local_matrices_leave_out_the_padding():
    inputs = SyntaxInputs(lengths=[3, 2], local_mask=padded_masks())
    shapes = [matrix.shape for matrix in inputs.local_matrices()]
    assert shapes == [(3, 3), (2, 2)]
    assert inputs.local_matrices()[1].all()
    assert len(inputs) == 2


def test_buckets_stand_in_for_a_mask_and_nothing_gives_no_matrices():
    buckets = numpy.arange(18, dtype=numpy.int16).reshape(2, 3, 3)
    assert numpy.array_equal(SyntaxInputs(lengths=[3, 2], local_buckets=buckets).local_matrices()[1], [[9, 10], [12, 13]])
    assert SyntaxInputs(lengths=[3, 2]).local_matrices() == []


def test_a_span_is_restricted_only_if_its_mask_hides_a_piece_within_its_length():
    assert SyntaxInputs(lengths=[3, 2], local_mask=padded_masks()).locally_restricted().tolist() == [True, False]
    assert SyntaxInputs(lengths=[3, 2], local_buckets=numpy.zeros((2, 3, 3), dtype=numpy.int16)).locally_restricted() is None


def test_to_torch_copies_each_input_with_its_dtype():
    targets = numpy.full((2, 3), IGNORED_TARGET, dtype=numpy.int64)
    buckets = numpy.ones((2, 3, 3), dtype=numpy.int16)
    tensors = SyntaxInputs(lengths=[3, 2], local_mask=padded_masks(), local_buckets=buckets,
                           parent_targets=targets).to_torch(torch.device("cpu"))
    assert tensors["local_mask"].dtype == torch.bool and tensors["local_mask"].shape == (2, 3, 3)
    assert tensors["local_buckets"].dtype == torch.int64
    assert tensors["guide_mask"] is None
    assert tensors["parent_targets"].tolist() == targets.tolist()
    assert tensors["local_restricted"].tolist() == [True, False]


def test_parent_attention_is_a_frozen_setting():
    setting = ParentAttention(layer=2)
    with pytest.raises(AttributeError):
        setting.head = 3  # type: ignore[misc]
    assert (setting.layer, setting.head, setting.weight) == (2, 0, 1.0)
