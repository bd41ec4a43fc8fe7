"""The thinc model of the SLA transformer: spacy-transformers' TransformerModel
with local attention masks computed from the parse of each span."""
import copy
from typing import Callable, List, Optional, Sequence, Tuple

import torch
from spacy.tokens import Doc, Span
from spacy_transformers.align import get_alignment, get_alignment_via_offset_mapping
from spacy_transformers.data_classes import FullTransformerBatch, HFObjects, WordpieceBatch
from spacy_transformers.layers._util import replace_listener
from spacy_transformers.layers.transformer_model import (
    huggingface_from_pretrained,
    huggingface_tokenize,
)
from spacy_transformers.truncate import truncate_oversize_splits
from thinc.api import Model, xp2torch
from thinc.layers.pytorchwrapper import forward as pytorch_forward
from thinc.types import ArgsKwargs, Ragged
from transformers.file_utils import ModelOutput

from ..data_classes import ParentAttention, SLATransformerBatch, SyntaxInputs
from ..errors import Errors
from ..masks import MaskBuilder, builder_kind
from ..syntax_inputs import build_syntax_inputs, check_on_missing_parse
from .hf_shim import SLAShim
from .syntax_aware_transformer import SyntaxAwareTransformer, attention_family

SpanGetter = Callable[[List[Doc]], List[List[Span]]]
TOK2VEC_ARCHITECTURES = {
    "spacy-sla.SLATransformerModel.v1": "spacy-sla.SLATok2VecTransformer.v1",
    "spacy-sla.SLATransformerModel.v2": "spacy-sla.SLATok2VecTransformer.v2",
}


