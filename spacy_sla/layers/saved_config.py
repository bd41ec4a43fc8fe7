"""The encoder config saved with an SLA transformer, checked against its
saved weights before any model is built, and the tokenizer saved with it
checked against the model.

Building a model on torch's meta device takes no memory for its tensors,
but not nothing: each layer is a Python module (a config of 4,000 layers
takes seconds and hundreds of MB), and some families compute tables with
numpy while they build (DistilBERT's sinusoidal positions). So the sizes a
config builds from are first compared with the saved weights, by their
names and shapes alone: the lists of layers, the vocabulary, the width and
the positions of the embeddings ([SLA-E122]). The model's dtype is the
saved weights', never the config's `torch_dtype` ([SLA-W014], [SLA-E125]);
and a tokenizer must give no token id beyond the embedding table's rows
([SLA-E126]).
"""
import re
import warnings
from collections import defaultdict
from typing import Any, Dict, Mapping, Optional, Set, Tuple

import torch
from transformers import PretrainedConfig

from ..errors import Errors, Warnings
from .family_adapters import check_model_type

FLOAT_TYPES = ("float16", "bfloat16", "float32", "float64")
TORCH_DTYPE = "torch_dtype"
# "<list>.<index>." in a weight's name: an entry of a module list (the layers)
LIST_ENTRY = re.compile(r"(.*?)\.(\d+)\.")
WORD_EMBEDDINGS = ("word_embeddings.weight", "tok_embeddings.weight")
POSITION_EMBEDDINGS = "embeddings.position_embeddings.weight"


def check_torch_dtype(config: Mapping[str, Any]) -> None:
    """[SLA-E125] for a `torch_dtype` that names no floating-point type:
    transformers would look it up in torch ("load" is torch.load) and make
    it the default dtype while it builds."""
    value = config.get(TORCH_DTYPE)
    if value is not None and not (isinstance(value, str) and value in FLOAT_TYPES):
        raise ValueError(Errors.E125.format(value=repr(value)[:80], types=", ".join(FLOAT_TYPES)))


def model_dtype(state: Mapping[str, torch.Tensor]) -> torch.dtype:
    """The dtype the model is built in: float64 where every saved float
    weight is float64, else float32, the dtype the component computes in
    and hands its listeners (weights saved in a half type are widened, as
    they load for training; half precision is autocast's)."""
    kinds = {value.dtype for value in state.values() if value.is_floating_point()}
    return torch.float64 if kinds == {torch.float64} else torch.float32


def in_saved_dtype(config: Dict[str, Any], state: Mapping[str, torch.Tensor]) -> Dict[str, Any]:
    """The config with the saved weights' dtype as its `torch_dtype`; another
    saved `torch_dtype` is ignored with [SLA-W014] (a float16 model would
    hand its listeners float16, a float64 one take twice the memory)."""
    check_torch_dtype(config)
    dtype = str(model_dtype(state)).replace("torch.", "")
    saved = config.get(TORCH_DTYPE)
    if saved is not None and saved != dtype:
        warnings.warn(Warnings.W014.format(saved=saved, dtype=dtype))
    return {**config, TORCH_DTYPE: dtype}


def check_config_sizes(config: PretrainedConfig, state: Mapping[str, Any]) -> None:
    """[SLA-E122] where the config would build more than the saved weights
    hold, read from the names and shapes of the weights only (a state that
    is no mapping of names to tensors is left to check_saved_state). Only
    what the weights hold is compared: a missing weight is [SLA-E092] once
    the model is built on the meta device, which these bounds make cheap."""
    tensors = {key: value for key, value in state.items() if isinstance(key, str) and isinstance(value, torch.Tensor)}
    family = check_model_type(config.model_type, name=config.name_or_path)
    longest = _longest_module_list(tensors)
    for setting in family.layer_list_settings:
        value = getattr(config, setting, None)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= max(longest, 1):
            _refuse(setting, value, f"{longest} layer(s) in its longest list of layers")
    width = getattr(config, "embedding_size", None) or config.hidden_size
    width_setting = "hidden_size" if width == config.hidden_size else "embedding_size"
    words = _shape_of(tensors, WORD_EMBEDDINGS)
    if words is not None:
        _compare("vocab_size", config.vocab_size, words[0], "word embeddings")
        _compare(width_setting, width, words[1], "word embeddings")
    positions = _shape_of(tensors, (POSITION_EMBEDDINGS,))
    if positions is not None:
        _compare("max_position_embeddings", config.max_position_embeddings, positions[0], "position embeddings")
        _compare(width_setting, width, positions[1], "position embeddings")
    elif getattr(config, "sinusoidal_pos_embds", False):
        _refuse("sinusoidal_pos_embds", True, "no position embeddings to compute the table of")


def check_token_ids(tokenizer: Any, n_rows: int) -> None:
    """[SLA-E126] for a tokenizer that gives ids beyond the embedding table
    (its vocabulary's largest id, added tokens included): the first text
    with such a token would fail in the middle of a batch."""
    vocabulary = tokenizer.get_vocab()
    largest = max(vocabulary.values(), default=-1)
    if largest >= n_rows:
        tokens = sorted(token for token, index in vocabulary.items() if index >= n_rows)
        raise ValueError(Errors.E126.format(largest=largest, rows=n_rows, count=len(tokens),
                                            tokens=", ".join(repr(token) for token in tokens[:5])))


def _longest_module_list(state: Mapping[str, torch.Tensor]) -> int:
    entries: Dict[str, Set[str]] = defaultdict(set)
    for key in state:
        prefix = ""
        for match in LIST_ENTRY.finditer(key):
            prefix += match.group(1)
            entries[prefix].add(match.group(2))
            prefix += f".{match.group(2)}."
    return max((len(indices) for indices in entries.values()), default=0)


def _shape_of(state: Mapping[str, torch.Tensor], endings: Tuple[str, ...]) -> Optional[Tuple[int, ...]]:
    shapes = [tuple(value.shape) for key, value in state.items() if key.endswith(endings)]
    return shapes[0] if len(shapes) == 1 and len(shapes[0]) == 2 else None


def _compare(setting: str, value: Any, saved: int, weights: str) -> None:
    if value != saved:
        _refuse(setting, value, f"{saved} in the shape of its {weights}")


def _refuse(setting: str, value: Any, saved: str) -> None:
    raise ValueError(Errors.E122.format(setting=setting, value=repr(value)[:80], saved=saved))
