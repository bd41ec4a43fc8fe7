"""The registry of attention variants: what `spacy sla init-config` offers
and configs/generate.py builds the project's configs from.

A variant is a name, a line that says what it is, and the config text of
its [components.transformer] blocks (factory, architecture and attention
settings; the model's name and span getter are the user's in init-config).
Each mask variant registers its variants in its own module beside its
builder (spacy_sla/variants/NAME.py); the reference `vanilla` and LISA's
`lisa` register with their architectures (spacy_sla/architectures.py). Your
own variant: register_variant in the file you give `--code`, with a block
that names your registered builder.
"""
import re
from dataclasses import dataclass
from typing import Any, Dict, List

from thinc.api import Config

from ..errors import Errors

__all__ = ["SLA_TRANSFORMER", "Variant", "get_variant", "register_variant", "sla_transformer", "variant_names"]

# A variant's name is the stem of the config file init-config writes for it.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class Variant:
    name: str
    description: str
    config: str  # config text: [components.transformer] and the blocks under it

    def transformer_block(self) -> Dict[str, Any]:
        """The [components.transformer] blocks, uninterpolated."""
        block: Dict[str, Any] = Config().from_str(self.config, interpolate=False)["components"]["transformer"]
        return block

    def text(self) -> str:
        """The variant as a config part: its description as a comment, then its blocks."""
        return "".join(f"# {line}\n" for line in self.description.splitlines()) + self.config


_VARIANTS: Dict[str, Variant] = {}


def register_variant(name: str, description: str, config: str) -> Variant:
    """Offer a variant to init-config and configs/generate.py; [SLA-E121]
    for a name that is not a file stem or is taken by another variant, or a
    config without a transformer component and model."""
    variant = Variant(name, description, config)
    problem = None
    if not _NAME.fullmatch(name):
        problem = "a variant's name is the stem of its config file: letters, digits, '_', '.', '-'"
    elif name in _VARIANTS and _VARIANTS[name] != variant:
        problem = "another variant has this name"
    else:
        try:
            block = variant.transformer_block()
            if not isinstance(block.get("factory"), str) or "@architectures" not in block.get("model", {}):
                problem = "its [components.transformer] block needs a factory and a model with @architectures"
        except Exception as error:  # thinc's and configparser's errors: the text is not a config
            problem = f"its config cannot be read ({type(error).__name__}: {' '.join(str(error).split())})"
    if problem is not None:
        raise ValueError(Errors.E121.format(name=repr(name), problem=problem))
    _VARIANTS[name] = variant
    return variant


def variant_names() -> List[str]:
    """Every registered variant, in name order."""
    return sorted(_VARIANTS)


def get_variant(name: str) -> Variant:
    """The registered variant `name`; [SLA-E032] naming the others otherwise."""
    if name not in _VARIANTS:
        raise ValueError(Errors.E032.format(variant=name, variants=", ".join(variant_names())))
    return _VARIANTS[name]


def sla_transformer(model_settings: str = "") -> str:
    """The `sla_transformer` component as every SLA variant has it, with
    `model_settings` (lines such as `mask = null`) in its model block; the
    variant adds its builders' blocks after it."""
    return f"""
[components]

[components.transformer]
factory = "sla_transformer"
max_batch_items = 4096
set_extra_annotations = {{"@annotation_setters":"spacy-transformers.null_annotation_setter.v1"}}

[components.transformer.model]
@architectures = "spacy-sla.SLATransformerModel.v1"
name = ${{paths.transformer}}
mixed_precision = false
tokenizer_config = {{"use_fast": true}}
transformer_config = {{}}
grad_scaler_config = {{}}
sla_layers = null
on_missing_parse = "error"
{model_settings}
[components.transformer.model.get_spans]
@span_getters = "spacy-transformers.strided_spans.v1"
window = 128
stride = 96
"""


SLA_TRANSFORMER = sla_transformer()
