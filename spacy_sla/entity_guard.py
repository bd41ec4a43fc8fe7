"""Gold entities that the parse's sentences cut: `sla_entity_guard`.

SLA needs the parse on the training Docs, so the parser is listed in
`[training] annotating_components`, and with the parse come its sentence
boundaries. spaCy's transition-based `ner` never lets an entity cross a
sentence start of the Doc it reads; when a gold entity does (the parser split
a sentence inside "U.S. Open", say), its oracle finds no valid move and
training stops with spaCy's E024. The oracle is only consulted for Docs longer
than a random cut (`update_with_oracle_cut_size`, 50 to 200 tokens), so
sentences rarely meet it; whole documents do: in the first 150 CoNLL-2003
articles, 2 of 3,936 gold entities are cut by `en_core_web_sm`'s sentences,
and the first training run on articles stopped within minutes.

The guard sits after the parser. In training it marks each gold entity that a
sentence start of the parsed Doc cuts as missing (unannotated), as spaCy does
for entities that do not align with the predicted tokens: the `ner` is then
neither taught nor penalised there. In prediction it returns the Doc as it
is; scoring still counts those entities, which no transition-based `ner`
behind that parser can predict.
"""
import warnings
from bisect import bisect_right
from typing import Dict, Iterable, List, Optional, Sequence

from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.training import Example

from .errors import Warnings


def sentence_start_chars(doc: Doc) -> List[int]:
    """Character offsets of the sentence starts of a Doc, in order, its first
    token left out (none when it has no boundaries: is_sent_start is None)."""
    return [token.idx for token in doc[1:] if token.is_sent_start]


def cut_entities(reference: Doc, starts: Sequence[int]) -> List[Span]:
    """The entities of `reference` with a sentence start (a character offset,
    e.g. of the predicted Doc) after their first character and before their
    end: offsets, so that the two Docs may be tokenised differently."""
    ordered = sorted(starts)
    cut = []
    for entity in reference.ents:
        after = bisect_right(ordered, entity.start_char)  # the first start past the entity's first character
        if after < len(ordered) and ordered[after] < entity.end_char:
            cut.append(entity)
    return cut


def hide_cut_entities(example: Example) -> int:
    """Mark the gold entities that the predicted Doc's sentence starts cut as
    missing in the example's reference; the number marked."""
    cut = cut_entities(example.reference, sentence_start_chars(example.predicted))
    if cut:
        example.reference.set_ents([], missing=cut, default="unmodified")
    return len(cut)


class EntityGuard:
    """In training, gold entities cut by the parse's sentence starts become
    missing (module docstring); in prediction, nothing."""

    def __init__(self, name: str = "sla_entity_guard") -> None:
        self.name = name
        self.n_hidden = 0
        self._warned = False

    def __call__(self, doc: Doc) -> Doc:
        return doc

    def pipe(self, docs: Iterable[Doc], batch_size: int = 128) -> Iterable[Doc]:
        yield from docs

    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optional[object] = None,
        losses: Optional[Dict[str, float]] = None,
    ) -> Dict[str, float]:
        n_hidden = sum(hide_cut_entities(example) for example in examples)
        self.n_hidden += n_hidden
        if n_hidden and not self._warned:
            warnings.warn(Warnings.W004.format(name=self.name, n_entities=n_hidden))
            self._warned = True
        return {} if losses is None else losses


@Language.factory(
    "sla_entity_guard",
    assigns=[],
    requires=["token.is_sent_start"],
    default_config={},
)
def make_entity_guard(nlp: Language, name: str) -> EntityGuard:
    return EntityGuard(name)
