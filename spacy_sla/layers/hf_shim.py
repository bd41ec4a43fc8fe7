from typing import Optional, Sequence

from spacy_transformers.data_classes import HFObjects
from spacy_transformers.layers.hf_shim import HFShim
from transformers import PretrainedConfig

from .syntax_aware_transformer import SyntaxAwareTransformer


class SyntaxAwareTransformerClass:
    """Stands in for AutoModel where spacy-transformers rebuilds a saved
    model from its config, so that the rebuilt model has SLA attention in the
    configured layers."""

    def __init__(self, sla_layers: Optional[Sequence[int]]):
        self.sla_layers = None if sla_layers is None else list(sla_layers)

    def from_config(self, config: PretrainedConfig) -> SyntaxAwareTransformer:
        return SyntaxAwareTransformer.from_config(config, self.sla_layers)


class SLAShim(HFShim):
    """The HFShim of spacy-transformers around a SyntaxAwareTransformer.

    Serialization is HFShim's: the saved state is the SyntaxAwareTransformer's
    state dict (encoder and gates) with the encoder's config and tokenizer.
    Loading rebuilds a SyntaxAwareTransformer, whose load_state_dict refuses
    to drop or ignore SLA weights, also on HFShim's non-strict fallback.
    """

    def __init__(
        self,
        model: HFObjects,
        sla_layers: Optional[Sequence[int]] = None,
        mixed_precision: bool = False,
        grad_scaler_config: Optional[dict] = None,
    ):
        super().__init__(
            model,
            mixed_precision=mixed_precision,
            # HFShim writes into this dict, so never pass a shared default.
            grad_scaler_config=dict(grad_scaler_config or {}),
            model_cls=SyntaxAwareTransformerClass(sla_layers),
        )
