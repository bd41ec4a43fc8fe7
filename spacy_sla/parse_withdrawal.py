"""The parse SLA used, taken off the Doc again: `sla_parse_withdrawal`.

In a multi-task pipeline the user's own parser (or senter) listens to the
transformer, so it runs after it; the SLA transformer needs a parse before it
runs, which a sourced, frozen parser gives. Left on the Doc, that first parse
would change what the user's components see: spaCy's parser re-parsing a
parsed Doc can leave head cycles, and its sentence starts constrain the
user's `ner` (a gold entity they cut stops training with spaCy's E024).

The withdrawal sits right after the SLA transformer, whose masks are built by
then, and resets heads, dependency labels and sentence starts to those of a
Doc that was never parsed; every other annotation (tags, entities, the
transformer's output) stays. In training it is listed in
`[training] annotating_components`, so that the training Docs of the
components after it are withdrawn too.
"""
from typing import Iterable

import numpy
from spacy.attrs import DEP, HEAD, SENT_START
from spacy.language import Language
from spacy.tokens import Doc

from .syntax.dependency_tree import as_ints2d

PARSE_ATTRIBUTES = [HEAD, DEP, SENT_START]


def unparsed_arrays(n_tokens: int) -> numpy.ndarray:
    """The HEAD, DEP and SENT_START columns of a Doc that was never parsed:
    every head its own token, no label, the first token starting the only
    sentence and the others unknown."""
    arrays = numpy.zeros((n_tokens, len(PARSE_ATTRIBUTES)), dtype="uint64")
    arrays[:1, PARSE_ATTRIBUTES.index(SENT_START)] = 1
    return arrays


def withdraw_parse(doc: Doc) -> Doc:
    """Reset the Doc's parse and sentence starts in place, as if it had never
    been parsed; the Doc."""
    if len(doc):
        doc.from_array(PARSE_ATTRIBUTES, as_ints2d(unparsed_arrays(len(doc))))
    return doc


class ParseWithdrawal:
    """Takes the parse off each Doc after the SLA transformer (module docstring)."""

    def __init__(self, name: str = "sla_parse_withdrawal") -> None:
        self.name = name

    def __call__(self, doc: Doc) -> Doc:
        return withdraw_parse(doc)

    def pipe(self, docs: Iterable[Doc], batch_size: int = 128) -> Iterable[Doc]:
        for doc in docs:
            yield withdraw_parse(doc)


@Language.factory(
    "sla_parse_withdrawal",
    assigns=["token.head", "token.dep", "token.is_sent_start"],
    requires=["doc._.trf_data"],
    default_config={},
)
def make_parse_withdrawal(nlp: Language, name: str) -> ParseWithdrawal:
    return ParseWithdrawal(name)
