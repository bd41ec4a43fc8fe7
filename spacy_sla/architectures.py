from typing import List, Optional

from spacy.tokens import Doc
from spacy.util import registry
from spacy_transformers.data_classes import FullTransformerBatch
from spacy_transformers.layers import split_trf_batch, trfs2arrays
from thinc.api import Model, chain
from thinc.types import Floats2d, Ragged

from .data_classes import ParentAttention
from .layers.transformer_model import SLATransformerModel, SpanGetter
from .masks import MaskBuilder


@registry.architectures("spacy-sla.SLATransformerModel.v2")
def create_sla_transformer_model_v2(
    name: str,
    get_spans: SpanGetter,
    mask: Optional[MaskBuilder] = None,
    tokenizer_config: dict = {},
    transformer_config: dict = {},
    mixed_precision: bool = False,
    grad_scaler_config: dict = {},
    sla_layers: Optional[List[int]] = None,
    on_missing_parse: str = "error",
    syntax_guided_mask: Optional[MaskBuilder] = None,
    parent_attention: Optional[ParentAttention] = None,
) -> Model[List[Doc], FullTransformerBatch]:
    """A Hugging Face transformer with syntax-aware attention, for the
    `sla_transformer` (or `transformer`) component.

    The arguments of spacy-transformers.TransformerModel.v3, plus:
    mask (Optional[Callable]): the local branch's builder: a mask builder
        (spacy-sla.syntax_mask.v1/v2, window_mask.v1, ancestor_mask.v1) or a
        distance builder (spacy-sla.tree_distance_bias.v1, soft_threshold.v1,
        dependency_scale.v1); null for no local branch.
    sla_layers (Optional[List[int]]): the layers with a local branch; null
        for all of them.
    on_missing_parse (str): "error" (default) to refuse Docs without a
        dependency parse, "global" to give them global attention only.
    syntax_guided_mask (Optional[Callable]): a mask builder (usually
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
        syntax_guided_mask=syntax_guided_mask,
        parent_attention=parent_attention,
    )


@registry.architectures("spacy-sla.SLATransformerModel.v1")
def create_sla_transformer_model_v1(
    name: str,
    get_spans: SpanGetter,
    mask: MaskBuilder,
    tokenizer_config: dict = {},
    transformer_config: dict = {},
    mixed_precision: bool = False,
    grad_scaler_config: dict = {},
    sla_layers: Optional[List[int]] = None,
    on_missing_parse: str = "error",
) -> Model[List[Doc], FullTransformerBatch]:
    """SLA as in Li et al. 2021: a gated local branch masked by `mask` in the
    layers `sla_layers` (null: all). v2 adds SG-Net and LISA options."""
    return create_sla_transformer_model_v2(
        name=name,
        get_spans=get_spans,
        mask=mask,
        tokenizer_config=tokenizer_config,
        transformer_config=transformer_config,
        mixed_precision=mixed_precision,
        grad_scaler_config=grad_scaler_config,
        sla_layers=sla_layers,
        on_missing_parse=on_missing_parse,
    )


@registry.misc("spacy-sla.parent_attention.v1")
def create_parent_attention(layer: Optional[int] = None, head: int = 0, weight: float = 1.0) -> ParentAttention:
    """LISA: train head `head` of layer `layer` (null: the middle layer) to
    attend from each token to its syntactic head, with the cross-entropy
    weighted by `weight`."""
    return ParentAttention(layer=layer, head=head, weight=weight)


def _tok2vec(transformer: Model, pooling: Model[Ragged, Floats2d], grad_factor: float) -> Model:
    # A chain of a chain, to match the structure a TransformerListener has
    # after Language.replace_listeners (as in spacy-transformers).
    return chain(chain(transformer, split_trf_batch()), trfs2arrays(pooling, grad_factor))


@registry.architectures("spacy-sla.SLATok2VecTransformer.v2")
def create_sla_tok2vec_transformer_v2(
    name: str,
    get_spans: SpanGetter,
    pooling: Model[Ragged, Floats2d],
    mask: Optional[MaskBuilder] = None,
    grad_factor: float = 1.0,
    tokenizer_config: dict = {},
    transformer_config: dict = {},
    mixed_precision: bool = False,
    grad_scaler_config: dict = {},
    sla_layers: Optional[List[int]] = None,
    on_missing_parse: str = "error",
    syntax_guided_mask: Optional[MaskBuilder] = None,
    parent_attention: Optional[ParentAttention] = None,
) -> Model[List[Doc], List[Floats2d]]:
    """SLATransformerModel.v2 as a component's own token-to-vector layer:
    what a TransformerListener becomes after `nlp.replace_listeners`."""
    transformer = create_sla_transformer_model_v2(
        name=name,
        get_spans=get_spans,
        mask=mask,
        tokenizer_config=tokenizer_config,
        transformer_config=transformer_config,
        mixed_precision=mixed_precision,
        grad_scaler_config=grad_scaler_config,
        sla_layers=sla_layers,
        on_missing_parse=on_missing_parse,
        syntax_guided_mask=syntax_guided_mask,
        parent_attention=parent_attention,
    )
    return _tok2vec(transformer, pooling, grad_factor)


@registry.architectures("spacy-sla.SLATok2VecTransformer.v1")
def create_sla_tok2vec_transformer_v1(
    name: str,
    get_spans: SpanGetter,
    mask: MaskBuilder,
    pooling: Model[Ragged, Floats2d],
    grad_factor: float = 1.0,
    tokenizer_config: dict = {},
    transformer_config: dict = {},
    mixed_precision: bool = False,
    grad_scaler_config: dict = {},
    sla_layers: Optional[List[int]] = None,
    on_missing_parse: str = "error",
) -> Model[List[Doc], List[Floats2d]]:
    """The SLA transformer (v1) as a component's own token-to-vector layer,
    like spacy-transformers.Tok2VecTransformer.v3 for the plain transformer."""
    transformer = create_sla_transformer_model_v1(
        name=name,
        get_spans=get_spans,
        mask=mask,
        tokenizer_config=tokenizer_config,
        transformer_config=transformer_config,
        mixed_precision=mixed_precision,
        grad_scaler_config=grad_scaler_config,
        sla_layers=sla_layers,
        on_missing_parse=on_missing_parse,
    )
    return _tok2vec(transformer, pooling, grad_factor)
