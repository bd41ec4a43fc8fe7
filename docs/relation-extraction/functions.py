"""A relation extractor in the shape of spaCy's relation-extraction tutorial
(explosion/projects, tutorials/rel_component): a trainable component with a
thinc model and a scorer of its own, and a corpus reader that puts the gold
entities on the predicted Docs, since the pipeline has no `ner`. Give this
file to spaCy's and spacy-sla's commands with `--code`.

It differs from the tutorial in two places, both marked: the classification
layer's dimensions are `Optional[int]` (spaCy 3.8's config validation
refuses the tutorial's `nO: int = None`), and `predict` returns no scores for
a batch without candidate pairs instead of failing in the model.
"""
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Tuple

import numpy
from spacy.language import Language
from spacy.pipeline.trainable_pipe import TrainablePipe
from spacy.scorer import PRFScore
from spacy.tokens import Doc, DocBin, Span
from spacy.training import Example, validate_examples, validate_get_examples
from spacy.util import registry
from spacy.vocab import Vocab
from thinc.api import Linear, Logistic, Model, Optimizer, chain, set_dropout_rate
from thinc.types import Floats2d, Ints1d, Ragged

if not Doc.has_extension("rel"):
    Doc.set_extension("rel", default={})  # {(start of entity 1, start of entity 2): {label: probability}}


# --- the reader ---------------------------------------------------------------------

@registry.readers("Gold_ents_Corpus.v1")
def create_docbin_reader(file: Path) -> Callable[[Language], Iterable[Example]]:
    return partial(read_files, file)


def read_files(file: Path, nlp: Language) -> Iterable[Example]:
    """The gold Docs' tokens with their gold entities as the predicted Docs:
    the pipeline predicts relations between given entities."""
    for gold in DocBin().from_disk(file).get_docs(nlp.vocab):
        predicted = Doc(nlp.vocab, words=[token.text for token in gold], spaces=[token.whitespace_ for token in gold])
        predicted.ents = [Span(predicted, ent.start, ent.end, ent.label_) for ent in gold.ents]
        yield Example(predicted, gold)


# --- the model ------------------------------------------------------------------------

@registry.architectures("rel_model.v1")
def create_relation_model(
    create_instance_tensor: Model[List[Doc], Floats2d], classification_layer: Model[Floats2d, Floats2d]
) -> Model[List[Doc], Floats2d]:
    model = chain(create_instance_tensor, classification_layer)
    model.attrs["get_instances"] = create_instance_tensor.attrs["get_instances"]
    return model


@registry.architectures("rel_classification_layer.v1")
def create_classification_layer(nO: Optional[int] = None, nI: Optional[int] = None) -> Model[Floats2d, Floats2d]:
    # the tutorial's `nO: int = None` is refused by spaCy 3.8's config validation
    return chain(Linear(nO=nO, nI=nI), Logistic())


@registry.misc("rel_instance_generator.v1")
def create_instances(max_length: int) -> Callable[[Doc], List[Tuple[Span, Span]]]:
    def get_instances(doc: Doc) -> List[Tuple[Span, Span]]:
        return [(ent1, ent2) for ent1 in doc.ents for ent2 in doc.ents
                if ent1 != ent2 and max_length and abs(ent2.start - ent1.start) <= max_length]

    return get_instances


@registry.architectures("rel_instance_tensor.v1")
def create_tensors(
    tok2vec: Model[List[Doc], List[Floats2d]],
    pooling: Model[Ragged, Floats2d],
    get_instances: Callable[[Doc], List[Tuple[Span, Span]]],
) -> Model[List[Doc], Floats2d]:
    return Model("instance_tensors", instance_forward, layers=[tok2vec, pooling],
                 refs={"tok2vec": tok2vec, "pooling": pooling}, attrs={"get_instances": get_instances},
                 init=instance_init)


def instance_forward(model: Model[List[Doc], Floats2d], docs: List[Doc], is_train: bool) -> Tuple[Floats2d, Callable]:
    pooling = model.get_ref("pooling")
    tok2vec = model.get_ref("tok2vec")
    all_instances = [model.attrs["get_instances"](doc) for doc in docs]
    tokvecs, bp_tokvecs = tok2vec(docs, is_train)
    ents = []
    lengths = []
    for instances, tokvec in zip(all_instances, tokvecs):
        token_indices = []
        for instance in instances:
            for ent in instance:
                token_indices.extend(range(ent.start, ent.end))
                lengths.append(ent.end - ent.start)
        ents.append(tokvec[token_indices])
    entities = Ragged(model.ops.flatten(ents), model.ops.asarray(lengths, dtype="int32"))
    pooled, bp_pooled = pooling(entities, is_train)
    relations = model.ops.reshape2f(pooled, -1, pooled.shape[1] * 2)  # the pair's two entities side by side

    def backprop(d_relations: Floats2d) -> List[Doc]:
        d_pooled = model.ops.reshape2f(d_relations, d_relations.shape[0] * 2, -1)
        d_ents = bp_pooled(d_pooled).data
        d_tokvecs = []
        ent_index = 0
        for doc_nr, instances in enumerate(all_instances):
            shape = tokvecs[doc_nr].shape
            d_tokvec = model.ops.alloc2f(*shape)
            count_occ = model.ops.alloc2f(*shape)
            for instance in instances:
                for ent in instance:
                    d_tokvec[ent.start:ent.end] += d_ents[ent_index]
                    count_occ[ent.start:ent.end] += 1
                    ent_index += ent.end - ent.start
            d_tokvec /= count_occ + 1e-11
            d_tokvecs.append(d_tokvec)
        return bp_tokvecs(d_tokvecs)

    return relations, backprop


