"""Task heads for fine-tuning a transformer through a listener.

`sla-replication.TextCatReduce.v1` is spaCy's `spacy.TextCatReduce.v1` with one
difference: the output layer's weights start random, N(0, init_std²), as a
new layer on BERT starts (initializer_range 0.02), not at zero as thinc's
Softmax does by default.

Why (docs/results.md, "History"): with a zero output layer the gradient that
reaches the transformer, Wᵀ(p − y), is zero at the start and stays tiny
while W grows at the learning rate of fine-tuning (5e-5 per step at most);
the pipeline learns the class prior through the bias and keeps predicting
the majority class for hundreds of steps, while a plain fine-tune with a
random head trains the encoder from the first step.

`sla-replication.TextCatCLS.v1` classifies the [CLS] vector instead of mean-pooled
tokens, as BERT fine-tunes do and as the paper's recipe (configs
`*_paper-*.cfg`, docs/usage.md) asks; its output layer starts the same way.

`sla-replication.Tagger.v1` is spaCy's `spacy.Tagger.v2` with the same random start
of its softmax layer; `sla_replication_token_ner` (NER as token classification) uses it.
"""
from functools import partial
from typing import Callable, List, Optional

import numpy
from spacy.ml.models.tagger import build_tagger_model
from spacy.ml.models.textcat import NEG_VALUE, build_reduce_text_classifier, resize_and_set_ref
from spacy.tokens import Doc
from spacy.util import registry
from spacy_transformers.data_classes import TransformerData
from spacy_transformers.layers import TransformerListener
from thinc.api import Dropout, Linear, Logistic, Model, Softmax, chain, resizable, zero_init
from thinc.layers.resizable import resize_linear_weighted
from thinc.layers.softmax import init as softmax_init
from thinc.types import Floats2d
from transformers.utils import ModelOutput

BERT_INITIALIZER_RANGE = 0.02


def normal_init(std: float) -> Callable:
    """A thinc initialiser drawing N(0, std²) from numpy's global generator,
    which spaCy seeds with [system] seed, so that runs are reproducible."""

    def initialize(ops, shape):
        return ops.asarray(numpy.random.normal(0.0, std, shape).astype("float32"))

    return initialize


def start_random(model: Model, init_std: float) -> Model:
    """The model with its "output_layer" weights drawn from N(0, init_std²)
    and zero biases when it is initialised; init_std = 0 leaves spaCy's
    zero start."""
    if init_std > 0:
        model.get_ref("output_layer").init = partial(softmax_init, normal_init(init_std), zero_init)
    return model


@registry.architectures("sla-replication.TextCatReduce.v1")
def build_reduce_text_classifier_random_init(
    tok2vec: Model,
    exclusive_classes: bool,
    use_reduce_first: bool,
    use_reduce_last: bool,
    use_reduce_max: bool,
    use_reduce_mean: bool,
    nO: Optional[int] = None,
    init_std: float = BERT_INITIALIZER_RANGE,
) -> Model[List[Doc], Floats2d]:
    """spaCy's TextCatReduce.v1 with the output weights drawn from
    N(0, init_std²) (biases still start at zero). init_std = 0 gives spaCy's
    own zero start."""
    model = build_reduce_text_classifier(
        tok2vec=tok2vec, exclusive_classes=exclusive_classes, use_reduce_first=use_reduce_first,
        use_reduce_last=use_reduce_last, use_reduce_max=use_reduce_max, use_reduce_mean=use_reduce_mean, nO=nO,
    )
    return start_random(model, init_std)  # its output layer: Softmax (exclusive) or Linear (multi-label)


def trfs2cls(grad_factor: float = 1.0) -> Model[List[TransformerData], Floats2d]:
    """The [CLS] vector of each doc: row [0, 0] of its last_hidden_state (the
    first wordpiece of the doc's first span, in the last layer), one row per
    doc. The backward pass puts the gradient, times grad_factor, into that
    row only and zeros everywhere else, in TransformerData as
    spacy_transformers.layers.trfs2arrays builds them (docs without output
    are skipped there and here)."""
    return Model("trfs2cls", _trfs2cls_forward, attrs={"grad_factor": grad_factor}, dims={"nO": None})


