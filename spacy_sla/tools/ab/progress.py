"""Where the A/B is while a run trains, shown the way spaCy shows training:
per run the step out of max_steps, the losses and the weighted dev score of
the last evaluation, the time spent and the time left for the run and for
the whole A/B (from the runs trained so far in this call).

The training child writes its progress as JSON lines (spacy_sla/training/progress_logger.py,
a logger ab adds beside the config's own); ProgressDisplay reads the new
lines while the parent waits for the child (processes.run_command's
`watch`). On a terminal it is a live tqdm line, as spaCy's progress bars
are; otherwise (CI, nohup, a file) one plain line per evaluation, and one
at most every HEARTBEAT_SECONDS between them."""
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Dict, List, Optional, Sequence

from tqdm import tqdm

from spacy_sla.training.progress_logger import PROGRESS_FILE

HEARTBEAT_SECONDS = 60.0  # a plain line between evaluations at most this often


def read_new_lines(path: Path, offset: int) -> "tuple[List[Dict[str, Any]], int]":
    """The complete JSON lines of path after byte offset, and the offset after them."""
    try:
        with path.open("rb") as file:
            file.seek(offset)
            data = file.read()
    except OSError:
        return [], offset
    complete = data[:data.rfind(b"\n") + 1]
    entries = []
    for line in complete.splitlines():
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue  # a line cut by a killed child: the next ones still count
    return entries, offset + len(complete)


def duration(seconds: float) -> str:
    return tqdm.format_interval(max(0.0, seconds))


@dataclass
class RunWatch:
    """What is known of one training run: its latest progress line and last evaluation."""

    name: str
    path: Path
    started: float
    offset: int = 0
    latest: Dict[str, Any] = field(default_factory=dict)
    evaluation: Dict[str, Any] = field(default_factory=dict)
    printed: float = 0.0
    bar: Optional[Any] = None

    def seconds_left(self) -> Optional[float]:
        """The run's steps left at the pace of its steps so far (evaluations included)."""
        step, max_steps, seconds = self.latest.get("step"), self.latest.get("max_steps"), self.latest.get("seconds")
        if not max_steps or step is None or step < 1 or not seconds:
            return None
        return max(0, max_steps - step) * seconds / step


class ProgressDisplay:
    """The progress of a sequence of runs, polled while each one trains."""

    def __init__(self, runs: Sequence[Any], finished_before: Callable[[Any], bool],
                 stream: Optional[IO[str]] = None, live: Optional[bool] = None,
                 heartbeat_seconds: float = HEARTBEAT_SECONDS):
        self.runs = list(runs)
        self.finished_before = finished_before  # whether a run has the record of a finished run (then it is kept)
        self.stream = stream or sys.stdout
        self.live = self.stream.isatty() if live is None else live
        self.heartbeat_seconds = heartbeat_seconds
        self.trained_seconds: List[float] = []  # of the runs trained and evaluated in this call
        self.current: Optional[RunWatch] = None
        self.position = 0

    def watch(self, run: Any, position: int) -> Callable[[], None]:
        """The poll of the run at position (1-based) while it trains."""
        self.position = position
        self.current = RunWatch(run.name, run.run_dir / PROGRESS_FILE, time.perf_counter())
        return self.poll

    def finished(self, status: str, seconds: float) -> None:
        """A run's end: its time counts towards the A/B's estimate when it trained."""
        if status == "trained":
            self.trained_seconds.append(seconds)
        if self.current is not None and self.current.bar is not None:
            self.current.bar.close()
        self.current = None

    def runs_after(self) -> int:
        """The runs after the current one that will train: those without a record of a finished run."""
        return sum(1 for run in self.runs[self.position:] if not self.finished_before(run))

    def ab_seconds_left(self, watch: RunWatch, run_left: Optional[float]) -> Optional[float]:
        if run_left is None:
            return None
        per_run = (sum(self.trained_seconds) / len(self.trained_seconds) if self.trained_seconds
                   else time.perf_counter() - watch.started + run_left)
        return run_left + self.runs_after() * per_run

    def poll(self) -> None:
        watch = self.current
        if watch is None:
            return
        entries, watch.offset = read_new_lines(watch.path, watch.offset)
        if not entries:
            return
        evaluations = [entry for entry in entries if "score" in entry]
        if not self.live:
            # evaluations read together (a fast run between two polls) each get their line
            for earlier in evaluations[:-1]:
                watch.latest = watch.evaluation = earlier
                print(self.line(watch), file=self.stream, flush=True)
        watch.latest = entries[-1]
        if evaluations:
            watch.evaluation = evaluations[-1]
        if self.live:
            self._show_live(watch)
        elif evaluations or time.perf_counter() - watch.printed >= self.heartbeat_seconds:
            watch.printed = time.perf_counter()
            print(self.line(watch), file=self.stream, flush=True)

    def describe(self, watch: RunWatch) -> List[str]:
        """The parts of a progress line after the step: losses, score, times."""
        parts = []
        if watch.evaluation:
            losses = watch.evaluation.get("losses") or {}
            if losses:
                parts.append("loss " + " ".join(f"{name} {value:.2f}" for name, value in losses.items()))
            parts.append(f"score {watch.evaluation['score']:.2f} (step {watch.evaluation['step']})")
        run_left = watch.seconds_left()
        parts.append(f"{duration(time.perf_counter() - watch.started)} elapsed")
        if run_left is not None:
            ab_left = self.ab_seconds_left(watch, run_left)
            done = f"from {len(self.trained_seconds)} run(s) trained" if self.trained_seconds else "from this run"
            parts.append(f"run ~{duration(run_left)} left, A/B ~{duration(ab_left or 0.0)} left ({done})")
        return parts

    def line(self, watch: RunWatch) -> str:
        max_steps = watch.latest.get("max_steps")
        step = f"step {watch.latest.get('step', 0)}" + (f"/{max_steps}" if max_steps else "")
        return f"[{self.position}/{len(self.runs)}] {watch.name}: " + ", ".join([step, *self.describe(watch)])

    def _show_live(self, watch: RunWatch) -> None:
        if watch.bar is None:
            watch.bar = tqdm(total=watch.latest.get("max_steps") or None, desc=f"[{self.position}/{len(self.runs)}] "
                             f"{watch.name}", unit="step", file=self.stream, leave=False, dynamic_ncols=True,
                             bar_format="{desc}: {n_fmt}/{total_fmt} {bar} {postfix}")
        watch.bar.n = watch.latest.get("step", 0)
        watch.bar.set_postfix_str(", ".join(self.describe(watch)), refresh=False)
        watch.bar.refresh()
