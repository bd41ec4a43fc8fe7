"""The plain fine-tune: the same pretrained model fine-tuned with transformers
+ torch alone, on the same converted .spacy data, for the same number of
steps with the same learning-rate schedule and seed as the spaCy runs.

It answers "does the spaCy pipeline train as well as plain fine-tuning?" and
is the reference row ("plain fine-tune") of the comparison table. Its record
has the format of `experiments.evaluate_runs`' records, with the variant
`plain`, so `compare` reads both alike.

- cola, sst2 (sequence classification): mean pooling of the last layer over
  the pieces of the sentence ([CLS] and [SEP] included, padding excluded), as
  all-MiniLM-L6-v2 was trained, or the [CLS] vector with `pooling="cls"`;
  dropout, then a linear layer; cross-entropy averaged over the batch.
- conll2003, fce (token classification): the first piece of each word, then
  dropout and a linear layer; cross-entropy over first pieces. CoNLL-2003
  predicts BIO tags of the doc's entities (an I- tag without a B- before it
  starts an entity, as conlleval reads it); FCE predicts `token.tag_` (c / i).
- Batches of `batch_size` documents, reshuffled every epoch; AdamW; the
  gradient norm over all parameters clipped at `grad_clip`; learning rate
  linear warm-up over `warmup_steps`, then linear decay to 0 at `max_steps`
  (thinc's `warmup_linear.v1`, which the configs use).
- Scores from the project's own scorers (`replication.scorers`) on
  spaCy Examples whose predicted Docs carry the fine-tune's predictions, so
  the metric is computed exactly as for the spaCy runs.

Three settings copy what a spaCy pipeline does instead, for the parity
measurements (docs/results.md): `head_init="zero"` (thinc's Softmax starts
at zero weights), `clip="per-parameter"` (thinc's Adam clips each parameter's
gradient on its own) and `loss_reduction="sum"` (spaCy sums the gradient
over the batch).
"""
import json
import math
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Sequence, Tuple

import numpy
from spacy.tokens import Doc, DocBin
from spacy.training import Example
from spacy.vocab import Vocab

from .scorers import entity_score, error_detection_score, textcat_score
from .tasks import TASKS
from .token_ner import bio_spans

VARIANT = "plain"
CONFIG_NAME = "plain fine-tune (replication.baseline)"
SEQUENCE_TASKS = ("cola", "sst2")
TOKEN_TASKS = ("conll2003", "fce")
POOLINGS = ("mean", "cls")
HEAD_INITS = ("normal", "zero")
CLIPS = ("global", "per-parameter")
LOSS_REDUCTIONS = ("mean", "sum")
IGNORE_LABEL = -100  # torch's cross_entropy default ignore_index: pieces that are not a word's first


@dataclass
class BaselineSettings:
    task: str
    transformer: str
    seed: int = 0
    max_steps: int = 800
    batch_size: int = 32  # documents per batch
    learn_rate: float = 5e-5
    warmup_steps: int = 80
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    dropout: float = 0.1  # before the output layer; the encoder keeps its own config's dropout
    pooling: str = "mean"  # sequence tasks: "mean" over pieces or "cls"
    max_length: int = 512  # pieces per document; longer documents are truncated (counted in the record)
    eval_batch_size: int = 64
    eval_frequency: int = 0  # also score the dev set every N steps (0: only at the end)
    head_init: str = "normal"  # "zero": as thinc's Softmax
    clip: str = "global"  # "per-parameter": as thinc's Adam
    loss_reduction: str = "mean"  # "sum": as spaCy's textcat gradient
    variant: str = VARIANT  # the record's variant: another name keeps a measurement apart from "plain"

    def validate(self) -> None:
        if self.task not in SEQUENCE_TASKS + TOKEN_TASKS:
            raise ValueError(f"The plain fine-tune supports {', '.join(SEQUENCE_TASKS + TOKEN_TASKS)}, not '{self.task}'")
        for name, allowed in (("pooling", POOLINGS), ("head_init", HEAD_INITS), ("clip", CLIPS),
                              ("loss_reduction", LOSS_REDUCTIONS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}, not '{getattr(self, name)}'")
        if self.max_steps < 1 or self.batch_size < 1:
            raise ValueError("max_steps and batch_size must be at least 1")


def warmup_linear(step: int, warmup_steps: int, total_steps: int) -> float:
    """The learning-rate factor of thinc's `warmup_linear.v1` at a 0-based
    step: step / warmup during warm-up, then linear decay to 0 at
    total_steps. spaCy uses step k's value for its (k+1)-th update, so the
    first update has rate 0, exactly as here."""
    if step < warmup_steps:
        return step / max(1, warmup_steps)
    return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))


