"""A small synthetic relation-extraction corpus in the tutorial's format:
.spacy files whose Docs carry gold entities and, in `doc._.rel`, a label
dictionary for every ordered pair of entities (1.0 where the relation holds).

    .venv/bin/python docs/relation-extraction/make_corpus.py rel-data
writes rel-data/train.spacy and rel-data/dev.spacy.
"""
import random
import sys
from pathlib import Path
from typing import List

from spacy.tokens import Doc, DocBin, Span
from spacy.vocab import Vocab

LABELS = ("SEES", "ON")
ANIMALS = ("cat", "dog", "bird", "horse")
THINGS = ("mat", "box", "roof")


def relation_doc(vocab: Vocab, rng: random.Random) -> Doc:
    """"the A saw the B on the T ." (A SEES B, B ON T) or "the A sat on the T ." (A ON T)."""
    first, second = rng.sample(ANIMALS, 2)
    thing = rng.choice(THINGS)
    if rng.random() < 0.6:
        words = ["the", first, "saw", "the", second, "on", "the", thing, "."]
        entities, relations = [(1, "ANIMAL"), (4, "ANIMAL"), (7, "THING")], {(1, 4): "SEES", (4, 7): "ON"}
    else:
        words = ["the", first, "sat", "on", "the", thing, "."]
        entities, relations = [(1, "ANIMAL"), (5, "THING")], {(1, 5): "ON"}
    doc = Doc(vocab, words=words)
    doc.ents = [Span(doc, start, start + 1, label) for start, label in entities]
    doc._.rel = {(a.start, b.start): {label: float(relations.get((a.start, b.start)) == label) for label in LABELS}
                 for a in doc.ents for b in doc.ents if a != b}
    return doc


def make_corpus(output_dir: Path, n_train: int = 40, n_dev: int = 12, seed: int = 0) -> List[Path]:
    if not Doc.has_extension("rel"):
        Doc.set_extension("rel", default={})
    rng = random.Random(seed)
    vocab = Vocab()
    output_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, n_docs in (("train", n_train), ("dev", n_dev)):
        path = output_dir / f"{name}.spacy"
        DocBin(docs=[relation_doc(vocab, rng) for _ in range(n_docs)], store_user_data=True).to_disk(path)
        paths.append(path)
    return paths


if __name__ == "__main__":
    for written in make_corpus(Path(sys.argv[1] if len(sys.argv) > 1 else "rel-data")):
        print(f"Wrote {written}")
