"""One trained pipeline on a dev set, as its own training scores it
(`spacy train`: the examples of the config's `[training] dev_corpus` reader
with `--paths.dev`) or as `spacy evaluate` does (a plain spaCy Corpus over
the dev file), plus what a comparison needs besides the scores: the
prediction speed and, for every score, its per-document statistics for the
bootstrap over documents (score_statistics.py).

It runs as its own process (`python -m spacy_sla.tools.ab.evaluation_process
MODEL DEV OUTPUT`, evaluation_process.py), like `spacy evaluate`, so that
every model is scored with fresh memory, and on a Ray worker as well as
here. When it fails, it writes beside OUTPUT what it was doing
(failure_path), for the message that names the run (failures.py).
"""
import time
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy
from spacy import util
from spacy.language import Language
from spacy.scorer import Scorer
from spacy.training import Corpus, Example
from spacy.util import dot_to_object, registry
from thinc.api import fix_random_seed, require_gpu

from .counts import component_statistics
from .errors import Errors
from .statistics import bootstrap_weights, matches

EVALUATION_VERSION = 1  # bump when the file's content changes meaning: older files are evaluated again
CONFIG_CORPUS, PLAIN_CORPUS = "config", "plain"  # how the dev examples are read: as `spacy train` / `spacy evaluate`
EVAL_CORPORA = (CONFIG_CORPUS, PLAIN_CORPUS)
# what the evaluation was doing when it failed, for failures.py
LOAD, READ, SCORE, STATISTICS = "load the model", "read the dev examples", "nlp.evaluate", "per-document statistics"


def first_line(error: BaseException) -> str:
    """The first non-empty line of an error's message, without its final stop."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return (lines[0] if lines else type(error).__name__).rstrip(".")


def failure_path(output: Path) -> Path:
    """Where a failed evaluation into `output` records what it was doing."""
    return output.with_name(output.stem + ".failed.json")


def config_dev_corpus(nlp: Language) -> Tuple[str, Optional[str]]:
    """The dot name of the pipeline's `[training] dev_corpus` (spaCy fills
    it in every saved config) and the name of its registered reader."""
    dot_name = str(nlp.config["training"].get("dev_corpus", "corpora.dev"))
    try:
        block = dot_to_object(nlp.config, dot_name)
    except KeyError:  # the config names no such section: reading it fails as in `spacy train`
        return dot_name, None
    return dot_name, block.get("@readers") if isinstance(block, dict) else None


def dev_examples(nlp: Language, dev_path: Path, corpus: str = CONFIG_CORPUS) -> Tuple[List[Example], Dict[str, Any]]:
    """The dev examples and how they were read. CONFIG_CORPUS: as `spacy
    train` reads them for its evaluations (the pipeline's own config with
    `--paths.dev` set, interpolated, its `[training] dev_corpus` resolved by
    spaCy's registry and called with the pipeline), so a custom reader (gold
    entities on the predicted Docs, filtered or augmented examples, another
    file format) gives the examples training scored on. PLAIN_CORPUS: as
    `spacy evaluate` reads them (spaCy's Corpus over the dev file)."""
    dot_name, reader = config_dev_corpus(nlp)
    how = {"mode": corpus, "dev_corpus": dot_name, "reader": reader}
    if corpus == PLAIN_CORPUS:
        return list(Corpus(dev_path)(nlp)), how
    config = nlp.config.copy()
    if "dev" in config.get("paths", {}):
        config["paths"]["dev"] = str(dev_path)
    # the reader's block resolved by spaCy's registry, as spacy.training.loop.train resolves its corpora
    # (resolve_dot_names), but alone: the training corpus's path may be null here; the [training] block
    # is not resolved either, since its logger would create folders
    read = registry.resolve({"reader": dot_to_object(config.interpolate(), dot_name)})["reader"]
    return list(read(nlp)), how


def numeric_scores(scores: Dict[str, Any]) -> Dict[str, float]:
    return {key: float(value) for key, value in scores.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)}


def scorer_kwargs(component: Any) -> Dict[str, Any]:
    """What Pipe.score passes to a component's scorer: its cfg, with its labels."""
    kwargs: Dict[str, Any] = {}
    if isinstance(getattr(component, "cfg", None), dict):
        kwargs.update(component.cfg)
    if hasattr(component, "labels"):
        kwargs["labels"] = component.labels
    return kwargs


