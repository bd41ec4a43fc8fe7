from typing import Any, Dict, Optional

from spacy_transformers.data_classes import HFObjects
from spacy_transformers.layers.hf_shim import HFShim
from transformers import PretrainedConfig

from .syntax_aware_transformer import SyntaxAwareTransformer


class SyntaxAwareTransformerClass:
    """Stands in for AutoModel where spacy-transformers rebuilds a saved
    model from its config, so that the rebuilt model has the configured
    syntax-aware attention (options of SyntaxAwareTransformer)."""

    def __init__(self, options: Dict[str, Any]):
        self.options = options

    def from_config(self, config: PretrainedConfig) -> SyntaxAwareTransformer:
        return SyntaxAwareTransformer.from_config(config, **self.options)


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
        options: Dict[str, Any],
        mixed_precision: bool = False,
        grad_scaler_config: Optional[dict] = None,
    ):
        super().__init__(
            model,
            mixed_precision=mixed_precision,
            # HFShim writes into this dict, so never pass a shared default.
            grad_scaler_config=dict(grad_scaler_config or {}),
            model_cls=SyntaxAwareTransformerClass(options),
        )
