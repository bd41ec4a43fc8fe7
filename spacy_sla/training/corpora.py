"""Corpus readers."""
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional, Union

import numpy
from spacy.attrs import DEP, HEAD
from spacy.errors import Errors as SpacyErrors
from spacy.language import Language
from spacy.training import Corpus, Example
from spacy.util import registry

from ..syntax.dependency_tree import as_ints2d


def with_reference_parse(example: Example) -> Example:
    """The example with the reference (gold) dependency parse copied onto its
    predicted Doc, so that the SLA masks come from the treebank's trees.

    Tokens that the alignment cannot map become roots of their own, labelled
    "dep"; with tokenizations that agree (gold_preproc, or corpora built from
    pre-tokenized words) every head is copied.
    """
    predicted = example.predicted
    heads, deps = example.get_aligned_parse(projectivize=False)
    positions = numpy.arange(len(predicted))
    absolute = numpy.array([h if h is not None else i for i, h in zip(positions, heads)], dtype=numpy.int64)
    labels = [d if h is not None and d else "dep" for h, d in zip(heads, deps)]
    # HEAD is stored relative to the token; the array is uint64 with wrap-around.
    relative = (absolute - positions).astype(numpy.uint64)
    label_ids = numpy.array([predicted.vocab.strings.add(label) for label in labels], dtype=numpy.uint64)
    predicted.from_array([HEAD, DEP], as_ints2d(numpy.stack([relative, label_ids], axis=1)))
    return example


@registry.readers("spacy-sla.GoldSyntaxCorpus.v1")
def create_gold_syntax_corpus(
    path: Optional[Union[str, Path]],
    gold_preproc: bool = False,
    max_length: int = 0,
    limit: int = 0,
    augmenter: Optional[Callable[[Language, Example], Iterable[Example]]] = None,
) -> Callable[[Language], Iterable[Example]]:
    """spaCy's Corpus reader whose examples carry the reference parse on their
    predicted Docs: for data with gold trees (e.g. UD), in a pipeline without
    a parser."""
    if path is None:
        raise ValueError(SpacyErrors.E913)  # as spacy.Corpus.v1: no path given
    corpus = Corpus(path, gold_preproc=gold_preproc, max_length=max_length, limit=limit, augmenter=augmenter)

    def read(nlp: Language) -> Iterator[Example]:
        for example in corpus(nlp):
            yield with_reference_parse(example)

    return read
