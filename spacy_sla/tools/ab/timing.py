"""How long an A/B will train, said by `--dry-run` before anything runs: the
first run to train is trained for a few steps in a temporary folder (its
config, data and overrides, with an evaluation at the first and last step),
its progress lines timed (progress_logger.py), and the time of one run
(start-up + max_steps steps + its evaluations) multiplied by the runs to
train. The runs' scoring on the dev set afterwards is not timed. Where no
estimate can be made (training by epochs, nothing to train, a timing run
that fails, another call training into OUTPUT_DIR), it says why."""
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from spacy.util import load_config

from spacy_sla.training.progress_logger import PROGRESS_FILE

from ..support.files import write_atomically
from .processes import run_command
from .progress import duration, read_new_lines
from .runs import RUN_CONFIG, TRAIN_OUTPUT, AbRun, has_setting, log_tail, run_config

TIME_STEPS = 6  # steps of the timing run: the first and the last are evaluated, the ones between timed


def _timed_config(run: AbRun) -> str:
    config = run_config(run)
    config["training"]["logger"]["logger3"]["every_seconds"] = 0  # a line per step
    return config.to_str(interpolate=False)


def time_steps(run: AbRun, steps: int, work_dir: Path) -> Dict[str, float]:
    """Train `run` for `steps` steps in work_dir: seconds a step, an
    evaluation, and to start (from the command to the first step).
    Raises subprocess.CalledProcessError when training fails (its output
    is in work_dir's train.log)."""
    timed = replace(run, output_dir=work_dir, sizes_compared=False,
                    overrides={**run.overrides, "training.max_steps": steps, "training.eval_frequency": steps})
    timed.run_dir.mkdir(parents=True, exist_ok=True)
    write_atomically(timed.run_dir / RUN_CONFIG, _timed_config(timed).encode("utf8"))
    started = time.perf_counter()
    run_command(timed.train_command(), timed.run_dir / TRAIN_OUTPUT)
    wall = time.perf_counter() - started
    lines, _ = read_new_lines(timed.run_dir / PROGRESS_FILE, 0)
    seconds = {line["step"]: line["seconds"] for line in lines if "done" not in line}
    per_step = (seconds[steps - 1] - seconds[1]) / (steps - 2)
    # step 0 and the last step each took a step and an evaluation
    per_evaluation = max(0.0, (seconds[0] + seconds[steps] - seconds[steps - 1]) / 2 - per_step)
    training = max(line["seconds"] for line in lines)
    return {"step": per_step, "evaluation": per_evaluation, "start": max(0.0, wall - training)}


def budget_of(run: AbRun) -> Dict[str, Any]:
    """training.max_steps, max_epochs and eval_frequency of the run's config with its overrides."""
    raw = load_config(run.config_path, interpolate=False)
    settings = {key: value for key, value in run.overrides.items() if has_setting(raw, key)}
    training = load_config(run.config_path, overrides=settings, interpolate=True)["training"]
    return {key: training.get(key) for key in ("max_steps", "max_epochs", "eval_frequency")}


def estimate_lines(runs: Sequence[AbRun], to_train: Sequence[AbRun], steps: int = TIME_STEPS,
                   full_train_path: Optional[Path] = None, busy: Optional[str] = None) -> List[str]:
    """What --dry-run says of the time the runs to train will take, or why it cannot say.
    full_train_path: the training corpus, for a run whose sample is not drawn yet;
    busy: why nothing may be trained beside this call now."""
    if not to_train:
        return ["Time: nothing to train."]
    if steps <= 0:
        return ["Time: not estimated (--time-steps 0)."]
    if steps < 3:
        return [f"Time: not estimated: --time-steps {steps} is too few to time a step between two evaluations; "
                "give 3 or more."]
    if busy is not None:
        return [f"Time: not estimated: {busy}"]
    run = to_train[0]
    budget = budget_of(run)
    if not budget["max_steps"]:
        return [f"Time: not estimated: training.max_steps = 0 trains by epochs (training.max_epochs = "
                f"{budget['max_epochs']}), whose steps depend on the data and the batcher; give "
                "--training.max_steps N to have it estimated."]
    if not run.train_path.exists() and full_train_path is not None:
        run = replace(run, train_path=full_train_path)
    with tempfile.TemporaryDirectory(prefix="sla-ab-timing-") as folder:
        try:
            timed = time_steps(run, steps, Path(folder))
        except subprocess.CalledProcessError:
            tail = log_tail(Path(folder) / run.variant / f"seed{run.seed}" / TRAIN_OUTPUT, 3)
            return [f"Time: not estimated: the timing run of {run.name} ({steps} steps) failed:",
                    *("    " + line for line in tail.splitlines())]
        except (KeyError, ZeroDivisionError):  # stopped before its last step (patience), or steps not logged
            return [f"Time: not estimated: the timing run of {run.name} did not log its {steps} steps."]
    evaluations = budget["max_steps"] // max(1, budget["eval_frequency"] or 1) + 1
    per_run = timed["start"] + budget["max_steps"] * timed["step"] + evaluations * timed["evaluation"]
    return [f"Time: about {duration(per_run * len(to_train))} to train the {len(to_train)} run(s) left, "
            f"{duration(per_run)} each ({run.name} timed over {steps} steps: {timed['step']:.2f} s a step, "
            f"{timed['evaluation']:.1f} s an evaluation ({evaluations} a run), {timed['start']:.0f} s to start; "
            "other arms may take longer, and each run's scoring on the dev set comes on top)."]
