"""The paper's gate analysis over several seeds: from the JSON reports that
`spacy sla gates MODEL DATA --compare OTHER` writes (one per seed, e.g. an
SLA model and the window model of the same seed), the per-layer difference
of mean gates MODEL − OTHER, and the paired 95% t-interval of that
difference over the reports.

A report's layers are paired by layer index; a seed's summary is the mean of
its per-layer differences (every layer is averaged over the same tokens, so
no weighting is needed)."""
import json
import statistics
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

from spacy_sla.tools.ab.intervals import BETTER, WORSE, paired_difference

from .errors import Errors

# The interval's verdict, said of gates: MODEL's gate is higher or lower.
GATE_VERDICTS = {BETTER: "higher", WORSE: "lower"}


class GatePair(NamedTuple):
    """The mean gate per layer of two models run on the same documents."""

    source: str
    data: str
    models: List[str]
    layers: List[int]
    means: List[List[float]]  # [model][layer]

    @property
    def differences(self) -> List[float]:
        return [first - second for first, second in zip(*self.means)]

    @property
    def mean_difference(self) -> float:
        return statistics.mean(self.differences)


def read_gate_pair(path: Path) -> GatePair:
    """One report of `spacy sla gates ... --compare ...`; [SLA-REPLICATION-E019] when it does
    not hold two models with means for the same layers."""
    try:
        report = json.loads(Path(path).read_text(encoding="utf8"))
    except json.JSONDecodeError as error:
        raise ValueError(Errors.E019.format(path=path, reason=f"it is not JSON ({error})")) from None
    models = report.get("models", []) if isinstance(report, dict) else []
    if len(models) != 2:
        raise ValueError(Errors.E019.format(path=path, reason=f"it holds {len(models)} model(s), not 2"))
    if not all(isinstance(model, dict) and "layers" in model and "model" in model for model in models):
        raise ValueError(Errors.E019.format(path=path, reason="a model has no 'model' name or 'layers'"))
    layers = [[layer["layer"] for layer in model["layers"]] for model in models]
    if layers[0] != layers[1]:
        raise ValueError(Errors.E019.format(path=path, reason=f"its models' SLA layers differ: {layers[0]} and {layers[1]}"))
    means = [[layer["mean"] for layer in model["layers"]] for model in models]
    if any(mean is None for model_means in means for mean in model_means):
        raise ValueError(Errors.E019.format(path=path, reason="a layer has no tokens (no mean gate)"))
    return GatePair(str(path), report.get("data", ""), [model["model"] for model in models], layers[0], means)


def _interval(differences: Sequence[float]) -> Dict[str, Optional[object]]:
    """The paired t-interval of differences already taken (against 0), with
    the verdict "higher", "lower" or "not shown"."""
    indexed = dict(enumerate(differences))
    result = paired_difference(indexed, {index: 0.0 for index in indexed})
    result["verdict"] = GATE_VERDICTS.get(str(result["verdict"]), result["verdict"])
    return result


def compare_gates(pairs: Sequence[GatePair]) -> Dict[str, Any]:
    """Per layer and for the mean over layers: the differences MODEL − OTHER
    of every report, their mean and 95% t-interval over the reports, and a
    verdict ("higher": MODEL's gate is higher, the interval excludes 0;
    "lower"; "not shown": the interval covers 0)."""
    if not pairs:
        raise ValueError("No gate reports to compare")
    layers = pairs[0].layers
    for pair in pairs[1:]:
        if pair.layers != layers:
            raise ValueError(Errors.E019.format(
                path=pair.source, reason=f"its layers {pair.layers} differ from {pairs[0].source}'s {layers}"))
    per_layer = [_interval(column) for column in zip(*(pair.differences for pair in pairs))]
    return {
        "layers": layers,
        "per_layer": per_layer,
        "over_layers": _interval([pair.mean_difference for pair in pairs]),
        "reports": [pair._asdict() for pair in pairs],
    }


def _signed(value: Optional[object], digits: int = 4) -> str:
    return "n/a" if value is None else f"{value:+.{digits}f}"


def _interval_cell(result: Dict[str, Optional[object]]) -> str:
    if result["low"] is None:
        return f"{_signed(result['mean'])} (n={result['n']})"
    return f"{_signed(result['mean'])} [{_signed(result['low'])}, {_signed(result['high'])}] (n={result['n']})"


def gate_tables(comparison: Dict[str, Any]) -> str:
    """Two Markdown tables: the mean gates of every report (one row each),
    then the paired difference per layer and over layers with its verdict."""
    layers = comparison["layers"]
    names = " ".join(str(layer) for layer in layers)
    lines = [
        f"| report | model, layers {names} | compared model, layers {names} | difference, layers {names} | mean difference |",
        "|---|---|---|---|---|",
    ]
    for report in comparison["reports"]:
        pair = GatePair(**report)
        first, second = (" ".join(f"{mean:.3f}" for mean in means) for means in pair.means)
        differences = " ".join(_signed(value, 3) for value in pair.differences)
        lines.append(f"| {pair.source} | {first} | {second} | {differences} | {_signed(pair.mean_difference)} |")
    lines += ["", "| layer | mean difference [95% CI] | verdict |", "|---|---|---|"]
    for layer, result in zip(layers, comparison["per_layer"]):
        lines.append(f"| {layer} | {_interval_cell(result)} | {result['verdict']} |")
    over = comparison["over_layers"]
    lines.append(f"| mean over layers | {_interval_cell(over)} | {over['verdict']} |")
    return "\n".join(lines)
