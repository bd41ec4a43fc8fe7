"""The registered architectures of the SLA transformer, LISA's parent
attention, the variants that are not a mask (the reference `vanilla` and
`lisa`)."""
from typing import Any, Dict, List, Optional

from spacy.tokens import Doc
from spacy.util import registry
from spacy_transformers.data_classes import FullTransformerBatch
from spacy_transformers.layers import split_trf_batch, trfs2arrays
from thinc.api import Model, chain
from thinc.types import Floats2d, Ragged

from .data_classes import ParentAttention
from .layers.transformer_model import SLATransformerModel, SpanGetter
from .syntax.builders import MaskBuilder
from .variants.registry import register_variant, sla_transformer

__all__ = ["create_parent_attention", "create_sla_tok2vec_transformer",
           "create_sla_transformer_model"]


@registry.architectures("spacy-sla.SLATransformerModel.v1")
def create_sla_transformer_model(
    name: str,
    get_spans: SpanGetter,
    mask: Optional[MaskBuilder] = None,
    tokenizer_config: Dict[str, Any] = {},
    transformer_config: Dict[str, Any] = {},
    mixed_precision: bool = False,
    grad_scaler_config: Dict[str, Any] = {},
    sla_layers: Optional[List[int]] = None,
    on_missing_parse: str = "error",
    ancestor_mask: Optional[MaskBuilder] = None,
    parent_attention: Optional[ParentAttention] = None,
) -> Model[List[Doc], FullTransformerBatch]:
    """A Hugging Face transformer with syntax-aware attention, for the
    `sla_transformer` (or `transformer`) component.

    The arguments of spacy-transformers.TransformerModel.v3, plus:
    mask (Optional[Callable]): the local branch's builder: a mask builder
        (spacy-sla.syntax_mask.v1, window_mask.v1, ancestor_mask.v1, or your
        own) or a distance builder (spacy-sla.tree_distance_bias.v1,
        threshold_log_bias.v1, dependency_scale.v1); null for no local branch.
    sla_layers (Optional[List[int]]): the layers with a local branch; null
        for all of them.
    on_missing_parse (str): "error" (default) to refuse Docs without a
        dependency parse, "global" to give them global attention only.
    ancestor_mask (Optional[Callable]): a mask builder (usually
        spacy-sla.ancestor_mask.v1) for SG-Net's syntax-guided layer on top
        of the transformer; null for none.
    parent_attention (Optional[ParentAttention]): LISA's supervised parent
        head (spacy-sla.parent_attention.v1); null for none.
    """
    return SLATransformerModel(
        name,
        get_spans,
        mask,
        tokenizer_config=tokenizer_config,
        transformer_config=transformer_config,
        mixed_precision=mixed_precision,
        grad_scaler_config=grad_scaler_config,
        sla_layers=sla_layers,
        on_missing_parse=on_missing_parse,
        ancestor_mask=ancestor_mask,
        parent_attention=parent_attention,
    )


@registry.architectures("spacy-sla.SLATok2VecTransformer.v1")
def create_sla_tok2vec_transformer(
    name: str,
    get_spans: SpanGetter,
    pooling: Model[Ragged, Floats2d],
    mask: Optional[MaskBuilder] = None,
    grad_factor: float = 1.0,
    tokenizer_config: Dict[str, Any] = {},
    transformer_config: Dict[str, Any] = {},
    mixed_precision: bool = False,
    grad_scaler_config: Dict[str, Any] = {},
    sla_layers: Optional[List[int]] = None,
    on_missing_parse: str = "error",
    ancestor_mask: Optional[MaskBuilder] = None,
    parent_attention: Optional[ParentAttention] = None,
) -> Model[List[Doc], List[Floats2d]]:
    """SLATransformerModel.v1 as a component's own token-to-vector layer:
    what a TransformerListener becomes after `nlp.replace_listeners`, like
    spacy-transformers.Tok2VecTransformer.v3 for the plain transformer."""
    transformer = create_sla_transformer_model(
        name=name,
        get_spans=get_spans,
        mask=mask,
        tokenizer_config=tokenizer_config,
        transformer_config=transformer_config,
        mixed_precision=mixed_precision,
        grad_scaler_config=grad_scaler_config,
        sla_layers=sla_layers,
        on_missing_parse=on_missing_parse,
        ancestor_mask=ancestor_mask,
        parent_attention=parent_attention,
    )
    # A chain of a chain, to match the structure a TransformerListener has
    # after Language.replace_listeners (as in spacy-transformers).
    return chain(chain(transformer, split_trf_batch()), trfs2arrays(pooling, grad_factor))


@registry.misc("spacy-sla.parent_attention.v1")
def create_parent_attention(layer: Optional[int] = None, head: int = 0, weight: float = 1.0) -> ParentAttention:
    """LISA: train head `head` of layer `layer` (null: the middle layer) to
    attend from each token to its syntactic head, with the cross-entropy
    weighted by `weight`."""
    return ParentAttention(layer=layer, head=head, weight=weight)


register_variant("vanilla", "Plain global attention: spacy-transformers' own component and model.", """
[components]

[components.transformer]
factory = "transformer"
max_batch_items = 4096
set_extra_annotations = {"@annotation_setters":"spacy-transformers.null_annotation_setter.v1"}

[components.transformer.model]
@architectures = "spacy-transformers.TransformerModel.v3"
name = ${paths.transformer}
mixed_precision = false
tokenizer_config = {"use_fast": true}
transformer_config = {}
grad_scaler_config = {}

[components.transformer.model.get_spans]
@span_getters = "spacy-transformers.strided_spans.v1"
window = 128
stride = 96
""")
register_variant("lisa", "LISA-style parent attention (Strubell et al. 2018): one head of the middle layer learns to "
                 "attend to each token's head.", sla_transformer("mask = null\nancestor_mask = null\n") + """
[components.transformer.model.parent_attention]
@misc = "spacy-sla.parent_attention.v1"
layer = null
head = 0
weight = 1.0
""")

