"""spacy-sla: syntax-aware local attention (Li et al. 2021) for spaCy
transformer pipelines."""
from . import architectures, corpora, scorers  # noqa: F401  (registers functions)
from .about import __version__
from .data_classes import LocalAttentionMask
from .masks import MaskBuilder, MissingParseError, SyntaxMask, WindowMask
from .pipeline_component import SLATransformer, make_sla_transformer

__all__ = [
    "LocalAttentionMask",
    "MaskBuilder",
    "MissingParseError",
    "SLATransformer",
    "SyntaxMask",
    "WindowMask",
    "__version__",
    "make_sla_transformer",
]
