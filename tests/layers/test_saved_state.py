"""Saved weights checked against a model built on the meta device (the
pipelines that carry them: test_hf_shim.py)."""
import pytest
import torch
from torch import nn

from spacy_sla.layers.saved_state import built_on_meta, check_saved_state, check_state_entries, saved_size
from spacy_sla.layers.syntax_aware_transformer import is_added_key


class Encoder(nn.Module):
    def __init__(self, positions: int = 16, gated: bool = True):
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.gate = nn.Linear(4, 1) if gated else None
        self.register_buffer("position_ids", torch.arange(positions), persistent=False)
        self.register_buffer("scale", torch.ones(1))


def saved(model: nn.Module) -> dict:
    return {key: value.clone() for key, value in model.state_dict().items()}


def added(key: str) -> bool:
    return key.startswith("gate.")


def test_a_fitting_state_is_loaded_and_nothing_is_allocated_for_the_check():
    model = built_on_meta(Encoder)
    assert all(tensor.is_meta for tensor in [*model.parameters(), *model.buffers()])
    state = saved(Encoder())
    loadable = check_saved_state(model, state, added)
    assert set(loadable) == {"embed.weight", "gate.weight", "gate.bias", "scale"}


def test_buffers_are_optional_and_a_saved_buffer_the_model_keeps_unsaved_is_left_out():
    state = saved(Encoder())
    del state["scale"]
    state["position_ids"] = torch.arange(16)  # saved by an older version, unsaved by this one
    assert set(check_saved_state(built_on_meta(Encoder), state, added)) == {"embed.weight", "gate.weight", "gate.bias"}


def test_missing_and_foreign_encoder_weights_are_refused_before_gates():
    state = {"gate.weight": torch.zeros(1, 4), "gate.bias": torch.zeros(1), "extra.weight": torch.zeros(1)}
    with pytest.raises(ValueError, match=r"\[SLA-E092\].*\(Encoder\): 1 weight\(s\) of the encoder are missing from "
                                         r"them \(embed.weight\) and 1 weight\(s\) in them are not the encoder's "
                                         r"\(extra.weight\)"):
        check_saved_state(built_on_meta(Encoder), state, added)


def test_missing_gates_are_the_sla_error():
    state = saved(Encoder(gated=False))
    with pytest.raises(ValueError, match=r"\[SLA-E006\].*missing from the saved weights: gate.weight, gate.bias"):
        check_saved_state(built_on_meta(Encoder), state, added)


@pytest.mark.parametrize("value,saved_kind", [
    (torch.zeros(10, 5), r"float32 of shape \(10, 5\)"),
    (torch.zeros(10, 4, dtype=torch.int64), r"int64 of shape \(10, 4\)"),
    (torch.zeros(10, 4, dtype=torch.bool), r"bool of shape \(10, 4\)"),
    (torch.zeros(10, 4, dtype=torch.complex64), r"complex64 of shape \(10, 4\)"),
])
def test_a_weight_of_another_shape_or_kind_is_refused(value, saved_kind):
    state = saved(Encoder())
    state["embed.weight"] = value
    with pytest.raises(ValueError, match=rf"\[SLA-E093\].*embed.weight is {saved_kind}, where the encoder its config "
                                         r"builds has float32 of shape \(10, 4\)"):
        check_saved_state(built_on_meta(Encoder), state, added)


def test_non_finite_values_are_refused_in_any_float_type():
    state = saved(Encoder())
    state["embed.weight"] = state["embed.weight"].to(torch.bfloat16)
    state["embed.weight"][0, :2] = float("inf")
    state["embed.weight"][1, 0] = float("nan")
    with pytest.raises(ValueError, match=r"\[SLA-E094\].*embed.weight holds 3 value"):
        check_saved_state(built_on_meta(Encoder), state, added)


@pytest.mark.parametrize("state,reason", [([torch.zeros(1)], "a list"), ({"embed.weight": [1.0]}, "a mapping with 1 entr"),
                                          ({3: torch.zeros(1)}, "a mapping with 1 entr")])
def test_a_state_that_is_no_mapping_of_names_to_tensors_is_refused(state, reason):
    with pytest.raises(ValueError, match=rf"\[SLA-E091\] The saved SLA transformer's weights are {reason}"):
        check_saved_state(built_on_meta(Encoder), state, added)


def test_buffers_a_config_makes_beyond_the_saved_weights_are_bounded():
    """A position buffer of 2**30 int64 (8 GiB) that the saved state does not
    hold: refused from the meta-device model, never allocated."""
    def huge() -> Encoder:
        return Encoder(positions=2**30)

    state = saved(Encoder())
    with pytest.raises(ValueError, match=r"\[SLA-E095\].*\(position_ids: 8,192.0 MiB, more than the 64.0 MiB"):
        check_saved_state(built_on_meta(huge), state, added)


def test_the_sla_transformer_tells_its_added_weights():
    assert is_added_key("transformer.encoder.layer.0.attention.self.gate.weight")
    assert is_added_key("guided_layer.attention.self.query.weight")
    assert not is_added_key("transformer.encoder.layer.0.attention.self.query.weight")


@pytest.mark.parametrize("value,problem", [
    (torch.zeros(1).expand(10, 4), r"expanded \(a stride of 0 makes \(10, 4\) values of strides \(0, 0\) from fewer\)"),
    (torch.zeros(13).as_strided((10, 4), (1, 1)), r"overlapping \(a stride makes \(10, 4\) values of strides \(1, 1\)"),
    (torch.zeros(10, 4).to_sparse(), r"a sparse tensor \(sparse_coo\)"),
    (torch.zeros(10, 4, device="meta"), "a tensor on the meta device, which holds no values"),
])
def test_a_weight_that_does_not_hold_its_own_values_is_refused_before_any_value_is_read(value, problem, monkeypatch):
    """Refused on shape and strides alone: the check that reads values
    (torch.isfinite, which would allocate the expanded shape) never runs."""
    def never(*args):
        raise AssertionError("a value was read")

    monkeypatch.setattr(torch, "isfinite", never)
    state = saved(Encoder())
    state["embed.weight"] = value
    with pytest.raises(ValueError, match=rf"\[SLA-E123\] The saved SLA transformer's weight embed.weight is {problem}"):
        check_saved_state(built_on_meta(Encoder), state, added)


def test_views_of_a_larger_storage_are_dense_and_sized_by_their_storage():
    base = torch.zeros(10, 8)
    state = saved(Encoder())
    state["embed.weight"] = base[:, 4:]  # a view: strides (8, 1), offset 4, within the storage
    assert set(check_state_entries(state)) == set(state)
    assert saved_size({"a": base[:, 4:], "b": base[:, :4]}) == base.numel() * 4  # one storage, counted once
    assert saved_size({"a": torch.zeros(1).expand(1000, 1000)}) == 4

