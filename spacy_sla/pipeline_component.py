import os
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Set, Union, cast

import numpy
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example, validate_examples
from spacy.util import minibatch
from spacy.vocab import Vocab
from spacy_transformers.annotation_setters import null_annotation_setter
from spacy_transformers.data_classes import FullTransformerBatch, TransformerData
from spacy_transformers.layers import TransformerListener
from spacy_transformers.pipeline_component import DOC_EXT_ATTR, Transformer, install_extensions
from spacy_transformers.util import batch_by_length
from thinc.api import Config, Model, Optimizer, set_dropout_rate
from thinc.types import Floats3d

from .data_classes import SLATransformerBatch
from .errors import Errors
from .gates import GATES_ATTR, install_gate_extension, token_gates
from .layers.transformer_model import TOK2VEC_ARCHITECTURES, SLATransformerModel
from .syntax.builders import MissingParseError, position_of

DEFAULT_CONFIG_STR = """
[sla_transformer]
max_batch_items = 4096
store_gates = false

[sla_transformer.set_extra_annotations]
@annotation_setters = "spacy-transformers.null_annotation_setter.v1"

[sla_transformer.model]
@architectures = "spacy-sla.SLATransformerModel.v1"
name = "bert-base-uncased"
tokenizer_config = {"use_fast": true}
transformer_config = {}
mixed_precision = false
grad_scaler_config = {}
sla_layers = null
on_missing_parse = "error"

[sla_transformer.model.get_spans]
@span_getters = "spacy-transformers.strided_spans.v1"
window = 128
stride = 96

[sla_transformer.model.mask]
@misc = "spacy-sla.syntax_mask.v1"
threshold = 3
punct_rule = "authors"
neighbours = true
"""

DEFAULT_CONFIG = Config().from_str(DEFAULT_CONFIG_STR)
# spaCy's error handler (nlp.set_error_handler): the component's name, the
# component, the Docs that failed and the error
ErrorHandler = Callable[[str, Any, List[Doc], Exception], None]


@Language.factory(
    "sla_transformer",
    assigns=[f"doc._.{DOC_EXT_ATTR}"],
    requires=["token.head", "token.dep"],
    default_config=DEFAULT_CONFIG["sla_transformer"],
)
def make_sla_transformer(
    nlp: Language,
    name: str,
    model: Model[List[Doc], FullTransformerBatch],
    set_extra_annotations: Callable[[List[Doc], FullTransformerBatch], None],
    max_batch_items: int,
    store_gates: bool,
) -> "SLATransformer":
    """A transformer component with syntax-aware local attention.

    It works like spacy-transformers' `transformer` component: it sets
    `doc._.trf_data`, and downstream components connect to it through
    `spacy-transformers.TransformerListener.v1`. Its model takes the local
    attention masks from the dependency parse already in the Doc, so a parser
    must run before it.

    model (Model[List[Doc], FullTransformerBatch]): usually
        spacy-sla.SLATransformerModel.v1.
    set_extra_annotations (Callable): called after doc._.trf_data is set.
    max_batch_items (int): the largest padded batch, in wordpieces.
    store_gates (bool): store the gate values of the SLA layers at prediction
        time in doc._.sla_gates, (n_sla_layers, n_tokens), each token's value
        the mean over its wordpieces. Off by default.
    Both are runtime settings: the values of the config a pipeline is loaded
    with are in effect, not the saved ones.
    """
    return SLATransformer(
        nlp.vocab,
        model,
        set_extra_annotations,
        max_batch_items=max_batch_items,
        name=name,
        store_gates=store_gates,
    )


def check_own_file(directory: Path, name: str) -> None:
    """[SLA-E127] unless the component's saved file `name` is a regular file
    inside `directory`, checked before it is opened: a link leading out of
    it would make loading read (and saving the pipeline again copy) another
    file, a device such as /dev/zero would be read until memory runs out,
    a fifo would block. A missing file is left to the reader's own error."""
    path = directory / name
    if not os.path.lexists(path):
        return
    real = path.resolve()
    if not real.is_relative_to(directory.resolve()):
        problem = f"a link to {real}, outside the directory"
    elif not real.is_file():
        problem = "not a regular file (a device, a fifo, a socket or a folder)" if real.exists() else "a broken link"
    else:
        return
    raise ValueError(Errors.E127.format(name=name, path=path, problem=problem))


