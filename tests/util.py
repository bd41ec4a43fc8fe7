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


def sla_nlp(model_path: Path, initialize: bool = True, **model_config) -> Language:
    """A blank English pipeline with an sla_transformer loading the model at
    model_path; model_config overrides the model's settings."""
    nlp = spacy.blank("en")
    config = {"name": str(model_path), **model_config}
    nlp.add_pipe("sla_transformer", config={"model": config})
    if initialize:
        nlp.initialize()
    return nlp


def plain_nlp(model_path: Path) -> Language:
    """The same with spacy-transformers' own transformer component."""
    nlp = spacy.blank("en")
    nlp.add_pipe("transformer", config={"model": {"name": str(model_path)}})
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


LISTENER = {
    "@architectures": "spacy-transformers.TransformerListener.v1",
    "grad_factor": 1.0,
    "pooling": {"@layers": "reduce_mean.v1"},
    "upstream": "*",
}


def add_textcat_listener(nlp: Language, labels=("POS", "NEG")) -> None:
    textcat = nlp.add_pipe(
        "textcat",
        config={
            "model": {
                "@architectures": "spacy.TextCatReduce.v1",
                "exclusive_classes": True,
                "use_reduce_first": False,
                "use_reduce_last": False,
                "use_reduce_max": False,
                "use_reduce_mean": True,
                "nO": None,
                "tok2vec": LISTENER,
            }
        },
    )
    for label in labels:
        textcat.add_label(label)


def add_tagger_listener(nlp: Language, labels=("c", "i")) -> None:
    tagger = nlp.add_pipe(
        "tagger",
        config={"model": {"@architectures": "spacy.Tagger.v2", "nO": None, "tok2vec": LISTENER}},
    )
    for label in labels:
        tagger.add_label(label)


def trf_output(doc: Doc):
    return doc._.trf_data.model_output.last_hidden_state
