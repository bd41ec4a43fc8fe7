"""SG-Net's syntax-guided mask (Zhang et al. 2020, spacy-sla.ancestor_mask.v1)
and its variant `sgnet`: a syntax-guided self-attention layer on top of the
transformer (layers/ancestor_mask.py), masked to each token and its
ancestors."""
import numpy
from spacy.util import registry

from ..syntax.builders import DocLike, ParseReader, parsed_graph, span_bounds
from ..syntax.doc_parses import DocParses
from .registry import register_variant, sla_transformer

__all__ = ["AncestorMask", "create_ancestor_mask"]


class AncestorMask(ParseReader):
    """Token j is visible from token i iff j is i or one of i's ancestors
    (following heads up; on a head cycle each token is reached once)."""

    name = "spacy-sla.ancestor_mask.v1"

    def __repr__(self) -> str:
        return "AncestorMask()"

    def build(self, doclike: DocLike, parses: DocParses) -> numpy.ndarray:
        doc, start, end = span_bounds(doclike)
        if end == start:
            return numpy.zeros((0, 0), dtype=bool)
        tokens = numpy.arange(start, end)
        return parsed_graph(parses, doc, self).ancestor_or_self(tokens, tokens)


@registry.misc("spacy-sla.ancestor_mask.v1")
def create_ancestor_mask() -> AncestorMask:
    """SG-Net's mask: a token and its ancestors."""
    return AncestorMask()


register_variant("sgnet", "SG-Net (Zhang et al. 2020): a syntax-guided self-attention layer (token -> itself and its "
                 "ancestors) on top.", sla_transformer("mask = null\n") + """
[components.transformer.model.ancestor_mask]
@misc = "spacy-sla.ancestor_mask.v1"
""")
