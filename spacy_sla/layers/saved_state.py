"""The saved weights of an SLA transformer checked against the model that
its saved config builds, before that model takes any memory.

The model is first built on torch's meta device (shapes and dtypes, no
storage), so a config that asks for a huge encoder costs nothing until its
weights are known to fit: every parameter must be in the saved state with
its shape and a floating-point dtype, every saved weight must be the
model's, and every value must be finite. Only then is the model built for
real, and it then takes no more memory than the saved weights, apart from
the buffers it makes itself (position ids, rotary frequencies), which are
bounded too."""
from typing import Any, Callable, Dict, List, Mapping, Sequence, Set, TypeVar

import torch
from torch import nn

from ..errors import Errors

MIB = 2**20
# What a model may make beside its saved weights (buffers computed from its
# config): the larger of this and the saved weights' size.
UNSAVED_BUFFER_BYTES = 64 * MIB
SHOWN_NAMES = 5


ModuleT = TypeVar("ModuleT", bound=nn.Module)


def built_on_meta(build: Callable[[], ModuleT]) -> ModuleT:
    """The module `build` makes, with every tensor on the meta device."""
    with torch.device("meta"):
        return build()


def check_saved_state(model: nn.Module, state: Any, is_added: Callable[[str], bool]) -> Dict[str, torch.Tensor]:
    """The saved weights that `model` (built on the meta device) loads:
    those named by its state dict, after checking that they fit it.
    `is_added(name)` tells the SLA weights (gates, ...), whose mismatch is
    [SLA-E006]. Refused: a state that is not a mapping of names to dense
    tensors ([SLA-E091], [SLA-E123]); missing or foreign encoder weights ([SLA-E092]; a saved
    buffer that the model keeps unsaved, as newer transformers versions do
    with position ids, is left out); a shape or a dtype kind that differs
    ([SLA-E093]); NaN or infinite values ([SLA-E094]); and buffers the
    model would make beyond the bound ([SLA-E095])."""
    state = check_state_entries(state)
    expected = model.state_dict(keep_vars=True)
    parameters = {name for name, _ in model.named_parameters(remove_duplicate=False)}
    buffers = {name for name, _ in model.named_buffers(remove_duplicate=False)}
    _check_names(model, state, expected, parameters, buffers, is_added)
    for key, value in state.items():
        if key in expected and not _same_kind(value, expected[key]):
            raise ValueError(Errors.E093.format(key=key, saved=_describe(value), expected=_describe(expected[key])))
    for key, value in state.items():
        if key in expected and value.is_floating_point():
            n_bad = int((~torch.isfinite(value)).sum())
            if n_bad:
                raise ValueError(Errors.E094.format(key=key, count=n_bad))
    _check_unsaved_buffers(model, state)
    return {key: value for key, value in state.items() if key in expected}


def check_state_entries(state: Any) -> Mapping[str, torch.Tensor]:
    """The saved state, refused unless it is a mapping of names to tensors
    ([SLA-E091]) that are dense and hold their own values ([SLA-E123]):
    what the other checks and the size of the saved weights rely on."""
    if not isinstance(state, Mapping):
        raise ValueError(Errors.E091.format(reason=f"a {type(state).__name__}"))
    not_tensors = [repr(key) for key, value in state.items()
                   if not isinstance(key, str) or not isinstance(value, torch.Tensor)]
    if not_tensors:
        raise ValueError(Errors.E091.format(reason=f"a mapping with {len(not_tensors)} entr(y/ies) that are not "
                                                   f"named tensors ({_shown(not_tensors)})"))
    for key, value in state.items():
        _check_storage(key, value)
    return state