def read_docs(path: Path) -> List[Doc]:
    return list(DocBin().from_disk(path).get_docs(Vocab()))


def cat_labels(docs: Sequence[Doc]) -> List[str]:
    return sorted({label for doc in docs for label in doc.cats})


def word_labels(task: str, doc: Doc) -> List[str]:
    """The per-word labels a token classifier learns: BIO entity tags
    (CoNLL-2003) or the token tags (FCE)."""
    if task == "conll2003":
        return [f"{token.ent_iob_}-{token.ent_type_}" if token.ent_iob_ in ("B", "I") else "O" for token in doc]
    return [token.tag_ for token in doc]


def _batches(items: Sequence[Any], size: int, rng: random.Random) -> Iterator[List[Any]]:
    """Endless batches of `size` items, reshuffled every epoch."""
    order = list(range(len(items)))
    while True:
        rng.shuffle(order)
        for start in range(0, len(order), size):
            yield [items[i] for i in order[start:start + size]]


class _Encoded:
    """One document as the model sees it: piece ids, and for token tasks the
    label of each word's first piece (IGNORE_LABEL elsewhere)."""

    def __init__(self, doc: Doc, input_ids: List[int], first_pieces: List[int], label: Any, truncated: bool):
        self.doc = doc
        self.input_ids = input_ids
        self.first_pieces = first_pieces  # piece index of each word's first piece; -1: cut off by truncation
        self.label = label
        self.truncated = truncated


def encode(docs: Sequence[Doc], tokenizer: Any, settings: BaselineSettings, labels: List[str]) -> List[_Encoded]:
    index = {label: i for i, label in enumerate(labels)}
    encoded = []
    for doc in docs:
        words = [token.text for token in doc]
        pieces = tokenizer(words, is_split_into_words=True, truncation=True, max_length=settings.max_length)
        word_ids = pieces.word_ids()
        first_pieces = [-1] * len(words)
        for piece, word in enumerate(word_ids):
            if word is not None and first_pieces[word] == -1:
                first_pieces[word] = piece
        # a word without pieces (e.g. a lone control character) that is not past the cut is not "truncated"
        last_word = max((w for w in word_ids if w is not None), default=-1)
        truncated = last_word < len(words) - 1 and len(pieces["input_ids"]) >= settings.max_length
        if settings.task in SEQUENCE_TASKS:
            label: Any = index[max(doc.cats.items(), key=lambda item: item[1])[0]]
        else:
            label = [index.get(tag, IGNORE_LABEL) for tag in word_labels(settings.task, doc)]
        encoded.append(_Encoded(doc, list(pieces["input_ids"]), first_pieces, label, truncated))
    return encoded


