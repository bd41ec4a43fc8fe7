"""The data of `spacy sla ab`: the training and dev corpora checked before
the first run trains (documents a reader can read, the annotation the
configs' scores need) and the nested training samples of --train-sizes."""
import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy
from spacy.tokens import Doc, DocBin
from spacy.vocab import Vocab

from ..support.files import file_fingerprint, write_atomically
from .errors import Errors

SAMPLES = "samples.json"
CORPUS_READER = "spacy.Corpus.v1"
JSON_LINES = (".jsonl", ".json")  # what annotation tools export, which spacy.Corpus.v1 cannot read


def corpus_documents(path: Path, which: str, reader: Optional[str] = CORPUS_READER) -> Optional[int]:
    """The number of documents of a training or dev corpus, or [SLA-E062] when
    its reader cannot read it: a missing path, a file that is not a .spacy
    DocBin, a directory without one. For another reader than
    spacy.Corpus.v1 only that the path can be read (None documents)."""
    if not path.exists():
        raise ValueError(Errors.E062.format(path=path, which=which, reason="it does not exist"))
    if not os.access(path, os.R_OK):
        raise ValueError(Errors.E062.format(path=path, which=which, reason="it cannot be read (permissions)"))
    if reader != CORPUS_READER:
        return None
    if path.is_dir():
        files = sorted(path.rglob("*.spacy"))
        if not files:
            raise ValueError(Errors.E062.format(path=path, which=which, reason="the directory holds no .spacy file"))
    elif path.suffix != ".spacy":
        what = " but JSON lines (e.g. Prodigy's export)" if path.suffix in JSON_LINES else ""
        raise ValueError(Errors.E062.format(path=path, which=which, reason=f"it is not a .spacy file{what}"))
    else:
        files = [path]
    count = 0
    for file_path in files:
        try:
            count += len(DocBin().from_disk(file_path))
        except Exception as error:  # zlib, msgpack or a permission error: a file spaCy cannot read
            raise ValueError(Errors.E062.format(path=path, which=which, reason=(
                f"{file_path} is not a DocBin spaCy can read ({type(error).__name__}: {error})"))) from None
    return count


def read_docbin_corpus(path: Path) -> List[Doc]:
    """The documents of a .spacy file or of every .spacy file under a
    directory (in path order, as spacy.Corpus.v1 reads them)."""
    files = sorted(path.rglob("*.spacy")) if path.is_dir() else [path]
    vocab = Vocab()
    return [doc for file_path in files for doc in DocBin().from_disk(file_path).get_docs(vocab)]


def draw_training_samples(train_path: Path, sizes: Sequence[Optional[int]], data_dir: Path, sample_seed: int
                          ) -> Dict[Optional[int], Path]:
    """One file per size below the whole set: the first N documents of one
    permutation of the corpus (numpy's default_rng(sample_seed)), so the
    samples are nested and the same for every variant and seed. Kept while
    the corpus, the seed and the sizes are the same (data/samples.json)."""
    paths: Dict[int, Path] = {size: data_dir / f"train-{size}.spacy" for size in sizes if size is not None}
    if not paths:
        return {None: train_path}
    if not train_path.exists() or not (train_path.is_dir() or train_path.suffix == ".spacy"):
        raise ValueError(Errors.E037.format(size=max(paths), path=train_path,
                                            reason="it is not a .spacy file or a directory of them"))
    record = {"source": str(train_path), "fingerprint": file_fingerprint(train_path), "sample_seed": sample_seed,
              "sizes": sorted(paths)}
    record_path = data_dir / SAMPLES
    if record_path.exists() and all(path.exists() for path in paths.values()):
        kept = json.loads(record_path.read_text(encoding="utf8"))
        if {key: kept.get(key) for key in record} == record:
            return _with_whole_set(paths, train_path, sizes)
    docs = read_docbin_corpus(train_path)
    n_documents = len(docs)
    too_large = [size for size in paths if size >= n_documents]
    if too_large:
        raise ValueError(Errors.E037.format(size=min(too_large), path=train_path,
                                            reason=f"it has {n_documents} documents"))
    order = numpy.random.default_rng(sample_seed).permutation(n_documents)
    for size, path in paths.items():
        sample = DocBin(store_user_data=True, docs=[docs[index] for index in order[:size]])
        write_atomically(path, sample.to_bytes())
    write_atomically(record_path, json.dumps({**record, "documents": n_documents,
                                              "order_head": order[:20].tolist()}, indent=2).encode("utf8"))
    return _with_whole_set(paths, train_path, sizes)


def _with_whole_set(paths: Dict[int, Path], train_path: Path, sizes: Sequence[Optional[int]]) -> Dict[Optional[int], Path]:
    """The samples' paths, and the whole set's under None where the sizes name it."""
    with_whole: Dict[Optional[int], Path] = {size: path for size, path in paths.items()}
    if None in sizes:
        with_whole[None] = train_path
    return with_whole


# score key prefix -> (what the dev Docs must have, the Doc check)
ANNOTATION_NEEDED: Dict[str, Any] = {
    "ents_": ("entities", lambda doc: doc.has_annotation("ENT_IOB")),
    "cats_": ("text categories (doc.cats)", lambda doc: bool(doc.cats)),
    "tag_": ("fine-grained tags (token.tag_)", lambda doc: doc.has_annotation("TAG")),
    "pos_": ("coarse-grained tags (token.pos_)", lambda doc: doc.has_annotation("POS")),
    "morph_": ("morphological features (token.morph)", lambda doc: doc.has_annotation("MORPH")),
    "lemma_": ("lemmas (token.lemma_)", lambda doc: doc.has_annotation("LEMMA")),
    "dep_": ("a dependency parse", lambda doc: doc.has_annotation("DEP")),
    "sents_": ("sentence boundaries", lambda doc: doc.has_annotation("SENT_START")),
}


def _reader(config: Dict[str, Any], which: str) -> Optional[str]:
    """The reader of [corpora.train] or [corpora.dev], spacy.Corpus.v1 when
    the config does not say (then `spacy train` fails on its own)."""
    block = config.get("corpora", {}).get(which)
    return block.get("@readers", CORPUS_READER) if isinstance(block, dict) else CORPUS_READER


def weighted_scores(config: Dict[str, Any]) -> List[str]:
    """The keys of the config's score weights that count (a weight other than 0 or null)."""
    return [key for key, value in config.get("training", {}).get("score_weights", {}).items() if value]


def check_dev_annotation(dev_path: Path, config: Dict[str, Any]) -> None:
    """[SLA-E031] for a dev set without documents; [SLA-E036] for one whose documents
    lack the annotation a weighted score needs (checked for spaCy's own
    score families on .spacy dev sets, before any training; others are
    checked after evaluation)."""
    if not dev_path.exists() or not (dev_path.is_dir() or dev_path.suffix == ".spacy"):
        return
    docs = read_docbin_corpus(dev_path)
    if not docs:
        raise ValueError(Errors.E031.format(path=dev_path))
    for key in weighted_scores(config):
        for prefix, (what, present) in ANNOTATION_NEEDED.items():
            if key.startswith(prefix) and not any(present(doc) for doc in docs):
                raise ValueError(Errors.E036.format(key=key, dev=dev_path, finding=f"no document has {what}"))
        if key.startswith("spans_"):
            spans_key = key[len("spans_"):].rsplit("_", 1)[0]
            if not any(spans_key in doc.spans for doc in docs):
                raise ValueError(Errors.E036.format(key=key, dev=dev_path,
                                                    finding=f"no document has doc.spans['{spans_key}']"))
