"""One run of `spacy sla ab` (AbRun: a size, variant and seed) and the run
stack that trains, scores and reports it: train() with `spacy train`
(kept when it finished with the same settings on the same training data),
evaluate() with evaluation.py in its own process, execute() of both for a
grid that goes on after a failed run, run_sequentially() or, on Ray,
spacy_sla.tools.support.ray_session.run_grid with execute_logged, lost_run and progress_line."""
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from spacy.util import load_config
from thinc.api import Config

from ..init_config.variant_blocks import REFERENCE
from ..support.files import file_fingerprint, write_atomically
from ..support.user_code import import_user_code
from .children import TRAINER_RECORD, check_no_live_trainer
from .errors import Errors
from .evaluation import CONFIG_CORPUS, EVALUATION_VERSION
from .failures import EVALUATE, TRAIN, RunFailure, failure_message, read_failure, repeating_failure
from .mask_strata import STRATA_FILE, NoLocalMaskError, kept_strata
from .processes import AbInterrupted, run_command
from .progress import PROGRESS_FILE, ProgressDisplay

RUN_SETTINGS = "run.json"
RUN_CONFIG = "train-config.cfg"
TRAIN_LOG = "train-log.jsonl"  # spaCy's ConsoleLogger.v3 output: one JSON line per evaluation
TRAIN_OUTPUT = "train.log"  # what `spacy train` printed (each run's output goes to its own logs)
EVALUATE_OUTPUT = "evaluate.log"  # the same of the evaluation
LOG_TAIL_LINES = 25  # of a failed run's log, shown with its failure
NOT_RUN = "not run"  # a run not started because a failure before it would repeat in it
EVALUATION = "dev-evaluation.json"
MODELS = ("model-last", "model-best")  # what `spacy train` saves in a run directory
ALL = "all"


def size_label(size: Optional[int]) -> str:
    return ALL if size is None else str(size)


@dataclass(frozen=True)
class AbRun:
    """One (size, variant, seed) of the comparison, with what training and
    evaluating it need."""

    variant: str
    seed: int
    size: Optional[int]
    config_path: Path
    output_dir: Path
    train_path: Path
    dev_path: Path
    overrides: Dict[str, Any] = field(default_factory=dict)
    sizes_compared: bool = False  # whether the comparison has --train-sizes (then runs sit under size-N/)
    gpu_id: int = -1
    model: str = "last"  # "last" or "best": the model that is scored
    resamples: int = 10000
    random_seed: int = 0
    sample_seed: int = 0  # the draw of the training sample, for a size below the whole set
    # what is done after the evaluation; neither changes the run's result, so neither is a setting
    by_mask: bool = False  # record which dev documents the mask restricts (needs the model)
    drop_models: bool = False  # then delete the models, keeping the records the report needs
    code_path: Optional[Path] = None  # the user's registered functions, as `spacy train --code` takes them
    # how the dev examples are read for scoring (evaluation.dev_examples); training does not depend on it
    eval_corpus: str = CONFIG_CORPUS

    @property
    def name(self) -> str:
        return (f"size {size_label(self.size)}/" if self.sizes_compared else "") + f"{self.variant}/seed{self.seed}"

    @property
    def run_dir(self) -> Path:
        base = self.output_dir / f"size-{size_label(self.size)}" if self.sizes_compared else self.output_dir
        return base / self.variant / f"seed{self.seed}"

    @property
    def model_dir(self) -> Path:
        return self.run_dir / f"model-{self.model}"

    def settings(self) -> Dict[str, Any]:
        """What makes two runs the same run: a finished run with equal settings is kept."""
        settings = {
            "variant": self.variant, "seed": self.seed, "size": self.size,
            "config": str(self.config_path), "config_sha256": file_fingerprint(self.config_path)["sha256"],
            "train": str(self.train_path), "dev": str(self.dev_path), "overrides": self.overrides,
            "gpu_id": self.gpu_id,
        }
        if self.size is not None:  # a sample drawn with another seed is another training set at the same path
            settings["sample_seed"] = self.sample_seed
        if self.code_path is not None:  # edited code trains another model
            settings["code"] = str(self.code_path)
            settings["code_sha256"] = file_fingerprint(self.code_path)["sha256"]
        return settings

    def train_command(self) -> List[str]:
        return [sys.executable, "-m", "spacy", "train", str(self.run_dir / RUN_CONFIG), "--output",
                str(self.run_dir), "--gpu-id", str(self.gpu_id), *code_arguments(self.code_path)]

    def evaluate_command(self) -> List[str]:
        return evaluation_command(self.model_dir, self.dev_path, self.run_dir / EVALUATION, self.gpu_id,
                                  self.resamples, self.random_seed, self.code_path, self.eval_corpus)


