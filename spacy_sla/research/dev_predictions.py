"""`spacy sla bootstrap`: variants of a task compared over resampled dev
documents, from the same evaluation and statistics as `spacy sla ab`
(ab.evaluate_saved_model, resampling.DrawValues), on the runs of `spacy sla
train` / `experiment` (TRAINING_DIR/VARIANT/seedN).

A run's evaluation (scores and per-document statistics of its last model on
the dev set) is kept in the run directory (dev-evaluation.json), so a second
comparison does not run the models again.
"""
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from ..errors import Errors
from .ab import EVALUATION, evaluate_saved_model
from .experiments import RUN_SETTINGS, finished_runs
from .intervals import paired_difference
from .mask_strata import GAP, STRATUM_LABELS, kept_strata, rows_by_mask
from .resampling import DrawValues, bootstrap_interval
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
                        random_seed=DRAW_SEED, log_path=run_dir / "evaluate.log")
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


def _signed(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{100 * value:+.2f}"


def _interval(result: Dict[str, Any]) -> str:
    if result["low"] is None:
        return "n/a"
    return f"[{_signed(result['low'])}, {_signed(result['high'])}]"


_DIFFERENCE_HEADER = ("seeds | per seed Δ (×100) | mean Δ | over seeds: 95% t-interval | verdict "
                      "| over documents: 95% bootstrap interval | p | verdict |")


def _difference_cells(row: Dict[str, Any]) -> str:
    """A row's seeds, per-seed differences, mean, both intervals, p and verdicts as table cells."""
    seeds, documents = row["over_seeds"], row["over_documents"]
    per_seed = ", ".join(_signed(value) for value in seeds["differences"])
    p_value = "n/a" if documents["p_value"] is None else f"{documents['p_value']:.3f}"
    return (f"{len(row['seeds'])} | {per_seed} | {_signed(seeds['mean'])} | {_interval(seeds)} | {seeds['verdict']} "
            f"| {_interval(documents)} | {p_value} | {documents['verdict']} |")


def bootstrap_table(comparison: Dict[str, Any]) -> str:
    """The comparison as a markdown table, differences ×100."""
    lines = ["| comparison | " + _DIFFERENCE_HEADER, "|---" * 9 + "|"]
    for row in comparison["rows"]:
        lines.append(f"| {row['variant']} − {row['reference']} | " + _difference_cells(row))
    return "\n".join(lines)


def strata_table(rows: Sequence[Dict[str, Any]]) -> str:
    """The rows of `--by-mask` (mask_strata.rows_by_mask) as a markdown
    table, differences ×100. A part without documents (whole documents in
    128-token spans: every one is restricted) has no row, nor has its
    variant's restricted − unrestricted; a line under the table says so."""
    lines = ["| comparison | dev documents | " + _DIFFERENCE_HEADER, "|---" * 10 + "|"]
    empty = {(row["variant"], row["reference"]): row["stratum"] for row in rows
             if row["stratum"] in STRATUM_LABELS and not row["documents"]}
    for row in rows:
        if not row["documents"] or (row["stratum"] == GAP and (row["variant"], row["reference"]) in empty):
            continue
        if row["stratum"] in STRATUM_LABELS:
            what = f"{row['variant']} − {row['reference']}, {STRATUM_LABELS[row['stratum']]}"
        else:
            what = f"({row['variant']} − {row['reference']}): restricted − unrestricted"
        lines.append(f"| {what} | {row['documents']} | " + _difference_cells(row))
    notes = [f"- {variant}: no dev document where {STRATUM_LABELS[stratum]}, so no comparison of the two parts"
             for (variant, _), stratum in empty.items()]
    return "\n".join(lines + ([""] + notes if notes else []))
