"""The thinc model of the SLA transformer: spacy-transformers' TransformerModel
with local attention masks computed from the parse of each span."""
import copy
import os
from dataclasses import dataclass, fields
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import numpy
import torch
from spacy.tokens import Doc, Span
from spacy_transformers.align import get_alignment, get_alignment_via_offset_mapping
from spacy_transformers.data_classes import FullTransformerBatch, HFObjects, WordpieceBatch
from spacy_transformers.layers._util import replace_listener
from spacy_transformers.layers._util import replace_listener_cfg as spacy_transformers_replace_listener_cfg
from spacy_transformers.layers.transformer_model import huggingface_tokenize, set_pytorch_transformer
from spacy_transformers.truncate import truncate_oversize_splits
from thinc.api import Model, xp2torch
from thinc.layers.pytorchwrapper import forward as pytorch_forward
from thinc.types import ArgsKwargs, Ragged
from transformers.file_utils import ModelOutput

from ..data_classes import ParentAttention, SLATransformerBatch
from ..errors import Errors
from ..syntax.builders import DistanceBuilder, MaskBuilder
from ..syntax.syntax_inputs import SyntaxInputs, build_syntax_inputs, check_on_missing_parse
from .family_adapters import attention_family
from .hf_shim import SLAShim, damage_as_coded_error, load_pretrained
from .syntax_aware_transformer import SyntaxAwareTransformer

SpanGetter = Callable[[List[Doc]], List[List[Span]]]
# What the wrapped encoder takes: the wordpieces, the batch's syntax inputs, whether to record the gates
WrapperInput = Tuple[WordpieceBatch, Optional[SyntaxInputs], bool]
# The architecture a TransformerListener becomes (Language.replace_listeners), by its transformer's architecture.
TOK2VEC_ARCHITECTURES = {"spacy-sla.SLATransformerModel.v1": "spacy-sla.SLATok2VecTransformer.v1"}


@dataclass(frozen=True)
class SLAModelSettings:
    """The arguments an SLATransformerModel was built with, i.e. its config.

    They are a plain Python attribute of the model, not thinc attrs: thinc
    serializes every attr it can (strings, numbers, lists, None) and sets the
    saved values back on loading, so a setting kept there would silently
    override the config a pipeline is loaded with, e.g.
    `spacy.load(path, config={...: {"on_missing_parse": "global"}})`.
    """

    name: str
    get_spans: SpanGetter
    mask: Optional[MaskBuilder]
    tokenizer_config: Dict[str, Any]
    transformer_config: Dict[str, Any]
    mixed_precision: bool
    grad_scaler_config: Dict[str, Any]
    sla_layers: Optional[List[int]]
    on_missing_parse: str
    ancestor_mask: Optional[MaskBuilder]
    parent_attention: Optional[ParentAttention]

    def transformer_options(self) -> Dict[str, Any]:
        """The keyword arguments of SyntaxAwareTransformer."""
        return {
            "sla_layers": [] if self.mask is None else self.sla_layers,
            # a distance builder makes each SLA layer's module for its buckets
            "local_bias": self.mask.make_layer_bias if isinstance(self.mask, DistanceBuilder) else None,
            "ancestor_mask_layer": self.ancestor_mask is not None,
            "parent_attention": self.parent_attention,
        }


