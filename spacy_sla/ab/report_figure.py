"""The figure of the report of `spacy sla ab` (needs matplotlib, the plots
extra)."""
import math
import statistics
from pathlib import Path
from typing import Any, Dict

from .comparison import MAIN
from .intervals import t_quantile_975


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
