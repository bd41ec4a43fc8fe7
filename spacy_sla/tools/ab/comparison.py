"""The report of `spacy sla ab`: for every training size, each variant
against the reference (vanilla) on the config's main score and on every
other score the trained components report.

Per score: mean and standard deviation over seeds and the per-seed scores;
the paired difference to the reference with its 95% t-interval over seeds;
a paired bootstrap over the dev documents (one draw shared by every seed and
variant) of the mean difference; a verdict with Holm's adjustment; and how
many seeds would make a difference of the observed size show. Beside them
the cost measured in the same runs and the dev curves; with by_mask, the
main score's difference on the dev documents each variant's mask restricts
and on those where it hides nothing (mask_strata.py; not adjusted, a
question about where a difference is made, not a second verdict). With
two or more variants besides vanilla, each pair of them on the main score
(SLA − window: what the parse adds to a positional neighbourhood; not
adjusted either).

These are the report's numbers (build_report); report_markdown.py and
report_figure.py show them, report.py writes them.
"""
import json
import math
import statistics
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from spacy.util import load_config

from spacy_sla.tools.ab.plan import AbPlan
from spacy_sla.tools.ab.runs import TRAIN_LOG, AbRun, finished_settings, logged_evaluations, size_label, training_curve

from ..init_config.variant_blocks import REFERENCE
from .budget import config_budget_warnings, rising_curve_warnings
from .errors import Errors
from .intervals import (
    AB_MIN_SEEDS,
    ALPHA,
    BETTER,
    NOT_SHOWN,
    WORSE,
    holm_adjusted,
    paired_difference,
    t_quantile,
    too_few,
)
from .mask_strata import NoLocalMaskError, kept_strata, rows_by_mask
from .resampling import DrawValues, bootstrap_interval
from .runs import RUN_CONFIG
from .self_check import check_runs, logged_score, self_check_warnings

MAIN = "score"  # the weighted main score, as `spacy train` computes it
EXCLUDED = ("speed", "token_acc", "token_p", "token_r", "token_f")  # the same tokenizer in every run


def _read_json(path: Path) -> Dict[str, Any]:
    return json.loads(path.read_text(encoding="utf8"))


def main_score(scores: Dict[str, Any], weights: Dict[str, float]) -> float:
    """spaCy's training score: the weighted sum of the scores that are not None."""
    return sum(float(scores[key]) * weight for key, weight in weights.items()
               if isinstance(scores.get(key), (int, float)))


def seeds_needed(differences: Sequence[float], family_size: int = 1, limit: int = 100) -> Optional[int]:
    """The smallest number of seeds n (at least AB_MIN_SEEDS) whose t-test,
    at the observed mean and spread of the per-seed differences, would
    reject 0 after Holm's adjustment over family_size comparisons whatever
    their p-values (at alpha / family_size, Holm's strictest step), so that
    n at or below the seeds run means the seed test shows the difference;
    None when the differences have no spread to go by (fewer than two, or
    all equal) or the mean is 0; limit + 1 beyond the limit."""
    if len(differences) < 2:
        return None
    mean, sd = statistics.mean(differences), statistics.stdev(differences)
    if mean == 0 or sd == 0:
        return None
    alpha = ALPHA / max(1, family_size)
    for n in range(AB_MIN_SEEDS, limit + 1):
        if t_quantile(n - 1, alpha) * sd / math.sqrt(n) < abs(mean):
            return n
    return limit + 1


def _describe_config(run: AbRun) -> Dict[str, Any]:
    """Model, budget and batcher of the run as `spacy train` ran it."""
    config = load_config(run.run_dir / "train-config.cfg", interpolate=True)
    training = config["training"]
    transformer = next((block for block in config["components"].values()
                        if isinstance(block, dict) and block.get("factory") in ("transformer", "sla_transformer")), {})
    batcher = training.get("batcher", {})
    return {
        "transformer": transformer.get("model", {}).get("name"),
        "max_steps": training.get("max_steps"), "max_epochs": training.get("max_epochs"),
        "eval_frequency": training.get("eval_frequency"), "patience": training.get("patience"),
        "batcher": {key: value for key, value in batcher.items() if key in ("@batchers", "size", "tolerance")},
        "accumulate_gradient": training.get("accumulate_gradient"),
        "pipeline": config["nlp"]["pipeline"],
    }


def _mean_sd(values: Sequence[float]) -> Tuple[Optional[float], Optional[float]]:
    if not values:
        return None, None
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else None)


