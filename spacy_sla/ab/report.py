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
"""
import json
import math
import statistics
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from spacy.util import load_config

from spacy_sla.ab.outputs import AB_FILES, REPORT, check_outputs, record_outputs, report_names
from spacy_sla.ab.plan import AbPlan
from spacy_sla.ab.runs import AbRun, finished_settings, size_label, training_curve

from ..errors import Errors
from ..files import write_atomically
from .configs import REFERENCE
from .intervals import ALPHA, BETTER, NOT_SHOWN, TOO_FEW, WORSE, holm_adjusted, paired_difference, t_quantile_975
from .mask_strata import NoLocalMaskError, kept_strata, rows_by_mask
from .resampling import DrawValues, bootstrap_interval
from .tables import bootstrap_table, strata_table

MAIN = "score"  # the weighted main score, as `spacy train` computes it
EXCLUDED = ("speed", "token_acc", "token_p", "token_r", "token_f")  # the same tokenizer in every run


def _read_json(path: Path) -> Dict[str, Any]:
    return json.loads(path.read_text(encoding="utf8"))


def main_score(scores: Dict[str, Any], weights: Dict[str, float]) -> float:
    """spaCy's training score: the weighted sum of the scores that are not None."""
    return sum(float(scores[key]) * weight for key, weight in weights.items()
               if isinstance(scores.get(key), (int, float)))