def _collate(batch: Sequence[_Encoded], pad_id: int, task: str, torch: Any) -> Dict[str, Any]:
    width = max(len(item.input_ids) for item in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for row, item in enumerate(batch):
        ids[row, : len(item.input_ids)] = torch.tensor(item.input_ids)
        mask[row, : len(item.input_ids)] = 1
    tensors = {"input_ids": ids, "attention_mask": mask}
    if task in SEQUENCE_TASKS:
        tensors["labels"] = torch.tensor([item.label for item in batch], dtype=torch.long)
    else:
        piece_labels = torch.full((len(batch), width), IGNORE_LABEL, dtype=torch.long)
        for row, item in enumerate(batch):
            for word, piece in enumerate(item.first_pieces):
                if piece >= 0:
                    piece_labels[row, piece] = item.label[word]
        tensors["labels"] = piece_labels
    return tensors


def _build_model(settings: BaselineSettings, n_labels: int) -> Any:
    import torch
    from transformers import AutoModel

    class PlainClassifier(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = AutoModel.from_pretrained(settings.transformer)
            self.dropout = torch.nn.Dropout(settings.dropout)
            self.output = torch.nn.Linear(self.encoder.config.hidden_size, n_labels)
            if settings.head_init == "zero":
                torch.nn.init.zeros_(self.output.weight)
            else:  # BERT's own initialisation of new layers
                torch.nn.init.normal_(self.output.weight, std=getattr(self.encoder.config, "initializer_range", 0.02))
            torch.nn.init.zeros_(self.output.bias)

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            if settings.task in TOKEN_TASKS:
                return self.output(self.dropout(hidden))
            if settings.pooling == "cls":
                pooled = hidden[:, 0]
            else:
                weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)
            return self.output(self.dropout(pooled))

    return PlainClassifier()


def _predict(model: Any, encoded: Sequence[_Encoded], labels: List[str], settings: BaselineSettings,
             pad_id: int) -> List[Doc]:
    """Predicted copies of the dev Docs: cats, entities or tags."""
    import torch

    model.eval()
    predicted = []
    with torch.no_grad():
        for start in range(0, len(encoded), settings.eval_batch_size):
            batch = encoded[start:start + settings.eval_batch_size]
            tensors = _collate(batch, pad_id, settings.task, torch)
            logits = model(tensors["input_ids"], tensors["attention_mask"])
            for row, item in enumerate(batch):
                doc = Doc(item.doc.vocab, words=[t.text for t in item.doc],
                          spaces=[bool(t.whitespace_) for t in item.doc])
                if settings.task in SEQUENCE_TASKS:
                    probabilities = torch.softmax(logits[row], dim=-1).tolist()
                    doc.cats = dict(zip(labels, probabilities))
                else:
                    # a word cut off by truncation gets the "nothing" label (O / c)
                    fallback = "O" if settings.task == "conll2003" else "c"
                    best = logits[row].argmax(-1).tolist()
                    tags = [labels[best[piece]] if piece >= 0 else fallback for piece in item.first_pieces]
                    if settings.task == "conll2003":
                        doc.ents = bio_spans(doc, tags)
                    else:
                        for token, tag in zip(doc, tags):
                            token.tag_ = tag
                predicted.append(doc)
    model.train()
    return predicted


def score(task: str, predicted: Sequence[Doc], reference: Sequence[Doc], labels: List[str]) -> Dict[str, Any]:
    """The project's scorer of the task on (predicted, reference) pairs."""
    examples = [Example(p, r) for p, r in zip(predicted, reference)]
    if task in SEQUENCE_TASKS:
        return textcat_score(examples, labels=labels)
    if task == "conll2003":
        return entity_score(examples)
    return error_detection_score(examples, error_tag="i", beta=0.5)


def _clip_per_parameter(parameters: Sequence[Any], threshold: float) -> None:
    """thinc's Adam: each parameter's gradient scaled to norm <= threshold on its own."""
    for parameter in parameters:
        if parameter.grad is not None:
            norm = float(parameter.grad.norm())
            if norm >= threshold:
                parameter.grad.mul_(threshold / norm)


def fine_tune(
    settings: BaselineSettings,
    train_path: Path,
    dev_path: Path,
    log: Callable[[str], None] = print,
) -> Dict[str, Any]:
    """Fine-tune, score the dev set, and return the record (without the
    record's file: see `write_record`)."""
    import torch
    from transformers import AutoTokenizer

    settings.validate()
    random.seed(settings.seed)
    numpy.random.seed(settings.seed)
    torch.manual_seed(settings.seed)
    train_docs, dev_docs = read_docs(train_path), read_docs(dev_path)
    if settings.task in SEQUENCE_TASKS:
        labels = cat_labels(train_docs)
    else:
        labels = sorted({tag for doc in train_docs for tag in word_labels(settings.task, doc)})
    tokenizer = AutoTokenizer.from_pretrained(settings.transformer, use_fast=True)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    train, dev = encode(train_docs, tokenizer, settings, labels), encode(dev_docs, tokenizer, settings, labels)
    model = _build_model(settings, len(labels))
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learn_rate, betas=(0.9, 0.999), eps=1e-8,
                                  weight_decay=settings.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: warmup_linear(step, settings.warmup_steps, settings.max_steps))
    parameters = [p for p in model.parameters() if p.requires_grad]
    batches = _batches(train, settings.batch_size, random.Random(settings.seed))
    metric = TASKS[settings.task].metric
    curve: List[Dict[str, Any]] = []
    started = time.time()
    losses: List[float] = []
    for step in range(1, settings.max_steps + 1):
        tensors = _collate(next(batches), pad_id, settings.task, torch)
        logits = model(tensors["input_ids"], tensors["attention_mask"])
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, len(labels)), tensors["labels"].reshape(-1), reduction=settings.loss_reduction)
        optimizer.zero_grad()
        loss.backward()
        if settings.clip == "global":
            torch.nn.utils.clip_grad_norm_(parameters, settings.grad_clip)
        else:
            _clip_per_parameter(parameters, settings.grad_clip)
        optimizer.step()
        scheduler.step()
        losses.append(float(loss.detach()))
        if settings.eval_frequency and step % settings.eval_frequency == 0 and step < settings.max_steps:
            dev_scores = score(settings.task, _predict(model, dev, labels, settings, pad_id), dev_docs, labels)
            curve.append({"step": step, "score": dev_scores[metric], "train_loss": _mean(losses)})
            log(f"step {step}: train loss {_mean(losses):.4f}, dev {metric} {dev_scores[metric]}")
            losses = []
    train_seconds = round(time.time() - started, 1)
    scores = score(settings.task, _predict(model, dev, labels, settings, pad_id), dev_docs, labels)
    curve.append({"step": settings.max_steps, "score": scores[metric], "train_loss": _mean(losses)})
    log(f"step {settings.max_steps}: dev {metric} {scores[metric]}")
    return make_record(settings, train_path, dev_path, scores, train_seconds, curve,
                       truncated=sum(item.truncated for item in train + dev), labels=labels)