class SLATransformerModel(Model):
    """Takes a batch of parsed Docs and returns a FullTransformerBatch, like
    spacy-transformers' TransformerModel, with syntax-aware attention: a
    local branch masked (or biased) by `mask` in the layers `sla_layers`, a
    syntax-guided layer on top masked by `syntax_guided_mask` (SG-Net), and a
    head supervised with the parents (`parent_attention`, LISA)."""

    def __init__(
        self,
        name: str,
        get_spans: SpanGetter,
        mask: Optional[MaskBuilder],
        tokenizer_config: dict = {},
        transformer_config: dict = {},
        mixed_precision: bool = False,
        grad_scaler_config: dict = {},
        sla_layers: Optional[Sequence[int]] = None,
        on_missing_parse: str = "error",
        syntax_guided_mask: Optional[MaskBuilder] = None,
        parent_attention: Optional[ParentAttention] = None,
    ):
        hf_objects = HFObjects(
            None, None, None, dict(tokenizer_config), dict(transformer_config)
        )
        layers = [] if mask is None else (None if sla_layers is None else list(sla_layers))
        local_bias = getattr(mask, "make_layer_bias", None) if builder_kind(mask) == "distance" else None
        options = {
            "sla_layers": layers,
            "local_bias": local_bias,
            "syntax_guided": syntax_guided_mask is not None,
            "parent_attention": parent_attention,
        }
        wrapper = Model(
            "sla-hf-pytorch",
            pytorch_forward,
            attrs={"convert_inputs": _convert_inputs, "convert_outputs": _convert_outputs},
            shims=[SLAShim(hf_objects, options, mixed_precision, grad_scaler_config)],
            dims={"nI": None, "nO": None},
        )
        super().__init__(
            "sla_transformer",
            forward,
            init=init,
            layers=[wrapper],
            dims={"nO": None},
            attrs={
                "name": name,
                "get_spans": get_spans,
                "mask": mask,
                "syntax_guided_mask": syntax_guided_mask,
                "parent_attention": parent_attention,
                "sla_layers": None if sla_layers is None else list(sla_layers),
                "transformer_options": options,
                "on_missing_parse": check_on_missing_parse(on_missing_parse),
                "mixed_precision": mixed_precision,
                "grad_scaler_config": dict(grad_scaler_config),
                "set_transformer": set_transformer,
                "has_transformer": False,
                "flush_cache_chance": 0.0,
                "auxiliary_loss": 0.0,
                # set by the component that stores gates (prediction only)
                "record_gates": False,
                "replace_listener": replace_listener,
                "replace_listener_cfg": replace_listener_cfg,
            },
        )

    @property
    def tokenizer(self):
        return self.layers[0].shims[0]._hfmodel.tokenizer

    @property
    def transformer(self) -> Optional[SyntaxAwareTransformer]:
        return self.layers[0].shims[0]._hfmodel.transformer

    @property
    def _init_tokenizer_config(self) -> dict:
        return self.layers[0].shims[0]._hfmodel._init_tokenizer_config

    @property
    def _init_transformer_config(self) -> dict:
        return self.layers[0].shims[0]._hfmodel._init_transformer_config

    def copy(self) -> "SLATransformerModel":
        """A deep copy with the same SLA settings and weights and a new id."""
        copied = SLATransformerModel(
            self.attrs["name"],
            self.attrs["get_spans"],
            self.attrs["mask"],
            self._init_tokenizer_config,
            self._init_transformer_config,
            self.attrs["mixed_precision"],
            self.attrs["grad_scaler_config"],
            self.attrs["sla_layers"],
            self.attrs["on_missing_parse"],
            self.attrs["syntax_guided_mask"],
            self.attrs["parent_attention"],
        )
        copied.attrs["has_transformer"] = self.attrs["has_transformer"]
        copied.attrs["flush_cache_chance"] = self.attrs["flush_cache_chance"]
        copied._dims = copy.deepcopy(self._dims)
        copied.layers[0] = self.layers[0].copy()
        return copied

    def tokenize(self, spans: List[Span]) -> Tuple[WordpieceBatch, Ragged]:
        """Wordpieces of the spans, truncated to the model's maximum length,
        and the token-to-wordpiece alignment, as spacy-transformers does."""
        tokenizer = self.tokenizer
        encoding = huggingface_tokenize(tokenizer, [span.text for span in spans])
        wordpieces = WordpieceBatch.from_batch_encoding(encoding)
        if "offset_mapping" in encoding:
            align = get_alignment_via_offset_mapping(spans, encoding["offset_mapping"])
        else:
            align = get_alignment(spans, wordpieces.strings, tokenizer.all_special_tokens)
        return truncate_oversize_splits(wordpieces, align, tokenizer.model_max_length)

    def syntax_inputs(
        self, spans: List[Span], wordpieces: WordpieceBatch, align: Ragged
    ) -> SyntaxInputs:
        return build_syntax_inputs(
            spans,
            align,
            wordpieces.lengths,
            wordpieces.input_ids.shape[1],
            local=self.attrs["mask"],
            guide=self.attrs["syntax_guided_mask"],
            parents=self.attrs["parent_attention"] is not None,
            on_missing_parse=self.attrs["on_missing_parse"],
        )

    def local_masks(self, docs: List[Doc]) -> List:
        """The local mask (or distance buckets) of every transformer span of
        the Docs, in the order the model processes them: one
        (n_pieces, n_pieces) array each, padding excluded."""
        spans = flatten_spans(self.attrs["get_spans"](docs))
        if not spans:
            return []
        wordpieces, align = self.tokenize(spans)
        return self.syntax_inputs(spans, wordpieces, align).local_matrices()


def flatten_spans(nested_spans: List[List[Span]]) -> List[Span]:
    return [span for doc_spans in nested_spans for span in doc_spans]


def load_pretrained(name: str, tokenizer_config: dict, transformer_config: dict) -> HFObjects:
    try:
        return huggingface_from_pretrained(
            name, dict(tokenizer_config), dict(transformer_config)
        )
    except OSError as error:
        raise OSError(Errors.E005.format(name=name, reason=str(error).splitlines()[0])) from error


def set_transformer(model: SLATransformerModel, hf_objects: HFObjects) -> None:
    """Install a loaded Hugging Face encoder, wrapped with SLA attention."""
    if model.attrs["has_transformer"]:
        raise ValueError("Cannot set second transformer.")
    attention_family(hf_objects.transformer.config, model.attrs["name"])
    sla_transformer = SyntaxAwareTransformer(hf_objects.transformer, **model.attrs["transformer_options"])
    shim = model.layers[0].shims[0]
    shim._model = sla_transformer
    shim._hfmodel.tokenizer = hf_objects.tokenizer
    shim._hfmodel.transformer = sla_transformer
    shim._hfmodel.vocab_file_contents = hf_objects.vocab_file_contents
    model.attrs["has_transformer"] = True


