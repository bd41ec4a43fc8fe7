from .attention import AttentionSlot, SyntaxAwareAttention
from .syntax_aware_transformer import ATTENTION_FAMILIES, SyntaxAwareTransformer
from .transformer_model import SLATransformerModel

__all__ = [
    "ATTENTION_FAMILIES",
    "AttentionSlot",
    "SLATransformerModel",
    "SyntaxAwareAttention",
    "SyntaxAwareTransformer",
]
