"""Task heads for fine-tuning a transformer through a listener.

`spacy-sla.TextCatReduce.v1` is spaCy's `spacy.TextCatReduce.v1` with one
difference: the output layer's weights start random, N(0, init_std²), as a
new layer on BERT starts (initializer_range 0.02), not at zero as thinc's
Softmax does by default.

Why (docs/results.md, issue 12): with a zero output layer the gradient that
reaches the transformer, Wᵀ(p − y), is zero at the start and stays tiny
while W grows at the learning rate of fine-tuning (5e-5 per step at most);
the pipeline learns the class prior through the bias and keeps predicting
the majority class for hundreds of steps, while a plain fine-tune with a
random head trains the encoder from the first step.
"""
from functools import partial
from typing import Callable, List, Optional

import numpy
from spacy.ml.models.textcat import build_reduce_text_classifier
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model, zero_init
from thinc.layers.softmax import init as softmax_init
from thinc.types import Floats2d

BERT_INITIALIZER_RANGE = 0.02


def normal_init(std: float) -> Callable:
    """A thinc initialiser drawing N(0, std²) from numpy's global generator,
    which spaCy seeds with [system] seed, so that runs are reproducible."""

    def initialize(ops, shape):
        return ops.asarray(numpy.random.normal(0.0, std, shape).astype("float32"))

    return initialize


@registry.architectures("spacy-sla.TextCatReduce.v1")
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
    if init_std > 0:
        output_layer = model.get_ref("output_layer")  # Softmax (exclusive) or Linear (multi-label)
        output_layer.init = partial(softmax_init, normal_init(init_std), zero_init)
    return model
