"""Helpers shared by the tests."""
from pathlib import Path
from typing import List, Optional

import spacy
from spacy.language import Language
from spacy.tokens import Doc
from spacy.vocab import Vocab


def parsed_doc(
    vocab: Vocab,
    words: List[str],
    heads: List[int],
    deps: Optional[List[str]] = None,
    spaces: Optional[List[bool]] = None,
) -> Doc:
    """A Doc with a hand-made parse; heads are absolute token indices and a
    token that is its own head is a root."""
    if deps is None:
        deps = ["ROOT" if head == i else "dep" for i, head in enumerate(heads)]
    return Doc(vocab, words=words, spaces=spaces, heads=heads, deps=deps)


def sla_nlp(model_path: Path, **model_config) -> Language:
    """A blank English pipeline with an initialized sla_transformer."""
    nlp = spacy.blank("en")
    config = {"name": str(model_path), **model_config}
    nlp.add_pipe("sla_transformer", config={"model": config})
    nlp.initialize()
    return nlp


def the_cat_sat(vocab: Vocab) -> Doc:
    # The cat sat on the mat .  (heads: The->cat->sat, on->sat, the->mat->on, .->sat)
    return parsed_doc(
        vocab,
        "The cat sat on the mat .".split(),
        [1, 2, 2, 2, 5, 3, 2],
        ["det", "nsubj", "ROOT", "prep", "det", "pobj", "punct"],
    )


_ENGLISH = None


def english_vocab() -> Vocab:
    """An English vocab, whose lexical attributes (is_punct, ...) are set."""
    global _ENGLISH
    if _ENGLISH is None:
        _ENGLISH = spacy.blank("en").vocab
    return _ENGLISH
