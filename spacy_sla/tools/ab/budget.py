"""Whether a run's training budget lets its learning-rate schedule train:
`training.max_steps` against the schedule's `warmup_steps` and
`total_steps` ([SLA-W018], before any run trains), and whether the main
score's dev curve still rises at the last evaluation ([SLA-W019], in the
report).

The schedule is read generically: every `warmup_steps` and `total_steps`
under `[training.optimizer]` of the config as training resolves it (thinc's
warmup_linear.v1, and any other schedule, or a schedule wrapping one, that
names them). A run that stops before the warm-up ends never reaches the
learning rate the schedule was made for (with warmup_linear.v1 at 40 of 250
warm-up steps, 16 % of it): the A/B then compares untrained models."""
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from spacy.util import load_config

from .errors import Warnings
from .runs import has_setting

WARMUP, TOTAL = "warmup_steps", "total_steps"
FAR_BEFORE = 0.5  # max_steps below this fraction of total_steps: the schedule's decay is mostly never reached
WARMUP_SHARE = 10  # the suggested warm-up: a tenth of the steps, as transformer fine-tuning commonly uses
RISING_TOLERANCE = 1e-9  # of a score in [0, 1]: a last evaluation equal to an earlier one is not a rise


def _schedule_steps(node: Any, prefix: str) -> Iterator[Tuple[str, str, int]]:
    """(dotted path, WARMUP or TOTAL, value) of every whole-number step setting under node."""
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        path = f"{prefix}.{key}"
        if key in (WARMUP, TOTAL) and isinstance(value, int) and not isinstance(value, bool):
            yield path, key, value
        else:
            yield from _schedule_steps(value, path)


def suggested_overrides(max_steps: int, warmup_path: str, total_path: str) -> str:
    """The two overrides that fit a schedule to max_steps: a warm-up of a
    tenth of it (at least one step) and the decay ending with the run."""
    return f"--{warmup_path} {max(1, max_steps // WARMUP_SHARE)} --{total_path} {max_steps}"


def budget_problems(config: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Each schedule of the (interpolated) config whose warm-up ends after
    training.max_steps or whose total_steps is far beyond it: max_steps,
    warm-up and total (None where the schedule has none) and their paths."""
    training = config.get("training") or {}
    max_steps = training.get("max_steps")
    if not isinstance(max_steps, int) or max_steps <= 0:
        return []  # training by epochs: the number of steps depends on the data
    schedules: Dict[str, Dict[str, Any]] = {}
    for path, key, value in _schedule_steps(training.get("optimizer"), "training.optimizer"):
        schedules.setdefault(path.rsplit(".", 1)[0], {})[key] = (path, value)
    problems = []
    for block, steps in sorted(schedules.items()):
        warmup, total = steps.get(WARMUP, (None, None)), steps.get(TOTAL, (None, None))
        if (warmup[1] is not None and warmup[1] >= max_steps) or \
                (total[1] is not None and max_steps < FAR_BEFORE * total[1]):
            problems.append({"max_steps": max_steps, "warmup_steps": warmup[1], "total_steps": total[1],
                             "warmup_path": warmup[0] or f"{block}.{WARMUP}",
                             "total_path": total[0] or f"{block}.{TOTAL}"})
    return problems


def budget_warning(problem: Dict[str, Any], where: str) -> str:
    """[SLA-W018] for one of budget_problems."""
    max_steps, warmup, total = problem["max_steps"], problem["warmup_steps"], problem["total_steps"]
    if warmup is not None and warmup >= max_steps:
        issue = (f"before the learning-rate warm-up ends ({problem['warmup_path']} = {warmup}): the rate never "
                 f"passes {max_steps / warmup:.0%} of its peak, so the models barely train")
    else:
        issue = (f"at {max_steps / total:.1%} of the schedule's {problem['total_path']} = {total}: the rate never "
                 "decays as the schedule plans")
    return Warnings.W018.format(where=where, max_steps=max_steps, issue=issue,
                                overrides=suggested_overrides(max_steps, problem["warmup_path"],
                                                              problem["total_path"]))


def config_budget_warnings(config_path: Path, overrides: Dict[str, Any], where: str) -> List[str]:
    """[SLA-W018] for the config at config_path with the run's overrides (those it has), as training reads it."""
    raw = load_config(config_path, interpolate=False)
    settings = {key: value for key, value in overrides.items() if has_setting(raw, key)}
    config = load_config(config_path, overrides=settings, interpolate=True)
    return [budget_warning(problem, where) for problem in budget_problems(config)]


def rising_at_the_end(curve: Dict[int, float]) -> Optional[Tuple[int, float, float]]:
    """(last step, the best score before it, the last score) when the last
    evaluation of a dev curve is above every earlier one, else None."""
    if len(curve) < 2:
        return None
    steps = sorted(curve)
    earlier = max(curve[step] for step in steps[:-1])
    last = curve[steps[-1]]
    return (steps[-1], earlier, last) if last > earlier + RISING_TOLERANCE else None


def rising_curve_warnings(curves: Dict[str, Dict[int, float]], arms: Sequence[str], where: str) -> List[str]:
    """[SLA-W019] naming the arms whose main-score dev curve (mean over seeds) still rises at its last evaluation."""
    rising = {arm: rising_at_the_end(curves.get(arm, {})) for arm in arms}
    named = [f"{arm} ({100 * found[1]:.2f} at best before, {100 * found[2]:.2f} at step {found[0]})"
             for arm, found in rising.items() if found is not None]
    return [Warnings.W019.format(arms=", ".join(named), where=where)] if named else []
