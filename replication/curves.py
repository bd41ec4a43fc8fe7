"""Learning curves from run records: the dev score at every evaluation of a
run, per task and variant, to show whether a budget has converged.

Both kinds of record carry a `curve` (a list of {"step", "score", ...}): the
spaCy runs from `spacy train`'s log (replication/experiments.training_curve),
the plain fine-tune from its own evaluations (replication/baseline)."""
import statistics
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from spacy_sla.tools.ab.intervals import paired_difference
from spacy_sla.tools.inspection.trained_pipeline import require_matplotlib

from .experiments import VARIANT_LABELS, budget_labels, paired_cell, read_records, split_recipe  # noqa: F401  (read_records: the CLI's)

Curve = List[Tuple[int, float]]


def curves_by_task(
    records: Sequence[Dict[str, Any]], seeds: Optional[Sequence[int]] = None
) -> Dict[str, Dict[Tuple[str, int], Curve]]:
    """{task: {(variant, seed): [(step, score), ...]}} for the records that
    have a curve (and one of `seeds`, if given); evaluations without the
    task's score are left out. Where a task has runs of several budgets,
    the variant is named with its budget ("vanilla (800 steps, minilm)"), so
    that no curve hides another."""
    labels = budget_labels(records)
    budgets: Dict[str, set] = {}
    for record, label in zip(records, labels):
        budgets.setdefault(record["task"], set()).add(label)
    tasks: Dict[str, Dict[Tuple[str, int], Curve]] = {}
    for record, label in zip(records, labels):
        if seeds is not None and record["seed"] not in seeds:
            continue
        points = [(point["step"], point["score"]) for point in record.get("curve", []) if point.get("score") is not None]
        variant = record["variant"]
        if len(budgets[record["task"]]) > 1:
            variant = f"{variant} ({label})"
        if points:
            tasks.setdefault(record["task"], {})[(variant, record["seed"])] = sorted(points)
    return tasks


# The attention variants in the order they get the most distinct colours (tab10's, then tab20's light ones).
COLOUR_ORDER = ("vanilla", "plain", "sla", "window", "sgnet", "lisa", "softbias", "logthreshold", "depscale")
LINE_STYLES = ("-", "--", ":", "-.")


def line_styles(labels: Sequence[str]) -> Dict[str, Tuple[int, str]]:
    """{curve label: (colour index, line style)}. One colour per attention
    variant, whatever its recipe or budget ("sla", "paper-sla" and "sla
    (1200 steps, minilm)" share it), one line style per budget, solid for
    the longest, so that a dozen variants in a panel stay apart."""
    def steps(budget: str) -> int:
        head = budget.split(" ", 1)[0]
        return int(head) if head.isdigit() else 0

    # "paper-sla (1070 steps, minilm)" -> ("sla", "1070 steps, minilm)")
    parts = {label: (split_recipe(label.partition(" (")[0])[1], label.partition(" (")[2]) for label in labels}
    kinds = sorted({kind for kind, _ in parts.values()},
                   key=lambda kind: (COLOUR_ORDER.index(kind) if kind in COLOUR_ORDER else len(COLOUR_ORDER), kind))
    budgets = sorted({budget for _, budget in parts.values()}, key=lambda budget: (-steps(budget), budget))
    return {
        label: (kinds.index(kind), LINE_STYLES[budgets.index(budget) % len(LINE_STYLES)])
        for label, (kind, budget) in parts.items()
    }


def _colour(index: int) -> Any:
    import matplotlib

    if index < 10:
        return matplotlib.colormaps["tab10"](index)
    return matplotlib.colormaps["tab20"]((2 * (index - 10) + 1) % 20)


def plot_curves(tasks: Dict[str, Dict[Tuple[str, int], Curve]], metrics: Dict[str, str], output: Path) -> None:
    """One panel per task: the dev score ×100 against the step, a line per
    variant and seed (one colour per variant, one line style per budget, one
    marker per seed)."""
    if not tasks:
        raise ValueError("No record with a learning curve: runs of `python -m replication train` and `python -m replication baseline` "
                         "record one when they evaluate during training (--eval-frequency)")
    new_figure = require_matplotlib()
    figure = new_figure(figsize=(5.5 * len(tasks), 4.5), layout="constrained")
    axes = figure.subplots(1, len(tasks), squeeze=False)[0]
    styles = line_styles([variant for runs in tasks.values() for variant, _ in runs])
    markers = "os^Dvx+*"
    for axis, (task, runs) in zip(axes, sorted(tasks.items())):
        for (variant, seed), points in sorted(runs.items()):
            steps, scores = zip(*points)
            colour, line_style = styles[variant]
            axis.plot(steps, [100 * score for score in scores], color=_colour(colour), linestyle=line_style,
                      marker=markers[seed % len(markers)], markersize=4, linewidth=1.2,
                      label=f"{variant}, seed {seed}")
        axis.set_title(task)
        axis.set_xlabel("step")
        axis.set_ylabel(f"dev {metrics.get(task, 'score')} ×100")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=6)
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, dpi=120)