def _trfs2cls_forward(model: Model, trf_datas: List[TransformerData], is_train: bool):
    xp = model.ops.xp
    grad_factor = model.attrs["grad_factor"]
    outputs = [data.model_output.last_hidden_state if "last_hidden_state" in data.model_output else None
               for data in trf_datas]
    width = next((output.shape[-1] for output in outputs if output is not None), model.maybe_get_dim("nO"))
    if width is None:
        raise ValueError("trfs2cls: no transformer output in the batch and no width (nO) to make empty rows with")
    # a zero-length doc has no [CLS] row: zeros, as trfs2arrays gives it no rows
    rows = [output[0, 0] if output is not None and output.size else xp.zeros((width,), dtype="f") for output in outputs]
    X = model.ops.asarray2f(xp.stack(rows)) if rows else model.ops.alloc2f(0, width)

    def backprop(dX: Floats2d) -> List[TransformerData]:
        d_trf_datas = []
        for i, (data, output) in enumerate(zip(trf_datas, outputs)):
            if output is None:  # no output for this doc, so no gradient either (as trfs2arrays)
                continue
            d_output = model.ops.alloc(output.shape, dtype=output.dtype)
            if output.size:
                d_output[0, 0] = dX[i] * grad_factor
            d_trf_datas.append(TransformerData(
                model_output=ModelOutput(last_hidden_state=d_output), wordpieces=data.wordpieces, align=data.align,
            ))
        return d_trf_datas

    return X, backprop


@registry.architectures("sla-replication.TextCatCLS.v1")
def build_cls_text_classifier(
    exclusive_classes: bool = True,
    nO: Optional[int] = None,
    init_std: float = BERT_INITIALIZER_RANGE,
    dropout: float = 0.1,
    grad_factor: float = 1.0,
    upstream: str = "*",
) -> Model[List[Doc], Floats2d]:
    """A text classifier on the [CLS] vector, as a BERT fine-tune classifies
    sentences: a TransformerListener (spacy-transformers; it finds the
    transformer component named `upstream`, "*" for any), the last layer's
    first wordpiece of the doc's first span ([CLS] for BERT), dropout, and an
    output layer with weights from N(0, init_std²) and zero biases: softmax
    for exclusive classes, else a sigmoid per class.

    The plain fine-tune's `--pooling cls` (replication.baseline)
    classifies the same vector (hidden[:, 0]) with dropout and a linear layer,
    so the spaCy and plain runs of the paper's recipe (docs/usage.md)
    match. The authors' code differs: it classifies BERT's pooler output
    (a tanh dense layer on [CLS], pretrained with next sentence prediction),
    which is not used here (a Hugging Face base model without a pooler, such
    as MiniLM's, would have none to give).

    `dropout` is the rate when the model is called directly; `spacy train` and
    `nlp.update` set every dropout layer to `[training] dropout` (0.1 in the
    configs). Documents longer than the span getter's window are read in
    several spans; only the first span's [CLS] is classified.
    """
    listener = TransformerListener(upstream_name=upstream)
    if exclusive_classes:
        output_layer = Softmax(nO=nO, init_W=normal_init(init_std), init_b=zero_init)
        fill_defaults = {"b": NEG_VALUE, "W": 0}
    else:
        output_layer = Linear(nO=nO, init_W=normal_init(init_std), init_b=zero_init)
        fill_defaults = {"b": 0, "W": 0}
    resizable_layer = resizable(output_layer, resize_layer=partial(resize_linear_weighted, fill_defaults=fill_defaults))
    layers = [listener, trfs2cls(grad_factor), Dropout(dropout), resizable_layer]
    if not exclusive_classes:
        layers.append(Logistic())
    model = chain(*layers)
    model.set_ref("listener", listener)
    model.set_ref("output_layer", output_layer)
    model.attrs["resize_output"] = partial(resize_and_set_ref, resizable_layer=resizable_layer)
    model.attrs["multi_label"] = not exclusive_classes
    if nO is not None:
        model.set_dim("nO", nO)
    return model


@registry.architectures("sla-replication.Tagger.v1")
def build_tagger_random_init(
    tok2vec: Model[List[Doc], List[Floats2d]],
    nO: Optional[int] = None,
    normalize: bool = False,
    init_std: float = BERT_INITIALIZER_RANGE,
) -> Model[List[Doc], List[Floats2d]]:
    """spaCy's Tagger.v2 (a softmax layer on each token's vector) with the
    weights drawn from N(0, init_std²) instead of zeros, for the same reason as
    TextCatReduce.v1 above: a zero layer hands the transformer no gradient at
    the start. init_std = 0 gives spaCy's own zero start."""
    model = build_tagger_model(tok2vec=tok2vec, nO=nO, normalize=normalize)
    return start_random(model, init_std)  # its output layer: Softmax_v2
