"""Named entities as token classification: `sla_replication_token_ner`.

spaCy's `ner` is a transition-based parser over entity moves. A BERT fine-tune
(and the authors' code for CoNLL-2003) instead puts a softmax over BIO tags
on every token and reads the entities back from the tags. `sla_replication_token_ner`
is that head as a spaCy component: spaCy's `Tagger` with BIO tags of the
gold entities as its labels, whose predictions become `doc.ents`.

Why it exists (docs/results.md, "History"): at short fine-tuning budgets the
transition-based `ner` on MiniLM stays behind a plain transformers fine-tune
of the same model on CoNLL-2003, by recall, and comparing attention variants
needs a baseline that trains as well as what a user would otherwise do.

Tags are B-X / I-X / O (not BILUO), as the plain fine-tune and conlleval use
them; they are read as conlleval reads them, so every predicted sequence is a
valid set of entities (an I-X that does not continue an X starts one).
"""
from itertools import islice
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from spacy.language import Language
from spacy.pipeline.tagger import Tagger
from spacy.tokens import Doc, Span
from spacy.training import Example, validate_examples, validate_get_examples
from spacy.vocab import Vocab
from thinc.api import Config, Model, SequenceCategoricalCrossentropy
from thinc.types import Floats2d

from . import heads  # noqa: F401  (registers sla-replication.Tagger.v1, the default model)
from .errors import Errors

OUTSIDE = "O"

DEFAULT_TOKEN_NER_CONFIG = """
[model]
@architectures = "sla-replication.Tagger.v1"
nO = null
normalize = false
init_std = 0.02

[model.tok2vec]
@architectures = "spacy.HashEmbedCNN.v2"
pretrained_vectors = null
width = 96
depth = 4
embed_size = 2000
window_size = 1
maxout_pieces = 3
subword_features = true
"""
DEFAULT_TOKEN_NER_MODEL = Config().from_str(DEFAULT_TOKEN_NER_CONFIG)["model"]


def biluo_to_bio(tag: Optional[str]) -> Optional[str]:
    """The BIO tag of a BILUO tag (L- continues, U- begins an entity); None
    for a missing or misaligned token ("-" or None in spaCy's aligned tags)."""
    if tag is None or tag == "-" or tag == "":
        return None
    prefix, _, label = tag.partition("-")
    if prefix in ("B", "U"):
        return f"B-{label}"
    if prefix in ("I", "L"):
        return f"I-{label}"
    return OUTSIDE


def bio_spans(doc: Doc, tags: Sequence[str]) -> List[Span]:
    """Entities of BIO tags, read as conlleval reads them: B-X, or I-X after
    anything but B-X/I-X, starts an entity of type X."""
    spans: List[Span] = []
    start: Optional[int] = None
    label = ""
    for i, tag in enumerate(list(tags) + [OUTSIDE]):
        prefix, _, kind = tag.partition("-")
        continues = prefix == "I" and start is not None and kind == label
        if start is not None and not continues:
            spans.append(Span(doc, start, i, label=label))
            start = None
        if prefix in ("B", "I") and not continues:
            start, label = i, kind
    return spans


@Language.factory(
    "sla_replication_token_ner",
    assigns=["doc.ents", "token.ent_iob", "token.ent_type"],
    default_config={
        "model": DEFAULT_TOKEN_NER_MODEL,
        "scorer": {"@scorers": "sla-replication.entity_scorer.v1"},
        "label_smoothing": 0.0,
    },
    default_score_weights={"ents_f": 1.0, "ents_p": 0.0, "ents_r": 0.0, "ents_per_type": None},
)
def make_token_ner(
    nlp: Language,
    name: str,
    model: Model[List[Doc], List[Floats2d]],
    scorer: Optional[Callable],
    label_smoothing: float,
) -> "TokenNER":
    """Named entities from a softmax over BIO tags on each token.

    model (Model[List[Doc], List[Floats2d]]): one row of tag scores per token,
        usually sla-replication.Tagger.v1 on a TransformerListener.
    scorer (Optional[Callable]): scores doc.ents (sla-replication.entity_scorer.v1:
        conlleval-style P/R/F).
    label_smoothing (float): as spaCy's tagger.
    """
    return TokenNER(nlp.vocab, model, name, scorer=scorer, label_smoothing=label_smoothing)


