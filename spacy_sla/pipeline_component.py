from typing import Callable, Dict, Iterable, List, Optional

import numpy
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example
from spacy_transformers.data_classes import FullTransformerBatch
from spacy.vocab import Vocab
from spacy_transformers.annotation_setters import null_annotation_setter
from spacy_transformers.pipeline_component import DOC_EXT_ATTR, Transformer
from thinc.api import Config, Model, Optimizer

from .gates import GATES_ATTR, install_gate_extension, token_gates

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
punct_visible = true
"""

DEFAULT_CONFIG = Config().from_str(DEFAULT_CONFIG_STR)


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
        the mean over its wordpieces. Off by default; no cost when off.
    """
    return SLATransformer(
        nlp.vocab,
        model,
        set_extra_annotations,
        max_batch_items=max_batch_items,
        name=name,
        store_gates=store_gates,
    )


class SLATransformer(Transformer):
    """spacy-transformers' Transformer component, with a model that uses the
    Doc's dependency parse. Everything a TransformerListener relies on
    (update, listeners, doc._.trf_data, serialization) is inherited."""

    def __init__(
        self,
        vocab: Vocab,
        model: Model[List[Doc], FullTransformerBatch],
        set_extra_annotations: Callable = null_annotation_setter,
        *,
        name: str = "sla_transformer",
        max_batch_items: int = 128 * 32,
        store_gates: bool = False,
    ):
        super().__init__(vocab, model, set_extra_annotations, name=name, max_batch_items=max_batch_items)
        self.store_gates = store_gates
        install_gate_extension()

    @property
    def store_gates(self) -> bool:
        """Whether prediction stores doc._.sla_gates (a runtime setting)."""
        return self._store_gates

    @store_gates.setter
    def store_gates(self, value: bool) -> None:
        self._store_gates = bool(value)
        self._apply_store_gates()

    def _apply_store_gates(self) -> None:
        # The factory's (or the setter's) value wins over the saved one, so
        # that spacy.load(..., config={...: {"store_gates": True}}) works.
        self.cfg["store_gates"] = self._store_gates
        self.model.attrs["record_gates"] = self._store_gates

    def from_disk(self, path, *, exclude=tuple()) -> "SLATransformer":
        super().from_disk(path, exclude=exclude)
        self._apply_store_gates()
        return self

    def from_bytes(self, bytes_data, *, exclude=tuple()) -> "SLATransformer":
        super().from_bytes(bytes_data, exclude=exclude)
        self._apply_store_gates()
        return self

    def set_annotations(self, docs: Iterable[Doc], predictions: FullTransformerBatch) -> None:
        """doc._.trf_data as spacy-transformers sets it, and with
        store_gates, doc._.sla_gates."""
        docs = list(docs)
        super().set_annotations(docs, predictions)
        if self.cfg.get("store_gates") and getattr(predictions, "gates", None) is not None:
            for doc, gates in zip(docs, token_gates(predictions, docs)):
                doc._.set(GATES_ATTR, gates)

    @property
    def auxiliary_loss_name(self) -> str:
        return f"{self.name}_parent"

    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optional[Optimizer] = None,
        losses: Optional[Dict[str, float]] = None,
    ) -> Dict[str, float]:
        """spacy-transformers' update; with a supervised parent head (LISA)
        its loss is also reported, as losses["<name>_parent"] (it is
        backpropagated with the listeners' gradients)."""
        self.model.attrs["auxiliary_loss"] = 0.0
        losses = super().update(examples, drop=drop, sgd=sgd, losses=losses)
        if self.model.attrs.get("parent_attention") is not None:
            name = self.auxiliary_loss_name
            losses[name] = losses.get(name, 0.0) + self.model.attrs["auxiliary_loss"]
        return losses

    def local_masks(self, docs: Iterable[Doc]) -> List[numpy.ndarray]:
        """The wordpiece-level local attention mask of every transformer span
        of the Docs, in the order the model processes them: one
        (n_pieces, n_pieces) bool array per span, padding excluded, True where
        the row piece may attend to the column piece. For inspection and
        plots; the Docs must be parsed."""
        return self.model.local_masks(list(docs))