class SLATransformer(Transformer):
    """spacy-transformers' Transformer component, with a model that uses the
    Doc's dependency parse. Everything a TransformerListener relies on
    (listeners, doc._.trf_data, serialization) is inherited; update also
    reports the parent-attention loss of LISA models."""

    def __init__(
        self,
        vocab: Vocab,
        model: Model[List[Doc], FullTransformerBatch],
        set_extra_annotations: Callable[[List[Doc], FullTransformerBatch], None] = null_annotation_setter,
        *,
        name: str = "sla_transformer",
        max_batch_items: int = 128 * 32,
        store_gates: bool = False,
    ):
        if not isinstance(model, SLATransformerModel):
            # spacy-transformers' own models would run with plain attention
            # here, without a word: the component's masks and gates need ours.
            raise ValueError(Errors.E086.format(
                name=name, model=f"'{model.name}' ({type(model).__name__})",
                architectures=" or ".join(TOK2VEC_ARCHITECTURES)))
        super().__init__(vocab, model, set_extra_annotations, name=name, max_batch_items=max_batch_items)
        self.max_batch_items = max_batch_items
        self.store_gates = store_gates
        install_gate_extension()

    # The runtime settings are attributes of the component; self.cfg (which
    # spacy-transformers reads, saves and loads) mirrors them and is set
    # again after loading, so that the saved values never override the
    # config a pipeline is loaded with.

    @property
    def store_gates(self) -> bool:
        """Whether prediction stores doc._.sla_gates."""
        return self._store_gates

    @store_gates.setter
    def store_gates(self, value: bool) -> None:
        self._store_gates = bool(value)
        self.cfg["store_gates"] = self._store_gates

    @property
    def max_batch_items(self) -> int:
        """The largest padded batch, in wordpieces."""
        return self._max_batch_items

    @max_batch_items.setter
    def max_batch_items(self, value: int) -> None:
        self._max_batch_items = int(value)
        self.cfg["max_batch_items"] = self._max_batch_items

    def _restore_runtime_settings(self) -> None:
        self.cfg["store_gates"] = self._store_gates
        self.cfg["max_batch_items"] = self._max_batch_items

    def from_disk(self, path: Union[str, Path], *, exclude: Iterable[str] = tuple()) -> "SLATransformer":
        if "model" not in exclude and (Path(path) / "model").is_dir():
            # spacy-transformers reads a `model` folder as its 1.0 layout and
            # loads it with Hugging Face's own loader, past the checks of
            # SLAShim.from_bytes; spacy-sla never saved that layout.
            raise ValueError(Errors.E049.format(path=Path(path) / "model"))
        for name in ("model", "cfg"):
            if name not in exclude:
                check_own_file(Path(path), name)
        super().from_disk(path, exclude=exclude)
        self._restore_runtime_settings()
        return self

    def from_bytes(self, bytes_data: bytes, *, exclude: Iterable[str] = tuple()) -> "SLATransformer":
        super().from_bytes(bytes_data, exclude=exclude)
        self._restore_runtime_settings()
        return self

    def set_annotations(self, docs: Iterable[Doc], predictions: FullTransformerBatch) -> None:
        """doc._.trf_data as spacy-transformers sets it, and with
        store_gates, doc._.sla_gates."""
        docs = list(docs)
        super().set_annotations(docs, predictions)
        if self.store_gates and isinstance(predictions, SLATransformerBatch) and predictions.gates is not None:
            for doc, gates in zip(docs, token_gates(predictions, predictions.gates, docs)):
                doc._.set(GATES_ATTR, gates)

    def predict(self, docs: Iterable[Doc]) -> FullTransformerBatch:
        docs = list(docs)
        try:
            return super().predict(docs)
        except MissingParseError as error:
            # The hint names this component, whatever the config calls it.
            raise error.in_component(self.name, docs) from None

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 128) -> Iterator[Doc]:
        """spacy-transformers' pipe, with spaCy's error handler
        (`nlp.set_error_handler`): a batch that fails is handed to it, and a
        Doc without a parse ([SLA-E001], which names its place in the stream) is
        handed to it alone, the other Docs of its batch being processed. As
        in spaCy's own components, the Docs handed to the handler are not
        yielded; the default handler raises."""
        install_extensions()
        error_handler = self.get_error_handler()
        first_index = 0
        for outer_batch in minibatch(stream, batch_size):
            outer_batch = list(outer_batch)
            failed: Set[int] = set()
            for indices in batch_by_length(outer_batch, self.max_batch_items):
                failed.update(self._annotate_handling_errors(outer_batch, list(indices), first_index, error_handler))
            yield from (doc for i, doc in enumerate(outer_batch) if i not in failed)
            first_index += len(outer_batch)

    def _annotate_handling_errors(
        self, outer_batch: List[Doc], indices: List[int], first_index: int, error_handler: ErrorHandler
    ) -> List[int]:
        """Predict and annotate outer_batch[indices]; the indices of the Docs
        handed to the error handler."""
        failed: List[int] = []
        while indices:
            batch = [outer_batch[i] for i in indices]
            try:
                self.set_annotations(batch, self.predict(batch))
                return failed
            except MissingParseError as error:
                error = error.in_component(self.name, outer_batch, first_index, where="stream given to pipe")
                unparsed = position_of(error.doc, batch)
                if unparsed is None:
                    error_handler(self.name, self, batch, error)
                    return failed + indices
                error_handler(self.name, self, [batch[unparsed]], error)
                failed.append(indices.pop(unparsed))
            except Exception as error:
                error_handler(self.name, self, batch, error)
                return failed + indices
        return failed

    @property
    def parent_attention_loss_name(self) -> str:
        return f"{self.name}_parent"

    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optional[Optimizer] = None,
        losses: Optional[Dict[str, float]] = None,
    ) -> Dict[str, float]:
        """spacy-transformers' update: run the model and hand its output and
        backpropagation callback to the listeners. With a supervised parent
        head (LISA) the batch's parent-attention loss is also reported, as
        losses["<name>_parent"]; it is backpropagated with the listeners'
        gradients."""
        validate_examples(examples, "SLATransformer.update")
        if losses is None:
            losses = {}
        docs = [eg.predicted for eg in examples]
        if not any(len(doc) for doc in docs):
            return losses
        set_dropout_rate(self.model, drop)
        try:
            trf_full, bp_trf_full = self.model.begin_update(docs)
        except MissingParseError as error:
            raise error.in_component(self.name, docs) from None
        losses.setdefault(self.name, 0.0)
        if self._supervises_parents():
            name = self.parent_attention_loss_name
            losses[name] = losses.get(name, 0.0) + (getattr(trf_full, "parent_attention_loss", None) or 0.0)
        d_tensors: List[List[Floats3d]] = []
        xp = self.model.ops.xp

        def accumulate_gradient(d_trf_datas: List[TransformerData]) -> None:
            """Sum the gradients of all but the last listener."""
            for i, d_trf_data in enumerate(d_trf_datas):
                gradients = _gradient_arrays(d_trf_data)
                for d_tensor in gradients:
                    losses[self.name] += float(xp.square(d_tensor).sum())
                if i >= len(d_tensors):
                    d_tensors.append(gradients)
                else:
                    for j, d_tensor in enumerate(gradients):
                        d_tensors[i][j] += d_tensor

        def backprop(d_trf_datas: List[TransformerData]) -> List[Doc]:
            """Called by the last listener: backpropagate the summed gradients."""
            nonlocal d_tensors
            accumulate_gradient(d_trf_datas)
            d_trf_full = trf_full.unsplit_by_doc(d_tensors)
            d_docs = bp_trf_full(d_trf_full)
            if sgd is not None:
                self.model.finish_update(sgd)
            d_tensors = []
            return d_docs

        batch_id = TransformerListener.get_batch_id(docs)
        for listener in self.listeners[:-1]:
            listener.receive(batch_id, trf_full.doc_data, accumulate_gradient)
        if self.listeners:
            self.listeners[-1].receive(batch_id, trf_full.doc_data, backprop)
        return losses

    def _supervises_parents(self) -> bool:
        settings = getattr(self.model, "settings", None)
        return settings is not None and settings.parent_attention is not None

    def local_masks(self, docs: Iterable[Doc]) -> List[numpy.ndarray]:
        """The wordpiece-level local attention mask of every transformer span
        of the Docs, in the order the model processes them: one
        (n_pieces, n_pieces) bool array per span, padding excluded, True where
        the row piece may attend to the column piece. For inspection and
        plots; the Docs must be parsed."""
        if not isinstance(self.model, SLATransformerModel):
            raise TypeError(f"local_masks needs an SLATransformerModel; {self.name}'s model is {self.model.name!r}")
        return self.model.local_masks(list(docs))


def _gradient_arrays(d_trf_data: TransformerData) -> List[Floats3d]:
    """The gradient of each output tensor of the model: one (n_spans,
    n_pieces, width) array each, as FullTransformerBatch.unsplit_by_doc
    takes them (TransformerData types its tensors more loosely: any array,
    or a list of arrays, which the SLA model never outputs)."""
    arrays = [tensor for tensor in d_trf_data.tensors if not isinstance(tensor, list)]
    if len(arrays) != len(d_trf_data.tensors):
        raise TypeError("The SLA transformer's output gradients must be arrays, not lists of arrays.")
    return cast(List[Floats3d], arrays)