def init(model: SLATransformerModel, X: Optional[List[Doc]] = None, Y=None) -> None:
    if not model.attrs["has_transformer"]:
        name = model.attrs["name"]
        hf_objects = load_pretrained(
            name, model._init_tokenizer_config, model._init_transformer_config
        )
        model.attrs["set_transformer"](model, hf_objects)
    # The width comes from a forward pass over a tiny input with global
    # attention: initialization needs no parse (spacy-transformers
    # initializes with an unparsed dummy Doc).
    encoding = huggingface_tokenize(model.tokenizer, ["hello world"])
    wordpieces = WordpieceBatch.from_batch_encoding(encoding)
    output = model.layers[0].predict((wordpieces, None, False))
    model.set_dim("nO", output.last_hidden_state.shape[-1])


def forward(
    model: SLATransformerModel, docs: List[Doc], is_train: bool
) -> Tuple[SLATransformerBatch, Callable]:
    nested_spans = model.attrs["get_spans"](docs)
    spans = flatten_spans(nested_spans)
    wordpieces, align = model.tokenize(spans)
    syntax = model.syntax_inputs(spans, wordpieces, align)
    record_gates = model.attrs["record_gates"] and not is_train
    model_output, backprop_tensors = model.layers[0]((wordpieces, syntax, record_gates), is_train)
    auxiliary_loss = getattr(model_output, "auxiliary_loss", None)
    # Read by the component's update, which reports it with the losses.
    model.attrs["auxiliary_loss"] = 0.0 if auxiliary_loss is None else float(auxiliary_loss.detach())
    gates = getattr(model_output, "gates", None)
    output = SLATransformerBatch(
        spans=nested_spans,
        wordpieces=wordpieces,
        model_output=model_output,
        align=align,
        gates=None if gates is None else gates.cpu().numpy(),
    )

    def backprop(d_output: FullTransformerBatch) -> List[Doc]:
        backprop_tensors(d_output.model_output)
        return docs

    return output, backprop


def _convert_inputs(
    model: Model, inputs: Tuple[WordpieceBatch, Optional[SyntaxInputs], bool], is_train: bool
) -> Tuple[ArgsKwargs, Callable]:
    wordpieces, syntax, record_gates = inputs
    device = model.shims[0]._hfmodel.transformer.device
    kwargs = {
        "input_ids": xp2torch(wordpieces.input_ids, device=device),
        "attention_mask": xp2torch(wordpieces.attention_mask, device=device),
        "record_gates": record_gates,
    }
    if syntax is not None:
        kwargs.update(syntax.to_torch(device))
    if wordpieces.token_type_ids is not None:
        kwargs["token_type_ids"] = xp2torch(wordpieces.token_type_ids, device=device)
    return ArgsKwargs(args=(), kwargs=kwargs), lambda d_inputs: []


def _convert_outputs(model: Model, inputs_outputs, is_train: bool):
    _, model_output = inputs_outputs
    auxiliary_loss = getattr(model_output, "auxiliary_loss", None)

    def backprop(d_model_output: ModelOutput) -> ArgsKwargs:
        outputs = [model_output.last_hidden_state]
        gradients = list(d_model_output.values())
        if auxiliary_loss is not None and auxiliary_loss.requires_grad:
            # The parent-attention loss joins the backward pass of the
            # listeners' gradients.
            outputs.append(auxiliary_loss)
            gradients.append(torch.ones_like(auxiliary_loss))
        # torch.autograd.backward(tensors, grad_tensors=...)
        return ArgsKwargs(args=(outputs,), kwargs={"grad_tensors": gradients})

    return model_output, backprop


def replace_listener_cfg(tok2vec_model_cfg: dict, listener_model_cfg: dict) -> dict:
    """The config that replaces a TransformerListener when a component gets
    its own copy of the SLA transformer (Language.replace_listeners)."""
    result = dict(tok2vec_model_cfg)
    if "TransformerListener" in listener_model_cfg.get("@architectures", ""):
        result["@architectures"] = TOK2VEC_ARCHITECTURES[tok2vec_model_cfg["@architectures"]]
        for key in ("pooling", "grad_factor"):
            if key in listener_model_cfg and key not in result:
                result[key] = listener_model_cfg[key]
    return result