def _check_names(model: nn.Module, state: Mapping[str, torch.Tensor], expected: Mapping[str, torch.Tensor],
                 parameters: Set[str], buffers: Set[str], is_added: Callable[[str], bool]) -> None:
    missing = [key for key in expected if key in parameters and key not in state and not is_added(key)]
    unexpected = [key for key in state if key not in expected and key not in buffers and not is_added(key)]
    if missing or unexpected:
        config = getattr(model, "config", None)
        raise ValueError(Errors.E092.format(model_type=getattr(config, "model_type", type(model).__name__),
                                            n_missing=len(missing), missing=_shown(missing),
                                            n_unexpected=len(unexpected), unexpected=_shown(unexpected)))
    added_missing = [key for key in expected if is_added(key) and key not in state]
    added_unexpected = [key for key in state if is_added(key) and key not in expected]
    if added_missing or added_unexpected:
        raise ValueError(Errors.E006.format(missing=", ".join(added_missing) or "none",
                                            unexpected=", ".join(added_unexpected) or "none"))


def _same_kind(saved: torch.Tensor, expected: torch.Tensor) -> bool:
    """The same shape, and both floating-point or both not: a float weight
    may be loaded from another float type (float16 into float32), never
    from integers, booleans or complex numbers."""
    return (
        tuple(saved.shape) == tuple(expected.shape)
        and saved.is_floating_point() == expected.is_floating_point()
        and not saved.is_complex()
    )


def _check_unsaved_buffers(model: nn.Module, state: Mapping[str, torch.Tensor]) -> None:
    unsaved = [(name, buffer) for name, buffer in model.named_buffers() if name not in state]
    unsaved_bytes = sum(_n_bytes(buffer) for _, buffer in unsaved)
    saved_bytes = saved_size(state)
    bound = max(UNSAVED_BUFFER_BYTES, saved_bytes)
    if unsaved_bytes > bound:
        largest = sorted(unsaved, key=lambda item: -_n_bytes(item[1]))
        raise ValueError(Errors.E095.format(names=_shown([name for name, _ in largest]),
                                            size=_mib(unsaved_bytes), bound=_mib(bound), saved=_mib(saved_bytes)))


def saved_size(state: Mapping[str, torch.Tensor]) -> int:
    """The bytes the saved weights hold: each storage once, by its real
    size (an expanded tensor's shape may stand for far more)."""
    storages = {value.untyped_storage().data_ptr(): value.untyped_storage().nbytes() for value in state.values()}
    return sum(storages.values())


def _check_storage(key: str, tensor: torch.Tensor) -> None:
    """[SLA-E123] for a weight that is not a dense tensor with its own values
    (what a model's state dict holds): sparse, on the meta device (no
    values), expanded (a stride of 0: one stored value read as many) or
    overlapping, or reaching past its storage. Checked on the shape and
    strides alone, before any check reads the values."""
    problem = ""
    if tensor.layout != torch.strided:
        problem = f"a sparse tensor ({str(tensor.layout).replace('torch.', '')})"
    elif tensor.is_meta:
        problem = "a tensor on the meta device, which holds no values"
    elif tensor.numel() > 0:
        extent = 1
        for stride, size in sorted((stride, size) for size, stride in zip(tensor.shape, tensor.stride()) if size > 1):
            if stride < extent:
                kind = "expanded (a stride of 0" if stride == 0 else "overlapping (a stride"
                problem = f"{kind} makes {tuple(tensor.shape)} values of strides {tuple(tensor.stride())} from fewer)"
                break
            extent = stride * size
        last = tensor.storage_offset() + sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride()))
        needed = (last + 1) * tensor.element_size()
        if not problem and needed > tensor.untyped_storage().nbytes():
            problem = f"a view reaching past its storage ({needed} bytes of {tensor.untyped_storage().nbytes()})"
    if problem:
        raise ValueError(Errors.E123.format(key=key, problem=problem))


def _n_bytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def _mib(n_bytes: int) -> str:
    return f"{n_bytes / MIB:,.1f}"


def _describe(tensor: torch.Tensor) -> str:
    return f"{str(tensor.dtype).replace('torch.', '')} of shape {tuple(tensor.shape)}"


def _shown(names: Sequence[str]) -> str:
    if not names:
        return "none"
    listed: List[str] = list(names[:SHOWN_NAMES])
    more = f" and {len(names) - SHOWN_NAMES} more" if len(names) > SHOWN_NAMES else ""
    return ", ".join(listed) + more