def has_setting(config: Dict[str, Any], dotted: str) -> bool:
    node: Any = config
    for key in dotted.split("."):
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


def run_config(run: AbRun) -> Config:
    """The variant's config with the run's data, seed and overrides, and two
    loggers beside the config's own (spacy-loggers' ChainLogger.v1): each
    evaluation as a JSON line for the report's dev curve (ConsoleLogger.v3),
    and the progress shown while the run trains (ProgressLogger.v1)."""
    config = load_config(run.config_path, interpolate=False)
    settings = {"paths.train": str(run.train_path), "paths.dev": str(run.dev_path), "system.seed": run.seed}
    settings.update({key: value for key, value in run.overrides.items() if has_setting(config, key)})
    config = load_config(run.config_path, overrides=settings, interpolate=False)
    training = config["training"]
    training["logger"] = {
        "@loggers": "spacy.ChainLogger.v1",
        "logger1": training.get("logger") or {"@loggers": "spacy.ConsoleLogger.v1", "progress_bar": False},
        "logger2": {"@loggers": "spacy.ConsoleLogger.v3", "progress_bar": None, "console_output": False,
                    "output_file": str(run.run_dir / TRAIN_LOG)},
        "logger3": {"@loggers": "spacy-sla.ProgressLogger.v1", "path": str(run.run_dir / PROGRESS_FILE)},
    }
    return config


def finished_settings(run: AbRun) -> Optional[Dict[str, Any]]:
    """run.json of a run that finished with the same settings on the same
    training data, else None. A run counts as finished while it has its
    model or, once --drop-models deleted that, its evaluation."""
    path = run.run_dir / RUN_SETTINGS
    if not (path.exists() and (run.model_dir.exists() or (run.run_dir / EVALUATION).exists())):
        return None
    record = json.loads(path.read_text(encoding="utf8"))
    if record.get("settings") != run.settings():
        return None
    # a corpus rewritten at the same path (or another one sampled into data/) is other training data;
    # records written before the fingerprint was kept are taken on their settings alone
    if "train_data" in record and record["train_data"] != file_fingerprint(run.train_path):
        return None
    return record


def train(run: AbRun, log_path: Optional[Path] = None, force: bool = False,
          watch: Optional[Callable[[], None]] = None) -> Dict[str, Any]:
    """Train one run with `spacy train` (unless it finished before with the
    same settings), calling watch while it trains; returns its run.json."""
    if not force:
        kept = finished_settings(run)
        if kept is not None:
            return {**kept, "kept": True}
    check_no_live_trainer(run.run_dir, run.name)
    run.run_dir.mkdir(parents=True, exist_ok=True)
    for name in (RUN_SETTINGS, EVALUATION, TRAIN_LOG, PROGRESS_FILE, STRATA_FILE):  # TRAIN_LOG: spaCy's logger
        (run.run_dir / name).unlink(missing_ok=True)  # would refuse to overwrite it
    write_atomically(run.run_dir / RUN_CONFIG, run_config(run).to_str(interpolate=False).encode("utf8"))
    started = time.perf_counter()
    run_command(run.train_command(), log_path, run.run_dir / TRAINER_RECORD, watch)
    record = {"settings": run.settings(), "train_data": file_fingerprint(run.train_path),
              "train_seconds": round(time.perf_counter() - started, 2)}
    write_atomically(run.run_dir / RUN_SETTINGS, json.dumps(record, indent=2).encode("utf8"))
    return record


def code_arguments(code_path: Optional[Path]) -> List[str]:
    """`--code PATH` for a command that loads the user's pipeline, or nothing."""
    return [] if code_path is None else ["--code", str(code_path)]


def evaluation_command(model_dir: Path, dev_path: Path, output: Path, gpu_id: int = -1, resamples: int = 10000,
                       random_seed: int = 0, code_path: Optional[Path] = None,
                       corpus: str = CONFIG_CORPUS) -> List[str]:
    return [sys.executable, "-m", "spacy_sla.tools.ab.evaluation_process", str(model_dir), str(dev_path), str(output),
            "--gpu-id", str(gpu_id), "--resamples", str(resamples), "--random-seed", str(random_seed),
            "--corpus", corpus, *code_arguments(code_path)]


