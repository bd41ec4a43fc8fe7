from typing import Any, Dict, Optional

import torch
from spacy_transformers.data_classes import HFObjects
from spacy_transformers.layers.hf_shim import HFShim
from thinc.types import ArgsKwargs
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

    Prediction leaves the module in eval mode (see predict), so that threads
    sharing one pipeline can predict at the same time.
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

    def predict(self, inputs: ArgsKwargs) -> Any:
        """PyTorchShim.predict without its switch back to training mode at the
        end: with threads predicting at once, one thread's switch would turn
        on dropout in the middle of another's forward pass. begin_update
        switches to training mode itself, so training does not rely on it."""
        self._model.eval()
        with torch.no_grad():
            with torch.autocast(device_type="cuda", enabled=self._mixed_precision):
                return self._model(*inputs.args, **inputs.kwargs)