def seeds_needed(differences: Sequence[float], limit: int = 100) -> Optional[int]:
    """The smallest number of seeds n whose 95% t-interval, at the observed
    mean and spread of the per-seed differences, would exclude 0; None
    when the differences have no spread to go by or the mean is 0."""
    if len(differences) < 2:
        return None
    mean, sd = statistics.mean(differences), statistics.stdev(differences)
    if mean == 0:
        return None
    if sd == 0:
        return 2
    for n in range(2, limit + 1):
        if t_quantile_975(n - 1) * sd / math.sqrt(n) < abs(mean):
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
            raise ValueError(Errors.E036.format(key=key, dev=runs[0].dev_path))
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
                row["seeds_needed"] = seeds_needed(row["over_seeds"]["differences"])
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
    section: Dict[str, Any] = {
        "size": size_label(size), "train": str(first.train_path), "dev": str(first.dev_path),
        "dev_documents": draws.n_documents, "seeds": seeds, "weights": weights, "rows": rows, "cost": cost,
        "curves": curves, "setup": _describe_config(reference_runs[0]),
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
    over_seeds = paired_difference(ours, theirs)
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
            return kept_strata(run.model_dir, run.dev_path, run.run_dir)

        try:
            rows += rows_by_mask(variant, REFERENCE, seeds, evaluations, MAIN, plan.resamples, strata_of,
                                 plan.random_seed, weights)
        except NoLocalMaskError as error:
            skipped[variant] = str(error)
    return {"rows": rows, "skipped": skipped}


def adjust(sections: Sequence[Dict[str, Any]]) -> None:
    """Holm's adjustment within two families: the main score's comparisons
    (every variant at every size) and all other scores' comparisons. A
    verdict is "better" or "worse" only where both the seed t-test and the
    bootstrap over documents reject 0 in the same direction after the
    adjustment; otherwise "not shown"."""
    for family in (lambda row: row["score"] == MAIN, lambda row: row["score"] != MAIN):
        members = [row for section in sections for row in section["rows"] if "over_seeds" in row and family(row)]
        for source in ("over_seeds", "over_documents"):
            tested = [row for row in members if row[source]["p_value"] is not None]
            for row, adjusted in zip(tested, holm_adjusted([row[source]["p_value"] for row in tested])):
                row[source]["p_holm"] = adjusted
                row[source]["family_size"] = len(tested)
        for row in members:
            seeds, documents = row["over_seeds"], row["over_documents"]
            if seeds["p_value"] is None or documents["p_value"] is None:
                row["verdict"] = TOO_FEW if seeds["n"] < 2 else NOT_SHOWN
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
    return {"plan": plan.to_json(), "sections": sections, "left_out": list(left_out)}


# --- markdown ------------------------------------------------------------------------------------------


def _pct(value: Optional[float], signed: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{100 * value:+.2f}" if signed else f"{100 * value:.2f}"


def _interval(result: Dict[str, Any]) -> str:
    if result.get("low") is None:
        return "n/a"
    return f"[{_pct(result['low'], True)}, {_pct(result['high'], True)}]"


def _p(result: Dict[str, Any]) -> str:
    if result.get("p_value") is None:
        return "n/a"
    holm = result.get("p_holm")
    return f"{result['p_value']:.3f}" + ("" if holm is None else f" ({holm:.3f})")


def _score_name(key: str, weights: Dict[str, float]) -> str:
    if key != MAIN:
        return key
    return "main score (" + " + ".join(f"{weight:g} × {name}" for name, weight in weights.items()) + ")"


def comparison_table(section: Dict[str, Any], main: bool) -> str:
    lines = [
        "| score | variant | mean ± std (×100) | per seed | Δ vs vanilla, 95% t-interval over seeds | p (Holm) "
        "| 95% bootstrap interval over documents | p (Holm) | verdict | seeds to show Δ |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in section["rows"]:
        if (row["score"] == MAIN) != main:
            continue
        spread = "n/a" if row["std"] is None else _pct(row["std"])
        per_seed = ", ".join(_pct(value) for value in row["per_seed"].values())
        if "over_seeds" in row:
            seeds, documents = row["over_seeds"], row["over_documents"]
            delta = f"{_pct(seeds['mean'], True)} {_interval(seeds)}"
            needed = row["seeds_needed"]
            needed_text = "n/a" if needed is None else (f">{needed - 1}" if needed > 100 else str(needed))
            comparison = f"| {delta} | {_p(seeds)} | {_interval(documents)} | {_p(documents)} | {row['verdict']} | {needed_text} |"
        else:
            comparison = "| (reference) | | | | | |"
        lines.append(f"| {_score_name(row['score'], section['weights'])} | {row['variant']} "
                     f"| {_pct(row['mean'])} ± {spread} | {per_seed} {comparison}")
    return "\n".join(lines)


def cost_table(section: Dict[str, Any]) -> str:
    lines = ["| variant | training s/run | time ratio | prediction words/s (dev set) | time ratio |", "|---|---|---|---|---|"]
    for variant, cost in section["cost"].items():
        def number(value: Optional[float], digits: int = 0) -> str:
            return "n/a" if value is None else f"{value:.{digits}f}"

        lines.append(f"| {variant} | {number(cost['train_seconds'])} | {number(cost['train_time_ratio'], 2)} "
                     f"| {number(cost['words_per_second'])} | {number(cost['predict_time_ratio'], 2)} |")
    return "\n".join(lines)


def curve_table(section: Dict[str, Any]) -> str:
    steps = sorted({step for curve in section["curves"].values() for step in curve})
    if not steps:
        return "(no dev curve: the runs kept no training log)"
    variants = list(section["curves"])
    lines = ["| step | " + " | ".join(variants) + " |", "|---" * (len(variants) + 1) + "|"]
    for step in steps:
        cells = [_pct(section["curves"][variant].get(step)) for variant in variants]
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def markdown_report(report: Dict[str, Any], figure: Optional[str]) -> str:
    plan = report["plan"]
    parts = [
        "# Does SLA help this pipeline?",
        "",
        f"Configs: `{plan['config_dir']}` ({', '.join(plan['variants'])}; the reference is vanilla). "
        f"Training data: `{plan['train']}`; dev data: `{plan['dev']}`. Seeds: {', '.join(map(str, plan['seeds']))}. "
        f"Training sizes: {', '.join(plan['train_sizes'])} (samples drawn once with seed {plan['sample_seed']}, nested). "
        f"Scored model: model-{plan['model']}. Overrides: {plan['overrides'] or 'none'}"
        + "".join(f"; at size {size}: {settings}" for size, settings in plan.get("size_overrides", {}).items()) + ".",
        "",
        "How to read it: Δ is variant − vanilla of the same seed, ×100. The t-interval covers the randomness of training "
        "(seeds); the bootstrap interval resamples the dev documents (the same draws for every seed and variant, "
        f"{plan['resamples']} draws) and covers the choice of dev set. p in brackets: Holm's adjustment, over the main "
        "score's comparisons and, separately, over all other scores' comparisons. The verdict is \"better\" or \"worse\" "
        "only where both adjusted tests exclude 0 in the same direction, otherwise \"not shown\" (which is not \"no "
        "effect\": see how many seeds a difference of the observed size would need). Scores of frozen components "
        "(the same model in every run) and the tokenizer's are left out.",
    ]
    if report.get("left_out"):
        parts += ["", "**Interim report**: a seed is compared once every variant has finished it; left out until "
                  "then: " + ", ".join(report["left_out"]) + "."]
    if figure:
        parts += ["", f"![per-seed scores, intervals and dev curves]({figure})"]
    for section in report["sections"]:
        setup = section["setup"]
        parts += [
            "",
            f"## Training size: {section['size']}",
            "",
            f"Transformer `{setup['transformer']}`; pipeline {setup['pipeline']}; budget: max_steps "
            f"{setup['max_steps']}, max_epochs {setup['max_epochs']}, eval_frequency {setup['eval_frequency']}, "
            f"batcher {setup['batcher']}, accumulate_gradient {setup['accumulate_gradient']}. "
            f"Training file `{section['train']}`; {section['dev_documents']} dev documents.",
            "",
            comparison_table(section, main=True),
            "",
            "Other scores:",
            "",
            comparison_table(section, main=False) if any(row["score"] != MAIN for row in section["rows"])
            else "(none besides the main score)",
            "",
            "Cost, measured in these runs (wall time; a busy machine inflates both sides):",
            "",
            cost_table(section),
            "",
            "Dev curve, main score ×100, mean over seeds at every evaluation (a lasting gain or only a faster start?):",
            "",
            curve_table(section),
        ]
        if section.get("between_variants"):
            parts += [
                "",
                "Main score between the variants other than vanilla, the earlier minus the later (SLA − window: does "
                "the parse add anything to a positional window?; not adjusted):",
                "",
                bootstrap_table({"rows": section["between_variants"]}),
            ]
        if "by_mask" in section:
            parts += [
                "",
                "Main score by what each variant's local mask hides (where a difference is made; the local branch is "
                "global attention where the mask hides nothing; not adjusted):",
                "",
                strata_table(section["by_mask"]["rows"]) if section["by_mask"]["rows"] else "(no variant has a local mask)",
            ]
            parts += [f"- {variant}: left out, {reason}" for variant, reason in section["by_mask"]["skipped"].items()]
        methods = {key: "/".join(method) for key, method in section["methods"].items()}
        parts += ["", "Bootstrap statistic per score: " + ", ".join(f"{key}: {method}" for key, method in methods.items())]
    return "\n".join(parts) + "\n"


def plot_report(report: Dict[str, Any], path: Path) -> None:
    """Per-seed main scores with each variant's mean and 95% t-interval, per
    training size; the mean dev curves; and, with several sizes, each
    variant's paired difference to vanilla with its interval against size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sections = report["sections"]
    arms = report["plan"]["variants"]
    n_panels = 3 if len(sections) > 1 else 2
    figure, axes = plt.subplots(1, n_panels, figsize=(5 * n_panels, 4))
    colours = {variant: f"C{i}" for i, variant in enumerate(arms)}
    for position, section in enumerate(sections):
        for offset, variant in enumerate(arms):
            row = next(r for r in section["rows"] if r["score"] == MAIN and r["variant"] == variant)
            x = position + (offset - (len(arms) - 1) / 2) * 0.2
            values = [100 * v for v in row["per_seed"].values() if v is not None]
            axes[0].scatter([x] * len(values), values, color=colours[variant], s=12, alpha=0.6,
                            label=variant if position == 0 else None)
            if len(values) > 1:
                half = t_quantile_975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
                axes[0].errorbar(x, statistics.mean(values), yerr=half, color=colours[variant], capsize=4, fmt="_")
    axes[0].set_xticks(range(len(sections)), [f"size {s['size']}" for s in sections])
    axes[0].set_xlim(-0.6, len(sections) - 0.4)
    axes[0].set_ylabel("main dev score ×100 (per seed; mean, 95% CI)")
    axes[0].legend(fontsize=8)
    last = sections[-1]
    for variant, curve in last["curves"].items():
        if curve:
            axes[1].plot(list(map(int, curve)), [100 * v for v in curve.values()], marker=".", color=colours[variant],
                         label=variant)
    axes[1].set_xlabel("step")
    axes[1].set_ylabel(f"main dev score ×100, mean over seeds (size {last['size']})")
    axes[1].legend(fontsize=8)
    if n_panels == 3:
        for offset, variant in enumerate(arms[1:]):
            xs, means, lows, highs = [], [], [], []
            for position, section in enumerate(sections):
                row = next(r for r in section["rows"] if r["score"] == MAIN and r["variant"] == variant)
                if row["over_seeds"]["low"] is None:
                    continue
                xs.append(position + offset * 0.1)
                means.append(100 * row["over_seeds"]["mean"])
                lows.append(100 * (row["over_seeds"]["mean"] - row["over_seeds"]["low"]))
                highs.append(100 * (row["over_seeds"]["high"] - row["over_seeds"]["mean"]))
            axes[2].errorbar(xs, means, yerr=[lows, highs], color=colours[variant], capsize=4, marker="o",
                             label=f"{variant} − vanilla")
        axes[2].axhline(0, color="grey", linewidth=0.8)
        axes[2].set_xticks(range(len(sections)), [s["size"] for s in sections])
        axes[2].set_xlabel("training documents")
        axes[2].set_ylabel("paired Δ main score ×100 (95% t-interval)")
        axes[2].legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_report(plan: AbPlan, runs: Sequence[AbRun], figure: bool = True, by_mask: bool = False,
                 left_out: Sequence[str] = (), stem: str = REPORT, record: str = AB_FILES) -> Dict[str, Path]:
    """STEM.json, STEM.md (and STEM.png), written only once all of them
    could be made, and only over files of those names that ab wrote
    ([SLA-E064]); recorded in OUTPUT_DIR/RECORD as ab's."""
    check_outputs(plan.output_dir, report_names(stem), record)
    report = build_report(plan, runs, by_mask, left_out)
    paths = {"json": plan.output_dir / f"{stem}.json", "md": plan.output_dir / f"{stem}.md"}
    if figure:
        try:
            import matplotlib  # noqa: F401
        except ImportError:  # the plots extra is not installed: the tables alone
            figure = False
    text = markdown_report(report, f"{stem}.png" if figure else None)
    if figure:
        paths["png"] = plan.output_dir / f"{stem}.png"
        plot_report(report, paths["png"])
    write_atomically(paths["json"], json.dumps(report, indent=2, default=str).encode("utf8"))
    write_atomically(paths["md"], text.encode("utf8"))
    record_outputs(plan.output_dir, list(paths.values()), record)
    return paths