class TokenNER(Tagger):
    """spaCy's Tagger with BIO entity tags as labels: it learns the tags of
    the reference's entities (aligned to the predicted tokens) and sets
    doc.ents from its predictions, replacing the entities a doc had.

    `labels` are the tags the model predicts ("O", "B-PER", "I-PER", ...);
    `entity_types` and `label_data` are the entity types ("PER", ...), which
    is what `add_label` and `initialize(labels=...)` take, as for `ner`."""

    def __init__(
        self,
        vocab: Vocab,
        model: Model,
        name: str = "sla_replication_token_ner",
        *,
        scorer: Optional[Callable] = None,
        label_smoothing: float = 0.0,
    ) -> None:
        super().__init__(vocab, model, name, overwrite=True, scorer=scorer, label_smoothing=label_smoothing)

    @property
    def entity_types(self) -> Tuple[str, ...]:
        return tuple(tag[2:] for tag in self.labels if tag.startswith("B-"))

    @property
    def label_data(self) -> Tuple[str, ...]:
        return self.entity_types

    def add_label(self, label: str) -> int:
        """Add an entity type (its B- and I- tags). RETURNS 0 if it was there."""
        if not isinstance(label, str) or not label or label == OUTSIDE or label[:2] in ("B-", "I-", "L-", "U-"):
            raise ValueError(Errors.E016.format(name=self.name, label=repr(label)))
        if label in self.entity_types:
            return 0
        if OUTSIDE not in self.labels:
            super().add_label(OUTSIDE)
        super().add_label(f"B-{label}")
        super().add_label(f"I-{label}")
        return 1

    def set_annotations(self, docs: Iterable[Doc], batch_tag_ids: List) -> None:
        if isinstance(docs, Doc):
            docs = [docs]
        tags = self.labels
        for doc, tag_ids in zip(docs, batch_tag_ids):
            if hasattr(tag_ids, "get"):
                tag_ids = tag_ids.get()
            doc.set_ents(bio_spans(doc, [tags[int(i)] for i in tag_ids]), default="outside")

    def gold_tags(self, example: Example) -> List[Optional[str]]:
        """The BIO tag of each predicted token: the reference's entities
        aligned to it, None where the reference has no annotation or the
        tokens do not align (no loss there)."""
        return [biluo_to_bio(tag) for tag in example.get_aligned_ner()]

    def get_loss(self, examples: Iterable[Example], scores: List[Floats2d]) -> Tuple[float, List[Floats2d]]:
        validate_examples(examples, "TokenNER.get_loss")
        loss_func = SequenceCategoricalCrossentropy(
            names=self.labels, normalize=False, label_smoothing=self.cfg["label_smoothing"]
        )
        truths = [self.gold_tags(example) for example in examples]
        d_scores, loss = loss_func(scores, truths)
        if self.model.ops.xp.isnan(loss):
            raise ValueError(Errors.E017.format(name=self.name))
        return float(loss), d_scores

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Example]],
        *,
        nlp: Optional[Language] = None,
        labels: Optional[Iterable[str]] = None,
    ) -> None:
        """Add the entity types (labels, or those of the examples' reference
        docs) and size the model on a sample of the examples."""
        validate_get_examples(get_examples, "TokenNER.initialize")
        if labels is None:
            labels = sorted({ent.label_ for example in get_examples() for ent in example.reference.ents})
        for label in labels:
            self.add_label(label)
        if not self.entity_types:
            raise ValueError(Errors.E018.format(name=self.name))
        tag_index: Dict[str, int] = {tag: i for i, tag in enumerate(self.labels)}
        doc_sample = []
        label_sample = []
        for example in islice(get_examples(), 10):
            doc_sample.append(example.x)
            rows = self.model.ops.alloc2f(len(example.x), len(self.labels))
            for i, tag in enumerate(self.gold_tags(example)):
                if tag in tag_index:
                    rows[i, tag_index[tag]] = 1.0
            label_sample.append(rows)
        self.model.initialize(X=doc_sample, Y=label_sample)
