from .attention_batch import AttentionBatch
from .family_adapters import ATTENTION_FAMILIES, FamilyAdapter, check_model_type, check_transformer_config
from .syntax_aware_attention import GatedAttention, SyntaxAwareAttention, gated_attention
from .syntax_aware_transformer import SyntaxAwareTransformer
from .transformer_model import SLATransformerModel

__all__ = [
    "ATTENTION_FAMILIES",
    "AttentionBatch",
    "FamilyAdapter",
    "GatedAttention",
    "SLATransformerModel",
    "SyntaxAwareAttention",
    "SyntaxAwareTransformer",
    "check_model_type",
    "check_transformer_config",
    "gated_attention",
]
