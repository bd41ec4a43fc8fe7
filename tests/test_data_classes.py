"""The model's data classes: LISA's ParentAttention setting."""
import pytest

from spacy_sla.data_classes import ParentAttention


def test_parent_attention_is_a_frozen_setting():
    setting = ParentAttention(layer=2)
    with pytest.raises(AttributeError):
        setting.head = 3  # type: ignore[misc]
    assert (setting.layer, setting.head, setting.weight) == (2, 0, 1.0)