class SLATransformerModel(Model[List[Doc], FullTransformerBatch]):
    """Takes a batch of parsed Docs and returns a FullTransformerBatch, like
    spacy-transformers' TransformerModel, with syntax-aware attention: a
    local branch masked (or biased) by `mask` in the layers `sla_layers`, a
    syntax-guided layer on top masked by `ancestor_mask` (SG-Net), and a
    head supervised with the parents (`parent_attention`, LISA).

    The settings are in `.settings` (SLAModelSettings), so that the config a
    pipeline is loaded with is in effect. The thinc attrs hold only the
    weights' state `has_transformer`, `get_spans` (as in spacy-transformers;
    a function, which thinc never serializes) and the hooks that spaCy and
    spacy-transformers call. What a batch produces besides the transformer
    output (gates, the parent-attention loss) is in the batch output.
    """

    def __init__(
        self,
        name: str,
        get_spans: SpanGetter,
        mask: Optional[MaskBuilder],
        tokenizer_config: Dict[str, Any] = {},
        transformer_config: Dict[str, Any] = {},
        mixed_precision: bool = False,
        grad_scaler_config: Dict[str, Any] = {},
        sla_layers: Optional[Sequence[int]] = None,
        on_missing_parse: str = "error",
        ancestor_mask: Optional[MaskBuilder] = None,
        parent_attention: Optional[ParentAttention] = None,
    ):
        settings = SLAModelSettings(
            name=name,
            get_spans=get_spans,
            mask=mask,
            tokenizer_config=dict(tokenizer_config),
            transformer_config=dict(transformer_config),
            mixed_precision=mixed_precision,
            grad_scaler_config=dict(grad_scaler_config),
            sla_layers=None if sla_layers is None else list(sla_layers),
            on_missing_parse=check_on_missing_parse(on_missing_parse),
            ancestor_mask=ancestor_mask,
            parent_attention=parent_attention,
        )
        hf_objects = HFObjects(None, None, None, dict(tokenizer_config), dict(transformer_config))
        shim = SLAShim(hf_objects, settings.transformer_options(), mixed_precision, grad_scaler_config)
        # As spacy-transformers 1.4's HFWrapper builds its model, with the
        # SLAShim (thread-safe predict) where HFWrapper would make an HFShim.
        wrapper: Model[WrapperInput, ModelOutput] = Model(
            "sla-hf-pytorch",
            pytorch_forward,
            attrs={"convert_inputs": _convert_inputs, "convert_outputs": _convert_outputs},
            shims=[shim],
            dims={"nI": None, "nO": None},
        )
        super().__init__(
            "sla_transformer",
            forward,
            init=init,
            layers=[wrapper],
            dims={"nO": None},
            attrs={
                "get_spans": get_spans,
                "set_transformer": set_transformer,
                "has_transformer": False,
                "replace_listener": replace_listener,
                "replace_listener_cfg": replace_listener_cfg,
            },
        )
        self.settings = settings

    @property
    def hf_objects(self) -> HFObjects:
        """The tokenizer, the encoder and their init configs, in the shim."""
        return shim_of(self.layers[0])._hfmodel

    @property
    def tokenizer(self) -> Any:
        """The Hugging Face tokenizer (its class depends on the model)."""
        return self.hf_objects.tokenizer

    @property
    def transformer(self) -> Optional[SyntaxAwareTransformer]:
        transformer: Optional[SyntaxAwareTransformer] = self.hf_objects.transformer
        return transformer

    @property
    def _init_tokenizer_config(self) -> Dict[str, Any]:
        return self.hf_objects._init_tokenizer_config

    @property
    def _init_transformer_config(self) -> Dict[str, Any]:
        return self.hf_objects._init_transformer_config

    def from_bytes(self, bytes_data: bytes) -> "SLATransformerModel":
        """thinc's from_bytes, with any damage of the saved bytes as one
        coded error ([SLA-E124]) instead of whatever parsing them raised."""
        with damage_as_coded_error():
            super().from_bytes(bytes_data)
        return self

    def copy(self) -> "SLATransformerModel":
        """A deep copy with the same SLA settings and weights and a new id."""
        copied = SLATransformerModel(**{field.name: getattr(self.settings, field.name) for field in fields(self.settings)})
        copied.attrs["has_transformer"] = self.attrs["has_transformer"]
        copied._dims = copy.deepcopy(self._dims)
        copied.layers[0] = self.layers[0].copy()
        return copied

    def tokenize(self, spans: List[Span]) -> Tuple[WordpieceBatch, Ragged]:
        """Wordpieces of the spans, truncated to the model's maximum length,
        and the token-to-wordpiece alignment, as spacy-transformers does."""
        return tokenize_spans(self.tokenizer, spans)

    def syntax_inputs(
        self, spans: List[Span], wordpieces: WordpieceBatch, align: Ragged
    ) -> SyntaxInputs:
        return build_syntax_inputs(
            spans,
            align,
            wordpieces.lengths,
            wordpieces.input_ids.shape[1],
            local=self.settings.mask,
            guide=self.settings.ancestor_mask,
            parents=self.settings.parent_attention is not None,
            on_missing_parse=self.settings.on_missing_parse,
            piece_strings=wordpieces.strings,
            warned=self.given_warnings,
        )

    @property
    def given_warnings(self) -> Set[str]:
        """The codes of the warnings this model gives once (e.g. SLA-W003 for
        parses that are not forests); runtime state, never serialized."""
        if not hasattr(self, "_given_warnings"):
            self._given_warnings: Set[str] = set()
        return self._given_warnings

    def local_masks(self, docs: List[Doc]) -> List[numpy.ndarray]:
        """The local mask (or distance buckets) of every transformer span of
        the Docs, in the order the model processes them: one
        (n_pieces, n_pieces) array each, padding excluded."""
        spans = flatten_spans(self.settings.get_spans(docs))
        if not spans:
            return []
        wordpieces, align = self.tokenize(spans)
        return self.syntax_inputs(spans, wordpieces, align).local_matrices()


