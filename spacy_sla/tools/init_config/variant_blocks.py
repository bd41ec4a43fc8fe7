"""The attention variants init-config makes of a user's transformer: the
registered variants (spacy_sla.variants), the transformer block of one
variant with the user's own model settings, and the checks of the variant
options (--threshold, --window, --punct-rule, --sla-layers) against the
mask builders and the transformer's layers."""
import copy
from typing import Any, Dict, List, Optional, Sequence

from spacy.util import registry

from spacy_sla.variants import get_variant

from .errors import Errors

REFERENCE = "vanilla"
# The arguments of spacy-transformers.TransformerModel.v3: the user's model settings that every variant keeps.
TRANSFORMER_SETTINGS = ("name", "get_spans", "tokenizer_config", "transformer_config", "mixed_precision",
                        "grad_scaler_config")
# The component settings each factory takes besides `model` (their default configs').
FACTORY_SETTINGS = {
    "transformer": ("max_batch_items", "set_extra_annotations"),
    "sla_transformer": ("max_batch_items", "set_extra_annotations", "store_gates"),
}
# --threshold 4 and the others: a variant option and where it sits in the transformer's model block
VARIANT_OPTIONS = {
    "threshold": ("mask", "threshold"),
    "window": ("mask", "window"),
    "punct_rule": ("mask", "punct_rule"),
    "sla_layers": ("sla_layers",),
}


def variant_part(variant: str) -> Dict[str, Any]:
    """The [components.transformer] blocks of a registered variant, uninterpolated."""
    return get_variant(variant).transformer_block()



def transformer_block(user_block: Dict[str, Any], variant: str, options: Dict[str, Any]) -> Dict[str, Any]:
    """The transformer component of a variant: the variant's factory,
    architecture and SLA settings, the user's transformer settings. The
    reference keeps a spacy-transformers block exactly as the user wrote it."""
    user_model = user_block.get("model", {})
    if variant == REFERENCE and user_block.get("factory") == "transformer":
        return copy.deepcopy(user_block)
    part = variant_part(variant)
    model: Dict[str, Any] = {"@architectures": part["model"]["@architectures"]}
    model.update({key: copy.deepcopy(user_model[key]) for key in TRANSFORMER_SETTINGS if key in user_model})
    for key, value in part["model"].items():
        if key not in model and key not in TRANSFORMER_SETTINGS:
            model[key] = copy.deepcopy(value)
    for option, value in options.items():
        *parents, leaf = VARIANT_OPTIONS[option]
        node: Optional[Dict[str, Any]] = model
        for parent in parents:
            node = node.get(parent) if isinstance(node, dict) else None
        if isinstance(node, dict) and leaf in node:
            node[leaf] = value
    factory = part["factory"]
    block: Dict[str, Any] = {"factory": factory}
    for key in FACTORY_SETTINGS[factory]:
        if key in user_block:
            block[key] = copy.deepcopy(user_block[key])
        elif key in part:
            block[key] = copy.deepcopy(part[key])
    block["model"] = model
    return block


def takes_option(variant: str, option: str) -> bool:
    *parents, leaf = VARIANT_OPTIONS[option]
    node: Any = variant_part(variant)["model"]
    for parent in parents:
        node = node.get(parent) if isinstance(node, dict) else None
    return isinstance(node, dict) and leaf in node



def parse_sla_layers(value: str) -> List[int]:
    """--sla-layers 0,2,-1 -> [0, 2, -1]; [SLA-E059] for anything but whole numbers."""
    try:
        return [int(part) for part in value.split(",")]
    except ValueError:
        raise ValueError(Errors.E059.format(
            option="--sla-layers", value=repr(value),
            reason="it takes comma-separated layer indices (whole numbers, e.g. 0,5,11 or -1).")) from None


def local_model_config(name: Any) -> Optional[Any]:
    """The Hugging Face config of the model `name` when it is on this
    machine (a local directory or the hub's cache), else None."""
    if not isinstance(name, str) or "${" in name:
        return None
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(name, local_files_only=True)
    except (OSError, ValueError):
        return None


def transformer_layer_count(name: Any) -> Optional[int]:
    """The number of layers of the Hugging Face model `name` when its config
    is on this machine, else None."""
    count = getattr(local_model_config(name), "num_hidden_layers", None)
    return count if isinstance(count, int) else None


def check_model_family(model: Dict[str, Any]) -> None:
    """SLA-E002 / SLA-E009 for a model block whose model (when its config is
    on this machine) has a type or position embeddings SLA cannot wrap:
    before anything is written or trained, not when training starts."""
    model_config = local_model_config(model.get("name"))
    if model_config is not None:
        from spacy_sla.layers import check_transformer_config

        check_transformer_config(model_config, str(model.get("name")))


def check_attention_model(model: Dict[str, Any], n_layers: Optional[int]) -> None:
    """Build the transformer model block's mask with its registered builder
    and check its sla_layers, as training would: the builders' own checks
    (SLA-E007, SLA-E014), and SLA-E003 against the layer count when it is known (else
    whole, distinct indices). The block is taken as it is: give it
    interpolated, or with literal mask settings."""
    mask = model.get("mask")
    if isinstance(mask, dict) and any(key.startswith("@") for key in mask):
        try:
            registry.resolve({"mask": mask}, validate=True)
        except ValueError as error:  # the builders' coded errors, and thinc's ConfigValidationError
            raise ValueError(" ".join(str(error).split())) from None
    layers = model.get("sla_layers")
    if layers is None:
        return
    if not isinstance(layers, list) or any(isinstance(index, bool) or not isinstance(index, int)
                                           for index in layers):
        raise ValueError(f"sla_layers must be null (every layer) or a list of layer indices; got {layers!r}.")
    if n_layers is not None:
        from spacy_sla import resolve_layers

        resolve_layers(layers, n_layers)
    elif len(set(layers)) != len(layers):
        raise ValueError(f"sla_layers {layers} names a layer twice; give distinct layer indices.")


def check_variant_options(user_block: Dict[str, Any], variants: Sequence[str], options: Dict[str, Any]) -> None:
    """[SLA-E059] for an option value the variants' mask builders or the
    transformer's layers refuse, checked one option at a time so that the
    error names it."""
    n_layers = transformer_layer_count(user_block.get("model", {}).get("name")) if "sla_layers" in options else None
    for option, value in options.items():
        for variant in variants:
            if not takes_option(variant, option):
                continue
            model = transformer_block(user_block, variant, {option: value})["model"]
            try:
                check_attention_model(model, n_layers)
            except ValueError as error:
                raise ValueError(Errors.E059.format(option="--" + option.replace("_", "-"), value=repr(value),
                                                    reason=str(error))) from None

