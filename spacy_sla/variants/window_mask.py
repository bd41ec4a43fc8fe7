"""Window local attention, the WLA baseline of Li et al. 2021
(spacy-sla.window_mask.v1), and its variant `window`."""
from typing import Union

import numpy
from spacy.util import registry

from ..syntax.builders import DocLike, check_count, span_bounds
from ..syntax.punctuation import PunctRule, token_punctuation
from .registry import SLA_TRANSFORMER, register_variant

__all__ = ["WindowMask", "create_window_mask"]


class WindowMask:
    """Token j is visible from token i iff |i - j| <= window, with the same
    punctuation rule as the SLA mask. Needs no parse."""

    name = "spacy-sla.window_mask.v1"

    def __init__(self, window: int = 3, punct_rule: Union[str, PunctRule] = "authors"):
        self.window = check_count(self.name, "window", window, 0)
        self.punct_rule = PunctRule.parse(punct_rule, self.name)

    def __repr__(self) -> str:
        return f"WindowMask(window={self.window}, punct_rule={self.punct_rule.value!r})"

    def __call__(self, doclike: DocLike) -> numpy.ndarray:
        _, start, end = span_bounds(doclike)
        positions = numpy.arange(end - start)
        visible: numpy.ndarray = numpy.abs(positions[:, None] - positions[None, :]) <= self.window
        punctuation = token_punctuation(doclike, self.punct_rule)
        if punctuation is not None:
            visible[:, punctuation] = True
        return visible


@registry.misc("spacy-sla.window_mask.v1")
def create_window_mask(window: int = 3, punct_rule: str = "authors") -> WindowMask:
    """Window local attention: tokens at most `window` positions away, and
    punctuation by `punct_rule` ("authors", "spacy" or "none")."""
    return WindowMask(window=window, punct_rule=punct_rule)


register_variant("window", "Window local attention (the WLA baseline of Li et al. 2021) in every layer.",
                 SLA_TRANSFORMER + """
[components.transformer.model.mask]
@misc = "spacy-sla.window_mask.v1"
window = 3
punct_rule = "authors"
""")
