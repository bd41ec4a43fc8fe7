"""The figure of the report of `spacy sla ab` (needs matplotlib, the plots
extra): what the verdict is about, each arm's paired difference to vanilla
on the main score (its per-seed differences, their mean with the 95 %
t-interval over seeds where there are enough seeds for one, and the 95 %
bootstrap interval over dev documents), per training size; and the mean dev
curves. Each arm's own scores spread with the seed far more than their
paired difference does, so intervals of the arms alone would hide it."""
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from ..init_config.variant_blocks import REFERENCE
from .comparison import MAIN
from .intervals import AB_MIN_SEEDS

Interval = Optional[Tuple[float, float]]


def difference_marks(section: Dict[str, Any], variant: str) -> Dict[str, Any]:
    """What the figure draws of one arm at one training size, ×100: the
    per-seed differences to vanilla, their mean, the t-interval over seeds
    (None with too few seeds) and the bootstrap interval over documents."""
    row = next(r for r in section["rows"] if r["score"] == MAIN and r["variant"] == variant)
    seeds, documents = row["over_seeds"], row["over_documents"]

    def interval(result: Dict[str, Any]) -> Interval:
        return None if result.get("low") is None else (100 * result["low"], 100 * result["high"])

    return {"differences": [100 * value for value in seeds["differences"]],
            "mean": None if seeds["mean"] is None else 100 * seeds["mean"],
            "over_seeds": interval(seeds), "over_documents": interval(documents)}


def _draw_interval(axis: Any, x: float, mean: float, bounds: Interval, colour: str, dotted: bool = False) -> None:
    if bounds is None:
        return
    bars = axis.errorbar(x, mean, yerr=[[mean - bounds[0]], [bounds[1] - mean]], capsize=4, color=colour, fmt="none",
                         alpha=0.7 if dotted else 1.0)
    for line in bars.lines[2]:  # the vertical bar (its caps stay solid)
        line.set_linestyle(":" if dotted else "-")


def plot_report(report: Dict[str, Any], path: Path) -> None:
    """Two panels: the paired differences to vanilla per training size, and
    the mean dev curves of the last size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sections = report["sections"]
    arms = report["plan"]["variants"]
    compared = [variant for variant in arms if variant != REFERENCE]
    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    colours = {variant: f"C{i}" for i, variant in enumerate(arms)}
    too_few = False  # an arm with a mean but no interval over seeds
    for position, section in enumerate(sections):
        for offset, variant in enumerate(compared):
            marks = difference_marks(section, variant)
            x = position + (offset - (len(compared) - 1) / 2) * 0.25
            label = f"{variant} − vanilla" if position == 0 else None
            axes[0].scatter([x] * len(marks["differences"]), marks["differences"], color=colours[variant], s=14,
                            alpha=0.6, label=label)
            if marks["mean"] is None:
                continue
            axes[0].plot([x - 0.06, x + 0.06], [marks["mean"]] * 2, color=colours[variant], linewidth=2)
            _draw_interval(axes[0], x - 0.05, marks["mean"], marks["over_seeds"], colours[variant])
            _draw_interval(axes[0], x + 0.05, marks["mean"], marks["over_documents"], colours[variant], dotted=True)
            too_few = too_few or marks["over_seeds"] is None
    axes[0].axhline(0, color="grey", linewidth=0.8)
    axes[0].set_xticks(range(len(sections)), [f"size {s['size']}" for s in sections])
    axes[0].set_xlim(-0.6, len(sections) - 0.4)
    axes[0].set_ylabel("Δ main dev score ×100, arm − vanilla per seed")
    title = "mean; 95 % interval over seeds (solid), over dev documents (dotted)"
    if too_few:
        title += f"\nno interval over seeds from fewer than {AB_MIN_SEEDS} seeds"
    axes[0].set_title(title, fontsize=8)
    axes[0].legend(fontsize=8)
    last = sections[-1]
    for variant, curve in last["curves"].items():
        if curve:
            axes[1].plot(list(map(int, curve)), [100 * v for v in curve.values()], marker=".", color=colours[variant],
                         label=variant)
    axes[1].set_xlabel("step")
    axes[1].set_ylabel(f"main dev score ×100, mean over seeds (size {last['size']})")
    if any(last["curves"].values()):
        axes[1].legend(fontsize=8)
    else:
        axes[1].text(0.5, 0.5, "no dev curve: the runs kept no training log", ha="center",
                     transform=axes[1].transAxes)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