def _mean(values: Sequence[float]) -> float:
    return float(numpy.mean(values)) if len(values) else math.nan


def make_record(
    settings: BaselineSettings,
    train_path: Path,
    dev_path: Path,
    scores: Dict[str, Any],
    train_seconds: float,
    curve: Sequence[Dict[str, Any]],
    truncated: int = 0,
    labels: Sequence[str] = (),
) -> Dict[str, Any]:
    """A record as `experiments.evaluate_runs` writes it (the keys `compare`
    reads: task, variant, seed, metric, score, settings, overrides), with the
    settings under spaCy's config names where they mean the same thing."""
    metric = TASKS[settings.task].metric
    options = asdict(settings)
    record_settings = {
        "paths.train": str(train_path),
        "paths.dev": str(dev_path),
        "paths.transformer": settings.transformer,
        "system.seed": settings.seed,
        "training.max_steps": settings.max_steps,
        "training.optimizer.learn_rate.initial_rate": settings.learn_rate,
        "training.optimizer.learn_rate.warmup_steps": settings.warmup_steps,
    }
    baseline_options = {f"baseline.{k}": v for k, v in options.items()
                        if k not in ("task", "transformer", "seed", "max_steps", "learn_rate", "warmup_steps", "variant")}
    return {
        "task": settings.task,
        "variant": settings.variant,
        "seed": settings.seed,
        "config": CONFIG_NAME,
        "settings": {**record_settings, **baseline_options},
        "overrides": {},
        "gpu_id": -1,
        "train_seconds": train_seconds,
        "metric": metric,
        "score": scores[metric],
        "scores": _json_safe(scores),
        "evaluated_on": str(dev_path),
        "model": None,  # the fine-tuned weights are not kept
        "labels": list(labels),
        "truncated_documents": truncated,
        "curve": list(curve),
    }


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, (numpy.floating, numpy.integer)):
        return value.item()
    return value


def record_path(results_dir: Path, task: str, seed: int, variant: str = VARIANT) -> Path:
    """results_dir/TASK/VARIANT/seedN.json, where `compare` finds it."""
    return results_dir / task / variant / f"seed{seed}.json"


def write_record(record: Dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(record, indent=2) + "\n", encoding="utf8")
    temporary.replace(path)  # a reader never sees half a record
    return path


def run_baseline(settings: BaselineSettings, corpus_dir: Path, results_dir: Path,
                 log: Callable[[str], None] = print) -> Tuple[Dict[str, Any], Path]:
    """Fine-tune on corpus_dir/{train,dev}.spacy and write the record to
    results_dir/TASK/plain/seedN.json."""
    record = fine_tune(settings, corpus_dir / "train.spacy", corpus_dir / "dev.spacy", log=log)
    return record, write_record(record, record_path(results_dir, settings.task, settings.seed, settings.variant))
