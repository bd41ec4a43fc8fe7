"""spacy-sla: syntax-aware local attention (Li et al. 2021) for spaCy
transformer pipelines."""
from . import architectures  # noqa: F401  (registers functions)
from .about import __version__
from .data_classes import ParentAttention, SyntaxInputs
from .entity_guard import EntityGuard, make_entity_guard
from .masks import (
    AncestorMask,
    DependencyScaleDistances,
    MaskBuilder,
    MissingParseError,
    SoftThreshold,
    SoftThresholdBias,
    SyntaxMask,
    TreeDistanceBuckets,
    WindowMask,
)
from .parse_withdrawal import ParseWithdrawal, make_parse_withdrawal
from .pipeline_component import SLATransformer, make_sla_transformer
from .token_ner import TokenNER, make_token_ner
from .training import corpora, heads, loggers, scorers  # noqa: F401  (registers functions)

__all__ = [
    "AncestorMask",
    "DependencyScaleDistances",
    "EntityGuard",
    "MaskBuilder",
    "MissingParseError",
    "ParentAttention",
    "ParseWithdrawal",
    "SLATransformer",
    "SoftThreshold",
    "SoftThresholdBias",
    "SyntaxInputs",
    "SyntaxMask",
    "TokenNER",
    "TreeDistanceBuckets",
    "WindowMask",
    "__version__",
    "make_entity_guard",
    "make_parse_withdrawal",
    "make_sla_transformer",
    "make_token_ner",
]