def tokenize_spans(tokenizer: Any, spans: List[Span]) -> Tuple[WordpieceBatch, Ragged]:
    """What SLATransformerModel.tokenize does, for a Hugging Face tokenizer
    alone: the mask statistics need the model's wordpieces, not its weights."""
    encoding = huggingface_tokenize(tokenizer, [span.text for span in spans])
    wordpieces = WordpieceBatch.from_batch_encoding(encoding)
    if "offset_mapping" in encoding:
        align = get_alignment_via_offset_mapping(spans, encoding["offset_mapping"])
    else:
        align = get_alignment(spans, wordpieces.strings, tokenizer.all_special_tokens)
    return truncate_oversize_splits(wordpieces, align, tokenizer.model_max_length)


def flatten_spans(nested_spans: List[List[Span]]) -> List[Span]:
    return [span for doc_spans in nested_spans for span in doc_spans]


def set_transformer(model: SLATransformerModel, hf_objects: HFObjects) -> None:
    """Install a loaded Hugging Face encoder, wrapped with SLA attention."""
    if model.attrs["has_transformer"]:
        raise ValueError("Cannot set second transformer.")
    attention_family(hf_objects.transformer.config, model.settings.name)
    sla_transformer = SyntaxAwareTransformer(hf_objects.transformer, **model.settings.transformer_options())
    set_pytorch_transformer(model, HFObjects(hf_objects.tokenizer, sla_transformer, hf_objects.vocab_file_contents))


def shim_of(wrapper: Model[WrapperInput, ModelOutput]) -> SLAShim:
    """The SLAShim of the model's PyTorch wrapper."""
    shim = wrapper.shims[0]
    if not isinstance(shim, SLAShim):
        raise TypeError(f"The SLA transformer's wrapper holds a {type(shim).__name__}, not an SLAShim")
    return shim


# The process whose torch threads _one_torch_thread_in_forked_children has
# checked: the one that imported this module, or a child that has checked.
_checked_pid = os.getpid()


def _one_torch_thread_in_forked_children() -> None:
    """Run torch single-threaded in a process forked from the one that
    imported spacy-sla (the workers of nlp.pipe(n_process=N) and
    `spacy apply --n-process N` on Linux). A child forked after its parent
    ran torch inherits the parent's OpenMP thread pool without its threads,
    and its first parallel region hangs. One thread per worker, as in
    PyTorch's own DataLoader workers, is also what N worker processes
    should use. Called before the model does any torch work; a check of
    the process id per batch, otherwise."""
    global _checked_pid
    pid = os.getpid()
    if pid != _checked_pid:
        _checked_pid = pid
        torch.set_num_threads(1)


def init(model: SLATransformerModel, X: Optional[List[Doc]] = None, Y: Optional[FullTransformerBatch] = None) -> None:
    _one_torch_thread_in_forked_children()
    if not model.attrs["has_transformer"]:
        name = model.settings.name
        shim = model.layers[0].shims[0]
        from_saved = isinstance(shim, SLAShim) and shim.from_saved
        hf_objects = load_pretrained(name, model.settings.tokenizer_config, model.settings.transformer_config,
                                     from_saved=from_saved)
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
) -> Tuple[SLATransformerBatch, Callable[[FullTransformerBatch], List[Doc]]]:
    _one_torch_thread_in_forked_children()
    if is_train:
        check_mixed_precision_device(model)
    nested_spans = model.settings.get_spans(docs)
    spans = flatten_spans(nested_spans)
    wordpieces, align = model.tokenize(spans)
    syntax = model.syntax_inputs(spans, wordpieces, align)
    # Prediction always returns the gates (n_sla_layers x n_pieces values per
    # span, cheap); the component decides whether to store them.
    record_gates = not is_train
    model_output, backprop_tensors = model.layers[0]((wordpieces, syntax, record_gates), is_train)
    # The parent-attention loss travels with this batch: its value here (the
    # component's update reports it), its tensor in the backward pass.
    parent_attention_loss = getattr(model_output, "parent_attention_loss", None)
    gates = getattr(model_output, "gates", None)
    output = SLATransformerBatch(
        spans=nested_spans,
        wordpieces=wordpieces,
        model_output=model_output,
        align=align,
        gates=None if gates is None else gates.cpu().numpy(),
        parent_attention_loss=None if parent_attention_loss is None else float(parent_attention_loss.detach()),
    )

    def backprop(d_output: FullTransformerBatch) -> List[Doc]:
        backprop_tensors(d_output.model_output)
        return docs

    return output, backprop