def size_section(plan: AbPlan, size: Optional[int], runs: Sequence[AbRun], by_mask: bool = False) -> Dict[str, Any]:
    """The comparison at one training size, from the runs' evaluations."""
    evaluations = {(run.variant, run.seed): _read_json(run.run_dir / "dev-evaluation.json") for run in runs}
    settings = {(run.variant, run.seed): finished_settings(run) or {} for run in runs}
    reference_runs = [run for run in runs if run.variant == REFERENCE]
    # the weights that count (spaCy's sum skips 0 and null)
    weights = {key: weight for key, weight in evaluations[(REFERENCE, reference_runs[0].seed)]["score_weights"].items()
               if weight}
    # every other score, by weight; a main score of one score with weight 1 is that score, shown once
    keys = sorted({key for evaluation in evaluations.values() for key in evaluation["statistics"]
                   if key not in EXCLUDED and weights != {key: 1.0}},
                  key=lambda key: (-float(weights.get(key) or 0.0), key))
    seeds = sorted({run.seed for run in runs})
    draws = DrawValues(evaluations, plan.resamples, plan.random_seed)

    def score_of(variant: str, seed: int, key: str) -> Optional[float]:
        scores = evaluations[(variant, seed)]["scores"]
        if key == MAIN:
            return main_score(scores, weights)
        value = scores.get(key)
        return float(value) if isinstance(value, (int, float)) else None

    arms = plan.arms
    for key in weights:
        if all(not isinstance(evaluation["scores"].get(key), (int, float)) for evaluation in evaluations.values()):
            raise ValueError(Errors.E036.format(key=key, dev=runs[0].dev_path,
                                                finding="every trained model scored it None"))
    scores = {key: {variant: {seed: score_of(variant, seed, key) for seed in seeds} for variant in arms}
              for key in [MAIN, *keys]}
    rows = []
    for key in [MAIN, *keys]:
        for variant in arms:
            values = [value for value in scores[key][variant].values() if value is not None]
            mean, sd = _mean_sd(values)
            row: Dict[str, Any] = {"score": key, "variant": variant, "per_seed": scores[key][variant],
                                   "mean": mean, "std": sd}
            if variant != REFERENCE:
                row.update(_paired_comparison(variant, REFERENCE, scores[key], draws, key,
                                              weights if key == MAIN else None, plan.resamples))
            rows.append(row)
    cost = {}
    for variant in arms:
        seconds = [settings[(variant, seed)].get("train_seconds") for seed in seeds]
        speed = [evaluations[(variant, seed)].get("words_per_second") for seed in seeds]
        cost[variant] = {"train_seconds": _mean_sd([value for value in seconds if value is not None])[0],
                         "words_per_second": _mean_sd([value for value in speed if value is not None])[0]}
    for variant in arms:
        reference, ours = cost[REFERENCE], cost[variant]
        ours["train_time_ratio"] = (ours["train_seconds"] / reference["train_seconds"]
                                    if ours["train_seconds"] and reference["train_seconds"] else None)
        ours["predict_time_ratio"] = (reference["words_per_second"] / ours["words_per_second"]
                                      if ours["words_per_second"] and reference["words_per_second"] else None)
    curves: Dict[str, Dict[int, float]] = {}
    for variant in arms:
        by_step: Dict[int, List[float]] = {}
        for run in runs:
            if run.variant == variant:
                for point in training_curve(run):
                    by_step.setdefault(point["step"], []).append(point["score"])
        curves[variant] = {step: statistics.mean(values) for step, values in sorted(by_step.items())
                           if len(values) == len(seeds)}
    first = runs[0]
    setup = _describe_config(reference_runs[0])
    logged = {variant: {run.seed: logged_score(logged_evaluations(run.run_dir / TRAIN_LOG), plan.model,
                                               setup["max_steps"])
                        for run in runs if run.variant == variant} for variant in arms}
    section: Dict[str, Any] = {
        "size": size_label(size), "train": str(first.train_path), "dev": str(first.dev_path),
        "dev_documents": draws.n_documents, "seeds": seeds, "weights": weights, "rows": rows, "cost": cost,
        "curves": curves, "setup": setup,
        # how the dev examples were read (evaluations before --eval-corpus read a plain Corpus)
        "dev_examples": evaluations[(REFERENCE, reference_runs[0].seed)].get("corpus", {"mode": "plain"}),
        "self_check": check_runs(scores[MAIN], logged),
        "methods": {key: sorted({evaluation["statistics"][key]["method"] for evaluation in evaluations.values()
                                 if key in evaluation["statistics"]}) for key in keys},
    }
    section["between_variants"] = _between_variants(plan, scores[MAIN], draws, weights)
    if by_mask:
        section["by_mask"] = _main_score_by_mask(plan, runs, evaluations, weights, seeds)
    return section


def _between_variants(plan: AbPlan, main_scores: Dict[str, Dict[int, Optional[float]]], draws: DrawValues,
                      weights: Dict[str, float]) -> List[Dict[str, Any]]:
    """Every pair of variants other than the reference, the earlier in the
    plan's order minus the later, on the main score over their paired seeds
    and over resampled dev documents. With SLA and window it says whether the
    tree adds anything to a positional neighbourhood; not adjusted, since the
    verdicts against vanilla are the report's question."""
    others = [variant for variant in plan.arms if variant != REFERENCE]
    rows = []
    for position, variant in enumerate(others):
        for reference in others[position + 1:]:
            comparison = _paired_comparison(variant, reference, main_scores, draws, MAIN, weights, plan.resamples)
            rows.append({"variant": variant, "reference": reference, "seeds": comparison["over_seeds"]["seeds"],
                         **comparison})
    return rows


