from .attention import AttentionBatch, SyntaxAwareAttention, attending
from .syntax_aware_transformer import ATTENTION_FAMILIES, SyntaxAwareTransformer
from .transformer_model import SLATransformerModel

__all__ = [
    "ATTENTION_FAMILIES",
    "AttentionBatch",
    "SLATransformerModel",
    "SyntaxAwareAttention",
    "SyntaxAwareTransformer",
    "attending",
]