def check_mixed_precision_device(model: SLATransformerModel) -> None:
    """SLA-E115 before a training step that would fail in thinc's gradient
    scaler, which scales CUDA tensors only: mixed precision with its scaler
    enabled (grad_scaler_config's "enabled", by default mixed_precision, as
    spacy-transformers' HFShim sets it) on another device. Prediction is
    left alone: a pipeline trained with mixed precision on a GPU predicts in
    float32 on the CPU."""
    settings = model.settings
    if not settings.grad_scaler_config.get("enabled", settings.mixed_precision):
        return
    device = shim_of(model.layers[0]).device
    if device.type != "cuda":
        raise ValueError(Errors.E115.format(device=device.type.upper() if device.type == "cpu" else str(device)))


def _convert_inputs(
    model: Model[WrapperInput, ModelOutput], inputs: WrapperInput, is_train: bool
) -> Tuple[ArgsKwargs, Callable[[ArgsKwargs], List[Any]]]:
    wordpieces, syntax, record_gates = inputs
    device = shim_of(model)._hfmodel.transformer.device
    kwargs: Dict[str, Any] = {
        "input_ids": xp2torch(wordpieces.input_ids, device=device),
        "attention_mask": xp2torch(wordpieces.attention_mask, device=device),
        "record_gates": record_gates,
    }
    if syntax is not None:
        kwargs.update(syntax.to_torch(device))
    if wordpieces.token_type_ids is not None:
        kwargs["token_type_ids"] = xp2torch(wordpieces.token_type_ids, device=device)
    return ArgsKwargs(args=(), kwargs=kwargs), lambda d_inputs: []


def _convert_outputs(
    model: Model[WrapperInput, ModelOutput], inputs_outputs: Tuple[WrapperInput, ModelOutput], is_train: bool
) -> Tuple[ModelOutput, Callable[[ModelOutput], ArgsKwargs]]:
    _, model_output = inputs_outputs
    parent_attention_loss = getattr(model_output, "parent_attention_loss", None)

    def backprop(d_model_output: ModelOutput) -> ArgsKwargs:
        outputs = [model_output["last_hidden_state"]]
        gradients = list(d_model_output.values())
        if parent_attention_loss is not None and parent_attention_loss.requires_grad:
            # The parent-attention loss joins the backward pass of the
            # listeners' gradients.
            outputs.append(parent_attention_loss)
            gradients.append(torch.ones_like(parent_attention_loss))
        # torch.autograd.backward(tensors, grad_tensors=...)
        return ArgsKwargs(args=(outputs,), kwargs={"grad_tensors": gradients})

    return model_output, backprop


def replace_listener_cfg(tok2vec_model_cfg: Dict[str, Any], listener_model_cfg: Dict[str, Any]) -> Dict[str, Any]:
    """The config that replaces a TransformerListener when a component gets
    its own copy of the SLA transformer (Language.replace_listeners):
    spacy-transformers' own, which copies pooling and grad_factor but names
    its plain Tok2VecTransformer, with the SLA architecture instead."""
    result: Dict[str, Any] = spacy_transformers_replace_listener_cfg(tok2vec_model_cfg, listener_model_cfg)
    if "TransformerListener" in listener_model_cfg.get("@architectures", ""):
        result["@architectures"] = TOK2VEC_ARCHITECTURES[tok2vec_model_cfg["@architectures"]]
    return result