def _paired_comparison(variant: str, reference: str, scores: Dict[str, Dict[int, Optional[float]]],
                       draws: DrawValues, key: str, weights: Optional[Dict[str, float]],
                       resamples: int) -> Dict[str, Any]:
    """variant − reference of one score over the seeds where both have it
    (t-interval) and over the same draws of the dev documents (bootstrap)."""
    ours = {seed: value for seed, value in scores[variant].items() if value is not None}
    theirs = {seed: value for seed, value in scores[reference].items() if value is not None}
    over_seeds = paired_difference(ours, theirs, AB_MIN_SEEDS)
    difference = draws.difference(variant, reference, over_seeds["seeds"], key, weights)
    return {"over_seeds": over_seeds, "over_documents": bootstrap_interval(difference, over_seeds["mean"], resamples)}


def _main_score_by_mask(plan: AbPlan, runs: Sequence[AbRun], evaluations: Dict[Any, Dict[str, Any]],
                        weights: Dict[str, float], seeds: List[int]) -> Dict[str, Any]:
    """rows_by_mask of the main score for every variant with a local mask;
    the others are named with the reason."""
    by_run = {(run.variant, run.seed): run for run in runs}
    rows: List[Dict[str, Any]] = []
    skipped: Dict[str, str] = {}
    for variant in plan.arms:
        if variant == REFERENCE:
            continue

        def strata_of(seed: int, variant: str = variant) -> List[bool]:
            run = by_run[(variant, seed)]
            return kept_strata(run.model_dir, run.dev_path, run.run_dir, run.eval_corpus)

        try:
            rows += rows_by_mask(variant, REFERENCE, seeds, evaluations, MAIN, plan.resamples, strata_of,
                                 plan.random_seed, weights, AB_MIN_SEEDS)
        except NoLocalMaskError as error:
            skipped[variant] = str(error)
    return {"rows": rows, "skipped": skipped}


def adjust(sections: Sequence[Dict[str, Any]]) -> None:
    """Holm's adjustment within two families: the main score's comparisons
    (every variant at every size) and all other scores' comparisons. A
    verdict is "better" or "worse" only where both the seed t-test and the
    bootstrap over documents reject 0 in the same direction after the
    adjustment; otherwise "not shown" ("not shown (needs 3 seeds)" with
    fewer than AB_MIN_SEEDS). The seeds a difference of the observed size
    would need (seeds_needed) are reckoned in the same family."""
    for family in (lambda row: row["score"] == MAIN, lambda row: row["score"] != MAIN):
        members = [row for section in sections for row in section["rows"] if "over_seeds" in row and family(row)]
        for source in ("over_seeds", "over_documents"):
            tested = [row for row in members if row[source]["p_value"] is not None]
            for row, adjusted in zip(tested, holm_adjusted([row[source]["p_value"] for row in tested])):
                row[source]["p_holm"] = adjusted
                row[source]["family_size"] = len(tested)
        for row in members:
            seeds, documents = row["over_seeds"], row["over_documents"]
            row["seeds_needed"] = seeds_needed(seeds["differences"], len(members))
            if seeds["p_value"] is None or documents["p_value"] is None:
                row["verdict"] = too_few(AB_MIN_SEEDS) if seeds["n"] < AB_MIN_SEEDS else NOT_SHOWN
                continue
            direction = {seeds["verdict"], documents["verdict"]}
            both = seeds.get("p_holm", 1.0) < ALPHA and documents.get("p_holm", 1.0) < ALPHA
            row["verdict"] = direction.pop() if both and len(direction) == 1 and direction <= {BETTER, WORSE} \
                else NOT_SHOWN


def build_report(plan: AbPlan, runs: Sequence[AbRun], by_mask: bool = False,
                 left_out: Sequence[str] = ()) -> Dict[str, Any]:
    """The comparison of the runs; left_out names the runs of the plan not
    in it yet (a report of the finished part, `--report-only`)."""
    sections = []
    for size in plan.sizes:
        sections.append(size_section(plan, size, [run for run in runs if run.size == size], by_mask))
    adjust(sections)
    sized = len(plan.sizes) > 1 or plan.sizes != [None]
    warnings = [warning for section in sections for warning in self_check_warnings(section, plan.model, sized)]
    for section in sections:  # a budget that cannot train, or curves that had not converged ([SLA-W018], [SLA-W019])
        where = f" at training size {section['size']}" if sized else ""
        reference = next(run for run in runs if size_label(run.size) == section["size"] and run.variant == REFERENCE)
        warnings += config_budget_warnings(reference.run_dir / RUN_CONFIG, {}, f"these runs{where}")
        warnings += rising_curve_warnings(section["curves"], plan.arms, where)
    return {"plan": plan.to_json(), "sections": sections, "left_out": list(left_out), "warnings": warnings}
