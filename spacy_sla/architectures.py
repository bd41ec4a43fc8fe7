from typing import List, Optional

from spacy.tokens import Doc
from spacy.util import registry
from spacy_transformers.data_classes import FullTransformerBatch
from spacy_transformers.layers import split_trf_batch, trfs2arrays
from thinc.api import Model, chain
from thinc.types import Floats2d, Ragged

from .layers.transformer_model import SLATransformerModel, SpanGetter
from .masks import MaskBuilder


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
    """A Hugging Face transformer with syntax-aware local attention (SLA,
    Li et al. 2021), for the `sla_transformer` (or `transformer`) component.

    The arguments of spacy-transformers.TransformerModel.v3, plus:
    mask (Callable[[Doc | Span], numpy bool array]): the local mask builder,
        e.g. spacy-sla.syntax_mask.v1 or spacy-sla.window_mask.v1.
    sla_layers (Optional[List[int]]): the layers that get SLA attention;
        null for all of them.
    on_missing_parse (str): "error" (default) to refuse Docs without a
        dependency parse, "global" to give them global attention only.
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
    )


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
    """The SLA transformer as a component's own token-to-vector layer: what a
    TransformerListener becomes after `nlp.replace_listeners`, like
    spacy-transformers.Tok2VecTransformer.v3 for the plain transformer."""
    transformer = create_sla_transformer_model_v1(
        name,
        get_spans,
        mask,
        tokenizer_config,
        transformer_config,
        mixed_precision,
        grad_scaler_config,
        sla_layers,
        on_missing_parse,
    )
    # A chain of a chain, to match the structure a TransformerListener has
    # after Language.replace_listeners (as in spacy-transformers).
    return chain(chain(transformer, split_trf_batch()), trfs2arrays(pooling, grad_factor))