def evaluate_saved_model(
    model_dir: Path,
    dev_path: Path,
    output: Path,
    *,
    gpu_id: int = -1,
    resamples: int = 10000,
    random_seed: int = 0,
    log_path: Optional[Path] = None,
    code_path: Optional[Path] = None,
    corpus: str = CONFIG_CORPUS,
) -> Dict[str, Any]:
    """Score a saved pipeline on a dev set (evaluation.py in its own
    process: the scores on the dev examples read as `corpus` says, the
    speed, the per-document statistics) into output, or read the
    evaluation made there before of the same model, dev file, reading and
    draws."""
    key = {"version": EVALUATION_VERSION, "model": file_fingerprint(model_dir / "meta.json"),
           "dev": file_fingerprint(dev_path), "resamples": resamples, "random_seed": random_seed, "corpus": corpus}
    if code_path is not None:
        key["code"] = file_fingerprint(code_path)
    if output.exists():
        kept = json.loads(output.read_text(encoding="utf8"))
        if kept.get("key") == key:
            return kept
    run_command(evaluation_command(model_dir, dev_path, output, gpu_id, resamples, random_seed, code_path, corpus),
                log_path)
    evaluation = json.loads(output.read_text(encoding="utf8"))
    evaluation["key"] = key
    write_atomically(output, json.dumps(evaluation).encode("utf8"))
    return evaluation


def evaluate(run: AbRun, log_path: Optional[Path] = None) -> Dict[str, Any]:
    """The run's model on the dev set (evaluate_saved_model); once the model
    is deleted, the evaluation recorded before (train() deletes it when the
    run trains again, so it belongs to this run's model) when it read the
    dev set the same way (evaluations before --eval-corpus read a plain Corpus)."""
    if not run.model_dir.exists():
        path = run.run_dir / EVALUATION
        recorded = json.loads(path.read_text(encoding="utf8")) if path.exists() else None
        if recorded is None or recorded.get("key", {}).get("corpus", "plain") != run.eval_corpus:
            raise ValueError(Errors.E044.format(run_dir=run.run_dir, model=run.model_dir,
                                                record=f"evaluation ({EVALUATION}) of the dev examples read with "
                                                       f"--eval-corpus {run.eval_corpus}"))
        return recorded
    return evaluate_saved_model(run.model_dir, run.dev_path, run.run_dir / EVALUATION, gpu_id=run.gpu_id,
                                resamples=run.resamples, random_seed=run.random_seed, log_path=log_path,
                                code_path=run.code_path, corpus=run.eval_corpus)


def record_mask_strata(run: AbRun) -> None:
    """Which dev documents the run's mask restricts (kept_strata), while the
    model is there; the reference has no local mask to ask."""
    if run.variant == REFERENCE:
        return
    try:
        kept_strata(run.model_dir, run.dev_path, run.run_dir, run.eval_corpus)
    except NoLocalMaskError:
        pass  # recorded as such; the report names the variant as left out


def drop_models(run: AbRun) -> None:
    for name in MODELS:
        shutil.rmtree(run.run_dir / name, ignore_errors=True)


def logged_evaluations(train_log: Path) -> List[Dict[str, Any]]:
    """Every evaluation `spacy train` logged as a JSON line (TRAIN_LOG: step,
    score, scores ×100, losses), in order; none for a run trained without the log."""
    if not train_log.exists():
        return []
    return [json.loads(line) for line in train_log.read_text(encoding="utf8").splitlines() if line.strip()]


def training_curve(run: AbRun) -> List[Dict[str, Any]]:
    """The weighted dev score and the logged scores (fractions) at every
    evaluation of the run, from spaCy's JSON lines."""
    return [{"step": entry["step"], "score": entry["score"],
             "scores": {key: value / 100 for key, value in entry.get("scores", {}).items()
                        if key != "speed" and isinstance(value, (int, float))}}
            for entry in logged_evaluations(run.run_dir / TRAIN_LOG)]


@dataclass
class AbResult:
    """What became of one run: of an A/B (an AbRun) or of the replication's experiment
    grid (anything with a name and a run_dir)."""

    run: Any
    status: str  # "trained", "kept", "failed" or NOT_RUN
    seconds: float
    record: Optional[Dict[str, Any]] = None  # the run's record with its scores (with "metric" and "score" in the replication's)
    error: str = ""
    log_tail: str = ""
    log_path: Optional[Path] = None  # the log that says why a run failed, where there is one
    failure: Optional[RunFailure] = None  # the failed step, what the log says of it

    @property
    def failed(self) -> bool:
        return self.status == "failed"