def instance_init(model: Model, X: Optional[List[Doc]] = None, Y: Optional[Floats2d] = None) -> Model:
    if X is not None:
        model.get_ref("tok2vec").initialize(X)
    return model


# --- the component and its scorer ------------------------------------------------------

@Language.factory(
    "relation_extractor",
    requires=["doc.ents", "token.ent_iob", "token.ent_type"],
    assigns=["doc._.rel"],
    default_score_weights={"rel_micro_p": None, "rel_micro_r": None, "rel_micro_f": None},
)
def make_relation_extractor(nlp: Language, name: str, model: Model, *, threshold: float) -> "RelationExtractor":
    return RelationExtractor(nlp.vocab, model, name, threshold=threshold)


class RelationExtractor(TrainablePipe):
    def __init__(self, vocab: Vocab, model: Model, name: str = "rel", *, threshold: float) -> None:
        self.vocab = vocab
        self.model = model
        self.name = name
        self.cfg = {"labels": [], "threshold": threshold}

    @property
    def labels(self) -> Tuple[str, ...]:
        return tuple(self.cfg["labels"])

    @property
    def threshold(self) -> float:
        return self.cfg["threshold"]

    def add_label(self, label: str) -> int:
        if label in self.labels:
            return 0
        self._allow_extra_label()
        self.cfg["labels"] = list(self.labels) + [label]
        return 1

    def __call__(self, doc: Doc) -> Doc:
        if not self.model.attrs["get_instances"](doc):
            return doc
        self.set_annotations([doc], self.predict([doc]))
        return doc

    def predict(self, docs: Iterable[Doc]) -> Floats2d:
        docs = list(docs)
        # not in the tutorial: its model cannot take a batch without a candidate pair
        if not any(self.model.attrs["get_instances"](doc) for doc in docs):
            return self.model.ops.alloc2f(0, len(self.labels))
        return self.model.ops.asarray(self.model.predict(docs))

    def set_annotations(self, docs: Iterable[Doc], scores: Floats2d) -> None:
        row = 0
        for doc in docs:
            for ent1, ent2 in self.model.attrs["get_instances"](doc):
                offset = (ent1.start, ent2.start)
                doc._.rel.setdefault(offset, {})
                for column, label in enumerate(self.labels):
                    doc._.rel[offset][label] = float(scores[row, column])
                row += 1

    def update(self, examples: Iterable[Example], *, drop: float = 0.0, sgd: Optional[Optimizer] = None,
               losses: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        losses = {} if losses is None else losses
        losses.setdefault(self.name, 0.0)
        examples = list(examples)
        validate_examples(examples, "RelationExtractor.update")
        if not any(self.model.attrs["get_instances"](eg.predicted) for eg in examples):
            return losses
        set_dropout_rate(self.model, drop)
        predictions, backprop = self.model.begin_update([eg.predicted for eg in examples])
        loss, gradient = self.get_loss(examples, predictions)
        backprop(gradient)
        if sgd is not None:
            self.model.finish_update(sgd)
        losses[self.name] += loss
        return losses

    def get_loss(self, examples: Iterable[Example], scores: Floats2d) -> Tuple[float, Floats2d]:
        gradient = scores - self._examples_to_truth(list(examples))
        return float((gradient ** 2).sum(axis=1).mean()), gradient

    def initialize(self, get_examples: Callable[[], Iterable[Example]], *, nlp: Optional[Language] = None,
                   labels: Optional[List[str]] = None) -> None:
        validate_get_examples(get_examples, "RelationExtractor.initialize")
        for label in labels if labels is not None else sorted(
                {label for eg in get_examples() for label_dict in eg.reference._.rel.values() for label in label_dict}):
            self.add_label(label)
        self._require_labels()
        sample = list(islice(get_examples(), 10))
        truths = self._examples_to_truth(sample)
        if truths is None:
            raise ValueError("Initializing the relation extractor needs a few examples with entities and relations.")
        self.model.initialize(X=[eg.reference for eg in sample], Y=truths)

    def _examples_to_truth(self, examples: List[Example]) -> Optional[Floats2d]:
        instances = [self.model.attrs["get_instances"](eg.reference) for eg in examples]
        if not any(instances):
            return None
        truths = numpy.zeros((sum(len(pairs) for pairs in instances), len(self.labels)), dtype="f")
        row = 0
        for example, pairs in zip(examples, instances):
            for ent1, ent2 in pairs:
                gold = example.reference._.rel.get((ent1.start, ent2.start), {})
                for column, label in enumerate(self.labels):
                    truths[row, column] = gold.get(label, 0)
                row += 1
        return self.model.ops.asarray(truths)

    def score(self, examples: Iterable[Example], **kwargs) -> Dict[str, float]:
        return score_relations(examples, self.threshold)


def score_relations(examples: Iterable[Example], threshold: float) -> Dict[str, float]:
    """Micro P/R/F over the predicted pairs' labels (the tutorial's scorer)."""
    micro = PRFScore()
    for example in examples:
        gold = example.reference._.rel
        for offset, predicted in example.predicted._.rel.items():
            gold_labels = [label for label, value in gold.get(offset, {}).items() if value == 1.0]
            for label, probability in predicted.items():
                if probability >= threshold:
                    if label in gold_labels:
                        micro.tp += 1
                    else:
                        micro.fp += 1
                elif label in gold_labels:
                    micro.fn += 1
    return {"rel_micro_p": micro.precision, "rel_micro_r": micro.recall, "rel_micro_f": micro.fscore}
