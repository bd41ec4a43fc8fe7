"""The base of the model-family adapters: what a family's replacement of
its layers' self-attention module provides."""
from abc import ABC, abstractmethod
from typing import ClassVar, FrozenSet, Tuple

from torch import nn
from transformers import PreTrainedModel

from ..syntax_aware_attention import SyntaxAwareAttention

TRANSFORMERS_FLOOR = "4.38.0"  # setup.cfg's transformers>=


def module_list(model: nn.Module, path: str) -> nn.ModuleList:
    """The list of layers at `path` in the model ("encoder.layer")."""
    layers = model.get_submodule(path)
    if not isinstance(layers, nn.ModuleList):
        raise TypeError(f"{type(model).__name__}.{path} is a {type(layers).__name__}, not a list of layers")
    return layers


class FamilyAdapter(SyntaxAwareAttention, ABC):
    """A model family's replacement of its layers' self-attention module.

    An adapter provides:
    - `layers(model)`: the encoder's list of layers, for a model of the family;
    - `holder(layer)`: the module of a layer that holds its self-attention;
    - `attribute`: the name of the self-attention module in its holder;
    - `__init__(original, config, **options)`: keeps the original module's
      projections and passes its hidden size and number of heads, the
      config's attention dropout and initializer range, and the options
      (local, local_bias, parent_attention_head) to SyntaxAwareAttention;
    - `forward`, with the original module's signature: the projections,
      split into heads, go through `self.attend` with the forward pass's
      batch (`self.batch`, bound by SyntaxAwareTransformer.forward, since
      the original signature cannot carry it); it returns what the
      original returns (the context, and the probabilities with
      output_attentions), after the output projection where the original
      module holds it. A head mask is refused (SLA-E010).

    A position term of the model's scores (relative positions) goes to
    `attend` as its score_bias, so that both branches see the model's own
    scores.

    SyntaxAwareTransformer refuses a layer it cannot wrap (SLA-E009: a decoder,
    position embeddings not in `position_embedding_types`, pruned heads)
    before the adapter is built.
    """

    attribute: ClassVar[str]
    # the values of the config's (and the attention module's)
    # position_embedding_type the adapter computes as the model does
    position_embedding_types: ClassVar[FrozenSet[str]] = frozenset({"absolute"})
    # the first transformers release whose modules of the family the adapter
    # wraps as they are (setup.cfg's floor for most; later for families that
    # transformers added or reshaped since)
    minimum_transformers: ClassVar[str] = TRANSFORMERS_FLOOR
    # the config's settings that each make a list of layer modules (what
    # building a model costs beyond its tensors, even on the meta device)
    layer_list_settings: ClassVar[Tuple[str, ...]] = ("num_hidden_layers",)

    @staticmethod
    @abstractmethod
    def layers(model: PreTrainedModel) -> nn.ModuleList:
        """The encoder's layers, in order."""

    @staticmethod
    @abstractmethod
    def holder(layer: nn.Module) -> nn.Module:
        """The module of `layer` that holds its self-attention module."""
