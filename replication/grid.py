"""The experiment grid on Ray: every (task, variant, seed) run is one Ray
task that runs the same `spacy train` and `spacy evaluate` subprocesses as
the sequential path (experiments.train_run and evaluate_run) and writes the
same output layout (training/TASK/VARIANT/seedN, results/TASK/VARIANT/seedN.json),
so the two paths can take turns on one grid: finished runs with the same
settings are kept by either.

On a cluster, the working directory (configs/, corpus/, training/, results/
and the transformer and parser, if given as paths) must be on storage that
every node mounts at the same path: each task changes to the driver's working
directory before it runs (docs/usage.md, "Scaling out with Ray").

Ray is imported when a grid runs, never by `import spacy_sla`.
"""
import os
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import CalledProcessError
from typing import Any, Callable, Dict, List, Optional, Sequence

from spacy_sla.tools.ab.runs import (
    EVALUATE_OUTPUT,
    RUN_SETTINGS,
    TRAIN_OUTPUT,
    AbResult,
    log_tail,
    lost_run,
    progress_line,
)
from spacy_sla.tools.support.ray_session import run_grid

from .experiments import evaluate_run, markdown_table, summarize, train_run


@dataclass(frozen=True)
class GridRun:
    """One cell of the grid, with everything train_run and evaluate_run need."""

    task: str
    variant: str
    seed: int
    corpus_dir: Path
    training_dir: Path
    metrics_dir: Path
    transformer: str
    parser: str
    max_steps: Optional[int]  # None: the config's own
    eval_frequency: int
    configs_dir: Path = Path("configs")
    extra: Dict[str, Any] = field(default_factory=dict)
    gpu_id: int = -1
    force: bool = False

    @property
    def name(self) -> str:
        return f"{self.task}/{self.variant}/seed{self.seed}"

    @property
    def run_dir(self) -> Path:
        # train_run's layout: OUTPUT_DIR/VARIANT/seedN
        return self.training_dir / self.variant / f"seed{self.seed}"


def grid_runs(
    task: str,
    variants: Sequence[str],
    seeds: Sequence[int],
    corpus_dir: Path,
    training_dir: Path,
    metrics_dir: Path,
    **settings: Any,
) -> List[GridRun]:
    """The runs of a task, variant by variant, in the sequential path's order."""
    return [GridRun(task, variant, seed, corpus_dir, training_dir, metrics_dir, **settings)
            for variant in variants for seed in seeds]


def _modified(path: Path) -> Optional[int]:
    return path.stat().st_mtime_ns if path.exists() else None


def execute_run(run: GridRun, working_dir: str) -> AbResult:
    """Train (unless finished before with the same settings) and evaluate one
    run: the body of a Ray task, which never raises for a failed run, so
    that the driver can report it with its log and the others go on."""
    started = time.time()
    # Ray workers start in a directory of their own; the grid's paths are
    # relative to the driver's working directory, as in the sequential path
    # (and stay so in run.json, which is what "the same settings" compares).
    previous_dir = os.getcwd()
    if not Path(working_dir).is_dir():
        return AbResult(run, "failed", 0.0, error=(
            f"the working directory {working_dir} is not on this node: on a cluster, start the grid from storage "
            "that every node mounts at the same path (docs/usage.md, Scaling out with Ray)"))
    os.chdir(working_dir)
    try:
        stage, log_path = "train", run.run_dir / TRAIN_OUTPUT
        try:
            settings_before = _modified(run.run_dir / RUN_SETTINGS)
            train_run(run.task, run.variant, run.seed, run.corpus_dir, run.training_dir,
                      configs_dir=run.configs_dir, transformer=run.transformer, parser=run.parser,
                      max_steps=run.max_steps, eval_frequency=run.eval_frequency, gpu_id=run.gpu_id,
                      extra=run.extra, force=run.force, log_path=log_path)
            # train_run rewrites run.json only when it trained.
            trained = _modified(run.run_dir / RUN_SETTINGS) != settings_before
            stage, log_path = "evaluate", run.run_dir / EVALUATE_OUTPUT
            record = evaluate_run(run.task, run.run_dir, run.corpus_dir, run.metrics_dir, run.gpu_id,
                                  log_path=log_path)
        except CalledProcessError as error:
            return AbResult(run, "failed", time.time() - started,
                              error=f"`spacy {stage}` exited with status {error.returncode}",
                              log_path=log_path, log_tail=log_tail(log_path))
        except Exception as error:  # a missing config, an unreadable record, ...: report, don't kill the grid
            return AbResult(run, "failed", time.time() - started,
                              error=f"{stage}: {type(error).__name__}: {error}",
                              log_tail=traceback.format_exc(limit=-3))
        return AbResult(run, "trained" if trained else "kept", time.time() - started, record=record)
    finally:
        os.chdir(previous_dir)


def experiment_on_ray(
    task: str,
    variants: Sequence[str],
    seeds: Sequence[int],
    corpus_dir: Path,
    training_dir: Path,
    metrics_dir: Path,
    *,
    address: Optional[str] = None,
    cpus_per_run: float = 1.0,
    gpus_per_run: float = 0.0,
    gpu_id: int = -1,
    report: Callable[[str], None] = print,
    **settings: Any,
) -> int:
    """`python -m replication experiment --ray`: the grid on Ray, then the failures and
    the comparison table; returns the number of failed runs."""
    if gpu_id >= 0 and gpus_per_run <= 0:
        report(f"Note: --gpu-id {gpu_id} is ignored with --ray; give each run a GPU with --ray-gpus-per-run 1")
    # Ray hands each task its GPU(s) through CUDA_VISIBLE_DEVICES, where the
    # first one is device 0 (and a run recorded with gpu_id 0 on Ray is the
    # same run as one trained sequentially with --gpu-id 0).
    run_gpu = 0 if gpus_per_run > 0 else -1
    runs = grid_runs(task, variants, seeds, corpus_dir, training_dir, metrics_dir, gpu_id=run_gpu, **settings)
    report(f"{len(runs)} runs on Ray ({cpus_per_run:g} CPU and {gpus_per_run:g} GPU each), "
           f"{'cluster ' + address if address not in (None, '', 'local') else 'a local Ray instance or the running session'}")
    outcomes = run_grid(runs, address=address, cpus_per_run=cpus_per_run, gpus_per_run=gpus_per_run, report=report,
                        execute=execute_run, lost=lost_run, describe=progress_line)
    report(grid_report(outcomes))
    return sum(outcome.failed for outcome in outcomes)


def grid_report(outcomes: Sequence[AbResult]) -> str:
    """The failed runs with the tails of their logs, then the comparison
    table of the runs that have a record (experiments.markdown_table)."""
    parts = []
    for outcome in outcomes:
        if outcome.failed:
            parts.append(f"FAILED {outcome.run.name}: {outcome.error}")
            if outcome.log_tail:
                parts.append("\n".join("    " + line for line in outcome.log_tail.splitlines()))
    records = [outcome.record for outcome in outcomes if outcome.record is not None]
    if records:
        parts.append(markdown_table(summarize(records)))
    n_failed = sum(outcome.failed for outcome in outcomes)
    parts.append(f"{len(outcomes) - n_failed} of {len(outcomes)} runs finished, {n_failed} failed.")
    return "\n".join(parts)
