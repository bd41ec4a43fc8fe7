"""One pipeline shared by threads, and pipelines in worker processes."""
import random
from concurrent.futures import ThreadPoolExecutor
from typing import List

import numpy
import pytest
from spacy.tokens import Doc

from util import english_vocab, parsed_doc, sla_nlp, the_cat_sat, trf_output

WORDS = ["the", "cat", "dog", "sat", "on", "a", "mat", "and", "ran", "big", "she", "saw", "it", "."]


def random_parsed_doc(rng: random.Random, n_words: int) -> Doc:
    """A parsed Doc of n_words with a random tree (every head before its
    dependant, the first word the root)."""
    words = [rng.choice(WORDS) for _ in range(n_words)]
    heads = [0] + [rng.randrange(i) for i in range(1, n_words)]
    return parsed_doc(english_vocab(), words, heads)


def varied_docs(n_docs: int, seed: int = 0) -> List[Doc]:
    """Docs of different lengths (padded batches of different widths), some
    of several sentences."""
    rng = random.Random(seed)
    docs = []
    for i in range(n_docs):
        if i % 5 == 4:
            docs.append(Doc.from_docs([the_cat_sat(english_vocab()) for _ in range(1 + i % 3)]))
        else:
            docs.append(random_parsed_doc(rng, rng.randint(1, 30)))
    return docs


def copy_doc(doc: Doc) -> Doc:
    return Doc(doc.vocab).from_bytes(doc.to_bytes())


def test_threads_sharing_one_pipeline_get_the_sequential_outputs(tiny_bert):
    """Each call's masks, gates and outputs belong to that call: no thread
    reads another's mask or switches another's forward pass into training
    mode."""
    nlp = sla_nlp(tiny_bert, mask={"@misc": "spacy-sla.syntax_mask.v1", "threshold": 1, "punct_visible": False})
    nlp.get_pipe("sla_transformer").store_gates = True
    docs = varied_docs(40)
    sequential = [nlp(copy_doc(doc)) for doc in docs]
    with ThreadPoolExecutor(max_workers=4) as pool:
        threaded = list(pool.map(lambda doc: nlp(copy_doc(doc)), docs * 2))
    for expected, got in zip(sequential * 2, threaded):
        numpy.testing.assert_allclose(trf_output(got), trf_output(expected), atol=1e-6, rtol=0)
        numpy.testing.assert_allclose(got._.sla_gates, expected._.sla_gates, atol=1e-6, rtol=0)
    # the model is still usable for training afterwards
    assert nlp.get_pipe("sla_transformer").model.transformer is not None
