from .attention import AttentionMaskSlot, GatedLocalAttention
from .syntax_aware_transformer import ATTENTION_FAMILIES, SyntaxAwareTransformer
from .transformer_model import SLATransformerModel

__all__ = [
    "ATTENTION_FAMILIES",
    "AttentionMaskSlot",
    "GatedLocalAttention",
    "SLATransformerModel",
    "SyntaxAwareTransformer",
]