def execute(run: AbRun, working_dir: Optional[str] = None, logs: bool = False,
            watch: Optional[Callable[[], None]] = None) -> AbResult:
    """Train and evaluate one run; never raises for a failed run (its
    result says why), so a grid goes on. With logs, the commands' output
    goes to the run's train.log and evaluate.log; watch is called while it trains."""
    started = time.perf_counter()
    previous = os.getcwd()
    if working_dir is not None:
        if not Path(working_dir).is_dir():
            return AbResult(run, "failed", 0.0, error=f"the working directory {working_dir} is not on this node")
        os.chdir(working_dir)
    stage = TRAIN
    try:
        import_user_code(run.code_path)  # the mask strata load the model in this process
        record = train(run, run.run_dir / TRAIN_OUTPUT if logs else None, watch=watch)
        kept = bool(record.get("kept"))  # train() checked finished_settings (a hash of the training data) once
        stage = EVALUATE
        evaluation = evaluate(run, run.run_dir / EVALUATE_OUTPUT if logs else None)
        if run.by_mask:
            stage = "split the dev set by mask"
            record_mask_strata(run)
        if run.drop_models:
            drop_models(run)
        return AbResult(run, "kept" if kept else "trained", time.perf_counter() - started,
                         record={**record, "scores": evaluation["scores"]})
    except subprocess.CalledProcessError:
        log = run.run_dir / (TRAIN_OUTPUT if stage == TRAIN else EVALUATE_OUTPUT)
        failure = read_failure(stage, log if logs else None, run.run_dir / EVALUATION if stage == EVALUATE else None)
        message = failure_message(run, failure, run.run_dir / RUN_CONFIG,
                                  len(logged_evaluations(run.run_dir / TRAIN_LOG)))
        return AbResult(run, "failed", time.perf_counter() - started,
                         error=message,
                         log_tail=log_tail(log if logs else None), log_path=failure.log, failure=failure)
    except Exception as error:  # a broken config, an unreadable file: report, don't stop the grid
        return AbResult(run, "failed", time.perf_counter() - started, error=f"{stage}: {type(error).__name__}: {error}",
                         log_tail=traceback.format_exc(limit=-3))
    finally:
        os.chdir(previous)


def execute_logged(run: AbRun, working_dir: str) -> AbResult:
    """execute() as a Ray task's body: in the driver's working directory, output to the run's logs."""
    return execute(run, working_dir, logs=True)


def log_tail(path: Optional[Path], n_lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of a run's log, which say why it failed; nothing without a log."""
    if path is None or not path.exists():
        return ""
    return "\n".join(path.read_text(encoding="utf8", errors="replace").splitlines()[-n_lines:])


def lost_run(run: Any, error: str) -> AbResult:
    """The result of a run whose Ray task died; its training log may still say why."""
    log = run.run_dir / TRAIN_OUTPUT
    return AbResult(run, "failed", 0.0, error=f"the Ray task failed: {error}", log_tail=log_tail(log),
                    log_path=log if log.exists() else None)


def run_sequentially(runs: Sequence[AbRun], report: Callable[[str], None] = print) -> List[AbResult]:
    """Every run in order, its output in its own logs (train.log,
    evaluate.log) and a line for each here; once a failure is of a kind that
    every further run would repeat (repeating_failure), the others are not
    started: their results are NOT_RUN, with the reason. While a run trains,
    its progress is shown (progress.ProgressDisplay, on stdout)."""
    results: List[AbResult] = []
    display = ProgressDisplay(runs, lambda other: (other.run_dir / RUN_SETTINGS).exists())
    arms = list(dict.fromkeys(run.variant for run in runs))
    for position, run in enumerate(runs, 1):
        report(f"[{position}/{len(runs)}] {run.name}: " + " ".join(run.train_command())
               + f"    (output: {run.run_dir / TRAIN_OUTPUT}, {run.run_dir / EVALUATE_OUTPUT})")
        try:
            result = execute(run, logs=True, watch=display.watch(run, position))
        except AbInterrupted as stop:
            display.finished(NOT_RUN, 0.0)
            stop.run_name = run.name
            raise
        display.finished(result.status, result.seconds)
        results.append(result)
        report(progress_line(position, len(runs), result))
        reason = repeating_failure(results, arms) if result.failed else None
        if reason is not None and position < len(runs):
            return results + [not_run(other, reason) for other in runs[position:]]
    return results


def not_run(run: Any, reason: str) -> AbResult:
    """The result of a run not started, or stopped on Ray, because of a failure that it would repeat."""
    return AbResult(run, NOT_RUN, 0.0, error=reason)


def progress_line(done: int, total: int, result: AbResult) -> str:
    """A run's line as it finishes: its failure with the log to read, or
    whether it trained, with the headline score where its record has one."""
    prefix = f"[{done}/{total}] {result.run.name}"
    if result.failed:
        where = f" (log: {result.log_path})" if result.log_path else ""
        what = (f"at the {result.failure.stage} step, {result.failure.error}" if result.failure is not None
                else result.error)
        return f"{prefix} FAILED after {result.seconds:.0f} s: {what}{where}"
    if result.status == NOT_RUN:
        return f"{prefix} not run: a failure before it would repeat in it"
    verb = "trained and evaluated" if result.status == "trained" else "kept (finished before)"
    record = result.record or {}
    score = f": {record['metric']} = {record.get('score', float('nan')):.4f}" if "metric" in record else ""
    return f"{prefix} {verb} in {result.seconds:.0f} s{score}"
