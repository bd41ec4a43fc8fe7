"""SG-Net's syntax-guided self-attention layer (Zhang et al. 2020)."""
import torch
from torch import nn
from transformers import BertConfig, PretrainedConfig
from transformers.models.bert.modeling_bert import BertLayer


def bert_layer_config(config: PretrainedConfig) -> BertConfig:
    """A BertConfig with the sizes of the wrapped encoder (DistilBERT's
    config names its fields differently)."""
    intermediate = getattr(config, "intermediate_size", None) or config.hidden_dim
    activation = getattr(config, "hidden_act", None) or config.activation
    hidden_dropout = getattr(config, "hidden_dropout_prob", None)
    attention_dropout = getattr(config, "attention_probs_dropout_prob", None)
    layer_config = BertConfig(
        hidden_size=config.hidden_size,
        num_attention_heads=config.num_attention_heads,
        intermediate_size=intermediate,
        hidden_act=activation,
        hidden_dropout_prob=config.dropout if hidden_dropout is None else hidden_dropout,
        attention_probs_dropout_prob=config.attention_dropout if attention_dropout is None else attention_dropout,
        layer_norm_eps=getattr(config, "layer_norm_eps", 1e-12),
        initializer_range=config.initializer_range,
    )
    layer_config._attn_implementation = "sdpa"
    return layer_config


class AncestorMaskLayer(nn.Module):
    """A randomly initialised, BERT-layer shaped self-attention layer over
    the encoder's output H, attending only where the syntax-guided mask
    allows; the result mixes both: gamma * (w0 * H + w1 * H'), with
    (w0, w1) = softmax(w), w initialised equal and gamma to 1."""

    def __init__(self, config: PretrainedConfig):
        super().__init__()
        layer_config = bert_layer_config(config)
        self.layer = BertLayer(layer_config)
        self.layer.apply(lambda module: _init_weights(module, layer_config.initializer_range))
        self.mix_logits = nn.Parameter(torch.zeros(2))
        # (1,) rather than a scalar: thinc's optimizers need sized parameters
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, hidden_states: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
        """visible: (batch, 1, n_pieces, n_pieces) bool."""
        additive = torch.zeros(visible.shape, dtype=hidden_states.dtype, device=hidden_states.device)
        additive = additive.masked_fill(~visible, torch.finfo(hidden_states.dtype).min)
        guided: torch.Tensor = self.layer(hidden_states, attention_mask=additive)[0]
        weights = self.mix_logits.softmax(-1)
        return self.scale * (weights[0] * hidden_states + weights[1] * guided)


def _init_weights(module: nn.Module, std: float) -> None:
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, std=std)
        nn.init.zeros_(module.bias)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)
