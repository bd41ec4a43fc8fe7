"""spacy-sla: syntax-aware local attention (Li et al. 2021) for spaCy
transformer pipelines."""
from . import architectures  # noqa: F401  (registers functions)
from .about import __version__
from .data_classes import ParentAttention
from .entity_guard import EntityGuard, make_entity_guard
from .parse_withdrawal import ParseWithdrawal, make_parse_withdrawal
from .pipeline_component import SLATransformer, make_sla_transformer
from .syntax.builders import DistanceBuilder, MaskBuilder, MissingParseError
from .syntax.punctuation import PunctRule
from .syntax.syntax_inputs import SyntaxInputs
from .token_ner import TokenNER, make_token_ner
from .training import corpora, heads, loggers, scorers  # noqa: F401  (registers functions)
from .variants.depscale import DependencyScaleDistances
from .variants.logthreshold import ThresholdLogBias
from .variants.sgnet import AncestorMask
from .variants.sla import SyntaxMask
from .variants.softbias import TreeDistanceBuckets
from .variants.window import WindowMask

__all__ = [
    "AncestorMask",
    "DependencyScaleDistances",
    "DistanceBuilder",
    "EntityGuard",
    "MaskBuilder",
    "MissingParseError",
    "ParentAttention",
    "ParseWithdrawal",
    "PunctRule",
    "SLATransformer",
    "SyntaxInputs",
    "SyntaxMask",
    "ThresholdLogBias",
    "TokenNER",
    "TreeDistanceBuckets",
    "WindowMask",
    "__version__",
    "make_entity_guard",
    "make_parse_withdrawal",
    "make_sla_transformer",
    "make_token_ner",
]