def _recomputed_draws(
    component: Any, examples: Sequence[Example], keys: Sequence[str], weights: numpy.ndarray
) -> Dict[str, List[Optional[float]]]:
    """The component's own scorer on every draw (each document repeated as
    often as drawn): exact for any score, and slow, so only for scores that
    no per-document statistic covers."""
    values: Dict[str, List[Optional[float]]] = {key: [] for key in keys}
    for draw in weights:
        drawn = [examples[int(index)] for index in numpy.repeat(numpy.arange(len(examples)), draw)]
        scores = component.score(drawn)
        for key in keys:
            value = scores.get(key)
            values[key].append(float(value) if isinstance(value, (int, float)) else None)
    return values


class _KeepingScorer(Scorer):
    """spaCy's Scorer, keeping the examples it scored: nlp.evaluate predicts
    on copies of the examples and hands those to its scorer."""

    examples: List[Example] = []

    def score(self, examples: Iterable[Example], *, per_component: bool = False) -> Dict[str, Any]:
        self.examples = list(examples)
        return super().score(self.examples, per_component=per_component)


def score_statistics(
    nlp: Language, examples: Sequence[Example], resamples: int, random_seed: int
) -> Dict[str, Dict[str, Any]]:
    """For every numeric score of every component that is trained (the
    frozen ones are the same model in every run and are left out): the
    component, and either a per-document statistic that gives the scorer's
    full-set value (checked here) or the score recomputed on each of the
    `resamples` draws of bootstrap_weights(len(examples), resamples,
    random_seed). A score given by several components is the last one's,
    as in nlp.evaluate."""
    frozen = set(nlp.config["training"].get("frozen_components", []))
    result: Dict[str, Dict[str, Any]] = {}
    weights: Optional[numpy.ndarray] = None
    for name, component in nlp.pipeline:
        if name in frozen or not hasattr(component, "score"):
            continue
        reported = numeric_scores(component.score(examples))
        if not reported:
            continue
        scorer_config = nlp.config["components"].get(name, {}).get("scorer")
        statistics = component_statistics(scorer_config, examples, scorer_kwargs(component))
        uncovered = []
        for key, value in reported.items():
            statistic = statistics.get(key)
            if statistic is not None and matches(statistic, value):
                result[key] = {"component": name, "method": statistic.kind, "statistic": statistic.to_json()}
            else:
                uncovered.append(key)
        if uncovered:
            if weights is None:
                weights = bootstrap_weights(len(examples), resamples, random_seed)
            for key, values in _recomputed_draws(component, examples, uncovered, weights).items():
                result[key] = {"component": name, "method": "recomputed", "resamples": resamples,
                               "random_seed": random_seed, "draws": values, "value": reported[key]}
    return result


class EvaluationStep:
    """What the evaluation is doing, kept for the record of a failure."""

    def __init__(self) -> None:
        self.name = LOAD
        self.corpus: Dict[str, Any] = {}


def evaluate_model(
    model_dir: Path, dev_path: Path, *, gpu_id: int = -1, resamples: int = 10000, random_seed: int = 0,
    corpus: str = CONFIG_CORPUS, step: Optional[EvaluationStep] = None,
) -> Dict[str, Any]:
    """The model's scores on the dev examples (dev_examples; then as `spacy
    evaluate` scores: fixed random seed, nlp.evaluate), the words per second
    of the prediction nlp.evaluate timed, and the per-document statistics."""
    step = step or EvaluationStep()
    fix_random_seed()
    if gpu_id >= 0:
        require_gpu(gpu_id)
    nlp = util.load_model(model_dir)
    step.name, step.corpus["dev_corpus"], step.corpus["reader"] = READ, *config_dev_corpus(nlp)
    examples, how = dev_examples(nlp, dev_path, corpus)
    if not examples:
        raise ValueError(Errors.E031.format(path=dev_path))
    scorer = _KeepingScorer(nlp=nlp)  # what nlp.evaluate makes by default, keeping the predictions
    step.name = SCORE
    started = time.perf_counter()
    scores = nlp.evaluate(examples, scorer=scorer)
    seconds = time.perf_counter() - started
    step.name = STATISTICS
    return {
        "version": EVALUATION_VERSION,
        "corpus": how,
        "scores": scores,
        "words": sum(len(example.predicted) for example in scorer.examples),
        "documents": len(examples),
        "words_per_second": scores.get("speed"),
        "evaluate_seconds": seconds,
        "score_weights": {key: value for key, value in nlp.config["training"]["score_weights"].items() if value},
        "statistics": score_statistics(nlp, scorer.examples, resamples, random_seed),
    }
