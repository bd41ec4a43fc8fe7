"""`python -m replication bootstrap`: variants of a task compared over resampled dev
documents, from the same evaluation and statistics as `spacy sla ab`
(ab.evaluate_saved_model, resampling.DrawValues), on the runs of `spacy sla
train` / `experiment` (TRAINING_DIR/VARIANT/seedN).

A run's evaluation (scores and per-document statistics of its last model on
the dev set) is kept in the run directory (dev-evaluation.json), so a second
comparison does not run the models again.
"""
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from spacy_sla.tools.ab.intervals import paired_difference
from spacy_sla.tools.ab.mask_strata import kept_strata, rows_by_mask
from spacy_sla.tools.ab.resampling import DrawValues, bootstrap_interval
from spacy_sla.tools.ab.runs import EVALUATION, RUN_SETTINGS, evaluate_saved_model
from spacy_sla.tools.ab.tables import bootstrap_table, strata_table  # noqa: F401  (the CLI's)

from .errors import Errors
from .experiments import CODE, finished_runs
from .tasks import TASKS

DRAW_SEED = 0  # the draws of every bootstrap comparison (the same documents in every draw for every model)


def _model_dir(run_dir: Path) -> Path:
    return run_dir / "model-last"


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
    by_mask: bool = False,
) -> Dict[str, Any]:
    """Each variant against the reference over the seeds both were trained
    with (or the given seeds): the per-seed differences of the task's metric
    with their t-interval over seeds (as `compare`), and the paired bootstrap
    over the dev documents of their mean. by_mask: also the same on the dev
    documents that the variant's local mask restricts and on those where it
    hides nothing, and the difference between the two (mask_strata.py)."""
    metric = TASKS[task].metric
    if resamples < 1:
        raise ValueError(f"The bootstrap needs at least 1 draw of the documents; got {resamples}")
    chosen_seeds = {
        variant: list(seeds) if seeds else sorted(set(_seeds_of(training_dir, variant)) & set(_seeds_of(training_dir, reference)))
        for variant in variants
    }
    evaluations: Dict[Any, Dict[str, Any]] = {}
    for variant in variants:
        for name in (reference, variant):
            for seed in chosen_seeds[variant]:
                if (name, seed) not in evaluations:
                    run_dir = _finished_run(training_dir, name, seed)
                    evaluations[(name, seed)] = evaluate_saved_model(
                        _model_dir(run_dir), corpus_dir / "dev.spacy", run_dir / EVALUATION, gpu_id=gpu_id,
                        random_seed=DRAW_SEED, log_path=run_dir / "evaluate.log", code_path=CODE)
    draws = DrawValues(evaluations, resamples, DRAW_SEED, keys=[metric])
    rows = []
    for variant in variants:
        chosen = chosen_seeds[variant]
        scores = {name: {seed: evaluations[(name, seed)]["scores"][metric] for seed in chosen}
                  for name in (reference, variant)}
        over_seeds = paired_difference(scores[variant], scores[reference])
        rows.append({
            "variant": variant, "reference": reference, "seeds": chosen, "scores": scores,
            "documents": draws.n_documents if chosen else 0,
            "over_seeds": over_seeds,
            "over_documents": {**bootstrap_interval(draws.difference(variant, reference, chosen, metric),
                                                    over_seeds["mean"], resamples), "seeds": chosen, "n": len(chosen)},
        })
    comparison = {"task": task, "metric": metric, "dev": str(corpus_dir / "dev.spacy"), "resamples": resamples,
                  "rows": rows}
    if by_mask:
        comparison["by_mask"] = [
            row for variant in variants
            for row in rows_by_mask(variant, reference, chosen_seeds[variant], evaluations, metric, resamples,
                                    lambda seed, name=variant: _strata(training_dir, corpus_dir, name, seed), DRAW_SEED)
        ]
    return comparison


def _strata(training_dir: Path, corpus_dir: Path, variant: str, seed: int) -> List[bool]:
    run_dir = _finished_run(training_dir, variant, seed)
    return kept_strata(_model_dir(run_dir), corpus_dir / "dev.spacy", run_dir)
