"""spacy-sla: syntax-aware local attention (Li et al. 2021) for spaCy
transformer pipelines.

The names below are the plugin's public API; the tools of the wheel
(spacy_sla.tools) use the plugin only through them
and the `__all__` of its modules (tests/test_layout.py)."""
from . import architectures  # noqa: F401  (registers functions)
from .about import __version__
from .data_classes import ParentAttention
from .entity_guard import EntityGuard, make_entity_guard
from .layers.syntax_aware_transformer import resolve_layers
from .layers.transformer_model import SpanGetter, flatten_spans, tokenize_spans
from .parse_withdrawal import ParseWithdrawal, make_parse_withdrawal
from .pipeline_component import SLATransformer, make_sla_transformer
from .syntax.builders import (
    BuilderKind,
    DistanceBuilder,
    MaskBuilder,
    MissingParseError,
    ParseReadingBuilder,
    build_matrix,
    builder_kind,
    builder_punct_rule,
)
from .syntax.doc_parses import DocParses, has_complete_parse
from .syntax.punctuation import PunctRule, is_authors_punctuation
from .syntax.syntax_inputs import SyntaxInputs, build_syntax_inputs
from .training import corpora, loggers  # noqa: F401  (registers functions)
from .variants.ancestor_mask import AncestorMask
from .variants.dependency_scale import DependencyScale
from .variants.syntax_mask import SyntaxMask
from .variants.threshold_log_bias import ThresholdLogBias
from .variants.tree_distance_bias import TreeDistanceBias
from .variants.window_mask import WindowMask

__all__ = [
    # the component, its mask builders and what configs name
    "AncestorMask",
    "BuilderKind",
    "DependencyScale",
    "DistanceBuilder",
    "DocParses",
    "EntityGuard",
    "MaskBuilder",
    "MissingParseError",
    "ParentAttention",
    "ParseReadingBuilder",
    "ParseWithdrawal",
    "PunctRule",
    "SLATransformer",
    "SyntaxInputs",
    "SyntaxMask",
    "ThresholdLogBias",
    "TreeDistanceBias",
    "WindowMask",
    "__version__",
    "make_entity_guard",
    "make_parse_withdrawal",
    "make_sla_transformer",
    # the steps from a parse to the masks, for code that inspects them (spacy sla mask, mask-stats)
    "SpanGetter",
    "build_matrix",
    "build_syntax_inputs",
    "builder_kind",
    "builder_punct_rule",
    "flatten_spans",
    "has_complete_parse",
    "is_authors_punctuation",
    "resolve_layers",
    "tokenize_spans",
]
