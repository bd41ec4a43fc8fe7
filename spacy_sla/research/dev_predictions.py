"""Per-document counts of trained runs on the dev set, and the comparison of
variants that resamples the dev documents (`spacy sla bootstrap`).

A run's counts come from its last model's predictions on dev.spacy (the data
and model `spacy sla evaluate` scores) and are kept in the run directory, so
a second comparison does not run the models again.
"""
import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy
import spacy
from spacy.training import Corpus, Example

from ..errors import Errors
from ..training.scorers import _cat_labels
from .experiments import RUN_SETTINGS, _file_fingerprint, finished_runs
from .intervals import paired_difference
from .resampling import METRIC_FROM_COUNTS, example_statistics, metric_from_counts, paired_bootstrap
from .tasks import TASKS

DEV_COUNTS = "dev-counts.json"  # beside run.json: the last model's per-document counts on the dev set


def _model_dir(run_dir: Path) -> Path:
    return run_dir / "model-last"


def run_counts(task: str, run_dir: Path, corpus_dir: Path, gpu_id: int = -1) -> numpy.ndarray:
    """The per-document counts (resampling.example_statistics) of a run's
    last model on corpus_dir/dev.spacy, computed once and then read from
    the run's dev-counts.json while the dev file and the model are
    unchanged."""
    metric = TASKS[task].metric
    dev_path = corpus_dir / "dev.spacy"
    model_dir = _model_dir(run_dir)
    key = {"metric": metric, "dev": _file_fingerprint(dev_path), "model": _file_fingerprint(model_dir / "meta.json")}
    cache = run_dir / DEV_COUNTS
    if cache.exists():
        kept = json.loads(cache.read_text(encoding="utf8"))
        if {name: kept.get(name) for name in key} == key:
            return numpy.array(kept["counts"], dtype=numpy.int64)
    if gpu_id >= 0:
        spacy.require_gpu(gpu_id)
    nlp = spacy.load(model_dir)
    examples = list(Corpus(str(dev_path))(nlp))
    predicted = nlp.pipe((example.predicted for example in examples), batch_size=64)
    scored = [Example(doc, example.reference) for doc, example in zip(predicted, examples)]
    component = TASKS[task].component
    labels = nlp.get_pipe(component).labels if component in nlp.pipe_names else ()
    # Without a text classifier's own labels, those the scorer itself would infer.
    counts = example_statistics(scored, metric, labels or _cat_labels(scored))
    cache.write_text(json.dumps({**key, "counts": counts.tolist()}), encoding="utf8")
    return counts


def _finished_run(training_dir: Path, variant: str, seed: int) -> Path:
    run_dir = training_dir / variant / f"seed{seed}"
    for needed in (run_dir / RUN_SETTINGS, _model_dir(run_dir) / "meta.json"):
        if not needed.exists():
            raise ValueError(Errors.E020.format(variant=variant, seed=seed, training_dir=training_dir, missing=needed))
    return run_dir


def _seeds_of(training_dir: Path, variant: str) -> List[int]:
    return [int(run_dir.name[len("seed"):]) for run_dir in finished_runs(training_dir) if run_dir.parent.name == variant]


def bootstrap_comparison(
    task: str,
    corpus_dir: Path,
    training_dir: Path,
    variants: Sequence[str],
    reference: str,
    seeds: Optional[Sequence[int]] = None,
    resamples: int = 10000,
    gpu_id: int = -1,
) -> Dict[str, Any]:
    """Each variant against the reference over the seeds both were trained
    with (or the given seeds): the per-seed differences with their t-interval
    over seeds (as `compare`), and the paired bootstrap over the dev
    documents of their mean (resampling.paired_bootstrap)."""
    metric = TASKS[task].metric
    if resamples < 1:
        raise ValueError(f"The bootstrap needs at least 1 draw of the documents; got {resamples}")
    if metric not in METRIC_FROM_COUNTS:
        raise ValueError(Errors.E021.format(task=task, metric=metric, supported=", ".join(METRIC_FROM_COUNTS)))
    counts: Dict[str, Dict[int, numpy.ndarray]] = {}
    rows = []
    for variant in variants:
        chosen = list(seeds) if seeds else sorted(set(_seeds_of(training_dir, variant)) & set(_seeds_of(training_dir, reference)))
        for name in (reference, variant):
            for seed in chosen:
                if seed not in counts.setdefault(name, {}):
                    counts[name][seed] = run_counts(task, _finished_run(training_dir, name, seed), corpus_dir, gpu_id)
        scores = {name: {seed: metric_from_counts(metric, counts[name][seed].sum(axis=0)) for seed in chosen}
                  for name in (reference, variant)}
        rows.append({
            "variant": variant, "reference": reference, "seeds": chosen, "scores": scores,
            "documents": len(counts[reference][chosen[0]]) if chosen else 0,
            "over_seeds": paired_difference(scores[variant], scores[reference]),
            "over_documents": paired_bootstrap({s: counts[variant][s] for s in chosen},
                                               {s: counts[reference][s] for s in chosen}, metric, resamples),
        })
    return {"task": task, "metric": metric, "dev": str(corpus_dir / "dev.spacy"), "resamples": resamples, "rows": rows}


def _signed(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{100 * value:+.2f}"


def _interval(result: Dict[str, Any]) -> str:
    if result["low"] is None:
        return "n/a"
    return f"[{_signed(result['low'])}, {_signed(result['high'])}]"


def bootstrap_table(comparison: Dict[str, Any]) -> str:
    """The comparison as a markdown table, differences ×100."""
    lines = [
        "| comparison | seeds | per seed Δ (×100) | mean Δ | over seeds: 95% t-interval | verdict "
        "| over documents: 95% bootstrap interval | p | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in comparison["rows"]:
        seeds, documents = row["over_seeds"], row["over_documents"]
        per_seed = ", ".join(_signed(value) for value in seeds["differences"])
        p_value = "n/a" if documents["p_value"] is None else f"{documents['p_value']:.3f}"
        lines.append(
            f"| {row['variant']} − {row['reference']} | {len(row['seeds'])} | {per_seed} | {_signed(seeds['mean'])} "
            f"| {_interval(seeds)} | {seeds['verdict']} | {_interval(documents)} | {p_value} | {documents['verdict']} |"
        )
    return "\n".join(lines)
