from .attention_batch import AttentionBatch, attending
from .attention_paths import AttentionPaths
from .family_adapters import ATTENTION_FAMILIES, FamilyAdapter, check_model_type, check_transformer_config
from .syntax_aware_attention import SyntaxAwareAttention
from .syntax_aware_transformer import SyntaxAwareTransformer, computing_by
from .transformer_model import SLATransformerModel

__all__ = [
    "ATTENTION_FAMILIES",
    "AttentionBatch",
    "AttentionPaths",
    "FamilyAdapter",
    "SLATransformerModel",
    "SyntaxAwareAttention",
    "SyntaxAwareTransformer",
    "attending",
    "check_model_type",
    "check_transformer_config",
    "computing_by",
]