def last_interval_gains(records: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """How much the dev score still moved over the last evaluation interval
    of each run (score at the last evaluation minus the one before), per
    task, budget and variant: mean and sample sd over seeds. A budget has
    converged where this is near 0 against the seed spread; a clearly
    positive gain says the run stopped while still improving."""
    groups: Dict[Tuple[str, str, str], List[Tuple[int, int, int, float]]] = {}
    for record, budget in zip(records, budget_labels(records)):
        points = sorted((p["step"], p["score"]) for p in record.get("curve", []) if p.get("score") is not None)
        if len(points) < 2:
            continue
        (before, before_score), (last, last_score) = points[-2], points[-1]
        key = (record["task"], budget, record["variant"])
        groups.setdefault(key, []).append((record["seed"], before, last, last_score - before_score))
    rows = []
    for (task, budget, variant), runs in sorted(groups.items()):
        gains = [gain for _, _, _, gain in sorted(runs)]
        intervals = sorted({(before, last) for _, before, last, _ in runs})
        rows.append({
            "task": task, "budget": budget, "variant": variant,
            "interval": intervals[0] if len(intervals) == 1 else None,
            "seeds": sorted(seed for seed, _, _, _ in runs), "gains": gains,
            "mean": statistics.mean(gains), "std": statistics.stdev(gains) if len(gains) > 1 else None,
        })
    return rows


def gains_table(rows: Sequence[Dict[str, Any]]) -> str:
    """The rows of last_interval_gains as a markdown table, scores ×100."""
    lines = ["| task | budget | variant | last interval | gain ×100, mean ± sd | seeds | per seed |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        interval = "varies" if row["interval"] is None else f"{row['interval'][0]} → {row['interval'][1]}"
        spread = "n/a" if row["std"] is None else f"{100 * row['std']:.2f}"
        per_seed = ", ".join(f"{100 * gain:+.2f}" for gain in row["gains"])
        lines.append(f"| {row['task']} | {row['budget']} | {row['variant']} | {interval} "
                     f"| {100 * row['mean']:+.2f} ± {spread} | {len(row['gains'])} | {per_seed} |")
    return "\n".join(lines) + "\n"


def paired_differences_by_step(records: Sequence[Dict[str, Any]], reference: str = "vanilla") -> List[Dict[str, Any]]:
    """Where along the schedule two variants part: at every evaluation step,
    the paired difference variant − reference over the seeds that evaluated
    that step in both runs (same task and budget), with its 95% t-interval
    and verdict. A difference that appears early and fades by the last step
    (or the reverse) shows here, with its uncertainty, where the final
    scores alone would hide it."""
    scores: Dict[Tuple[str, str, str], Dict[int, Dict[int, float]]] = {}
    for record, budget in zip(records, budget_labels(records)):
        by_step = scores.setdefault((record["task"], budget, record["variant"]), {})
        for point in record.get("curve", []):
            if point.get("score") is not None:
                by_step.setdefault(point["step"], {})[record["seed"]] = point["score"]
    rows = []
    for (task, budget, variant), by_step in sorted(scores.items()):
        baseline = scores.get((task, budget, reference))
        if variant == reference or baseline is None:
            continue
        for step in sorted(set(by_step) & set(baseline)):
            paired = paired_difference(by_step[step], baseline[step])
            if paired["n"]:
                rows.append({"task": task, "budget": budget, "variant": variant, "reference": reference,
                             "step": step, "paired": paired})
    return rows


def paired_by_step_table(rows: Sequence[Dict[str, Any]]) -> str:
    """The rows of paired_differences_by_step as a markdown table, ×100."""
    lines = ["| task | budget | variant | step | paired Δ vs reference ± 95% CI [interval] | verdict | per seed |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        cell, verdict = paired_cell(row["paired"])
        per_seed = ", ".join(f"{100 * difference:+.2f}" for difference in row["paired"]["differences"])
        variant = VARIANT_LABELS.get(row["variant"], row["variant"])
        lines.append(f"| {row['task']} | {row['budget']} | {variant} − {row['reference']} | {row['step']} "
                     f"| {cell} | {verdict} | {per_seed} |")
    return "\n".join(lines) + "\n"
