"""The model-family adapters: where each family of Hugging Face encoders
keeps its self-attention modules, and the module that replaces one (one
module per adapter shape).

A family plugs in with one FamilyAdapter subclass, registered under the
model_type of its configs in ATTENTION_FAMILIES. check_model_type (and
check_transformer_config, from a config) tells before any model is built
whether a model type, and its position embeddings, can be wrapped."""
from typing import Dict, Optional, Type

import transformers
from packaging.version import Version
from transformers import PretrainedConfig

from ...errors import Errors
from .adapter import TRANSFORMERS_FLOOR, FamilyAdapter
from .albert import AlbertStyleAttention
from .bert import RELATIVE_KEY_TYPES, BertStyleSelfAttention, relative_key_scores
from .deberta_v2 import DebertaV2StyleSelfAttention
from .distilbert import DistilBertStyleAttention
from .modernbert import ModernBertStyleAttention
from .mpnet import MPNetStyleAttention

__all__ = [
    "ATTENTION_FAMILIES",
    "AlbertStyleAttention",
    "BertStyleSelfAttention",
    "DebertaV2StyleSelfAttention",
    "DistilBertStyleAttention",
    "FamilyAdapter",
    "MPNetStyleAttention",
    "ModernBertStyleAttention",
    "RELATIVE_KEY_TYPES",
    "TRANSFORMERS_FLOOR",
    "attention_family",
    "check_model_type",
    "check_transformer_config",
    "installed_transformers",
    "relative_key_scores",
    "supported_model_types",
    "unsupported_positions_reason",
]

# model_type (of the Hugging Face config) -> its adapter
ATTENTION_FAMILIES: Dict[str, Type[FamilyAdapter]] = {
    "bert": BertStyleSelfAttention,
    "roberta": BertStyleSelfAttention,
    "xlm-roberta": BertStyleSelfAttention,
    "camembert": BertStyleSelfAttention,
    "electra": BertStyleSelfAttention,
    "distilbert": DistilBertStyleAttention,
    "mpnet": MPNetStyleAttention,
    "albert": AlbertStyleAttention,
    "deberta-v2": DebertaV2StyleSelfAttention,
    "modernbert": ModernBertStyleAttention,
}


def supported_model_types() -> str:
    return ", ".join(sorted(ATTENTION_FAMILIES))


def check_model_type(model_type: str, position_embedding_type: Optional[str] = None, name: str = "") -> Type[FamilyAdapter]:
    """The adapter of a model type, checked before any model is built or
    trained: SLA-E002, naming the supported model types, for a model type
    without one; SLA-E099 where the installed transformers is older than
    the adapter needs; SLA-E009 for a position_embedding_type (as in the model's
    config; None: the family's default) the adapter does not compute.
    `name`: the model as the error names it (default: the model type)."""
    family = ATTENTION_FAMILIES.get(model_type)
    if family is None:
        raise ValueError(Errors.E002.format(name=name or model_type, model_type=model_type, supported=supported_model_types()))
    if Version(installed_transformers()) < Version(family.minimum_transformers):
        raise ValueError(Errors.E099.format(name=name or model_type, model_type=model_type,
                                            minimum=family.minimum_transformers, installed=installed_transformers()))
    if position_embedding_type is not None and position_embedding_type not in family.position_embedding_types:
        raise ValueError(
            Errors.E009.format(name=name or model_type, reason=unsupported_positions_reason(model_type, position_embedding_type))
        )
    return family


def installed_transformers() -> str:
    return transformers.__version__


def unsupported_positions_reason(model_type: str, position_embedding_type: str) -> str:
    supported = ", ".join(sorted(ATTENTION_FAMILIES[model_type].position_embedding_types))
    return (
        f"it uses '{position_embedding_type}' position embeddings, and for model type '{model_type}' the SLA "
        f"transformer supports position_embedding_type {supported}; use a model with one of them"
    )


def check_transformer_config(config: PretrainedConfig, name: str = "") -> Type[FamilyAdapter]:
    """check_model_type for a Hugging Face config (e.g. AutoConfig's, which
    needs no weights), reading its model_type and position_embedding_type."""
    return check_model_type(
        config.model_type, getattr(config, "position_embedding_type", None), name or config.name_or_path
    )


def attention_family(config: PretrainedConfig, name: str = "") -> Type[FamilyAdapter]:
    """The adapter of the config's model family; SLA-E002, naming the supported
    families, for any other."""
    return check_model_type(config.model_type, name=name or config.name_or_path)
