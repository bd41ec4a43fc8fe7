"""The progress of a training run as `spacy sla ab` shows it: read from the
JSON lines the run's logger writes, one plain line per evaluation when the
output is not a terminal, a live tqdm line when it is, with the estimates
of the time left for the run and for the A/B."""
import io
import json
import re
from pathlib import Path
from typing import Any, Dict

from spacy_sla.tools.ab.progress import ProgressDisplay, read_new_lines
from spacy_sla.tools.ab.runs import AbRun
from spacy_sla.training.progress_logger import PROGRESS_FILE


def runs(tmp_path: Path):
    config = tmp_path / "vanilla.cfg"
    return [AbRun(variant, seed, None, config, tmp_path / "out", tmp_path / "train.spacy", tmp_path / "dev.spacy")
            for seed in (0, 1) for variant in ("vanilla", "sla")]


def append(path: Path, **line: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf8") as file:
        file.write(json.dumps(line) + "\n")


def evaluation(step: int, seconds: float, score: float) -> Dict[str, Any]:
    return {"step": step, "max_steps": 40, "seconds": seconds, "losses": {"transformer": 1.5, "textcat": 0.25},
            "score": score}


def test_only_complete_lines_are_read(tmp_path):
    path = tmp_path / PROGRESS_FILE
    assert read_new_lines(path, 0) == ([], 0)
    path.write_text('{"step": 1}\n{"step": 2}\n{"ste', encoding="utf8")
    entries, offset = read_new_lines(path, 0)
    assert entries == [{"step": 1}, {"step": 2}] and offset == len('{"step": 1}\n{"step": 2}\n')
    with path.open("a", encoding="utf8") as file:
        file.write('p": 3}\n')
    assert read_new_lines(path, offset) == ([{"step": 3}], len(path.read_text(encoding="utf8")))


def test_plain_lines_at_each_evaluation_with_the_estimates(tmp_path):
    planned = runs(tmp_path)
    stream = io.StringIO()
    display = ProgressDisplay(planned, lambda run: False, stream=stream, live=False)
    poll = display.watch(planned[0], 1)
    path = planned[0].run_dir / PROGRESS_FILE
    append(path, **evaluation(0, 2.0, 0.1))
    append(path, step=5, max_steps=40, seconds=12.0)  # a step between evaluations: no line before the heartbeat
    poll()
    append(path, **evaluation(10, 20.0, 0.42))
    poll()
    poll()  # nothing new: nothing printed
    first, second = stream.getvalue().splitlines()
    # the latest step with the last evaluation
    assert first.startswith("[1/4] vanilla/seed0: step 5/40, loss transformer 1.50 textcat 0.25, score 0.10 (step 0), ")
    assert second.startswith("[1/4] vanilla/seed0: step 10/40, loss transformer 1.50 textcat 0.25, score 0.42 (step 10)")
    # 30 steps left at 2 s a step; no run has finished, so each of the 3 after it takes as long as this one
    match = re.search(r"run ~(\S+) left, A/B ~(\S+) left \(from this run\)$", second)
    assert match and match.group(1) == "01:00"
    display.finished("trained", 100.0)
    poll = display.watch(planned[1], 2)
    append(planned[1].run_dir / PROGRESS_FILE, **evaluation(20, 20.0, 0.3))
    poll()
    last = stream.getvalue().splitlines()[-1]
    # 20 steps at 1 s a step left, then the 2 runs after it at the 100 s of the run trained
    assert last.endswith("run ~00:20 left, A/B ~03:40 left (from 1 run(s) trained)"), last


def test_evaluations_read_in_one_poll_each_get_their_line(tmp_path):
    planned = runs(tmp_path)
    stream = io.StringIO()
    poll = ProgressDisplay(planned, lambda run: False, stream=stream, live=False).watch(planned[0], 1)
    path = planned[0].run_dir / PROGRESS_FILE
    for step, score in ((0, 0.1), (10, 0.2), (20, 0.3)):
        append(path, **evaluation(step, 2.0 * step, score))
    append(path, step=25, max_steps=40, seconds=50.0)
    poll()
    steps = [re.match(r"\[1/4\] vanilla/seed0: step (\d+)/40, .*score (\S+) \(step (\d+)\)", line).groups()
             for line in stream.getvalue().splitlines()]
    assert steps == [("0", "0.10", "0"), ("10", "0.20", "10"), ("25", "0.30", "20")]


def test_runs_finished_before_are_not_counted_in_the_estimate(tmp_path):
    planned = runs(tmp_path)
    display = ProgressDisplay(planned, lambda run: run.seed == 1, stream=io.StringIO(), live=False)
    display.watch(planned[0], 1)
    assert display.runs_after() == 1  # sla/seed0; seed 1's runs are kept


def test_a_terminal_gets_a_live_line(tmp_path):
    planned = runs(tmp_path)
    stream = io.StringIO()
    display = ProgressDisplay(planned, lambda run: False, stream=stream, live=True)
    poll = display.watch(planned[0], 1)
    append(planned[0].run_dir / PROGRESS_FILE, **evaluation(10, 20.0, 0.42))
    poll()
    shown = stream.getvalue()
    assert "\r" in shown and "[1/4] vanilla/seed0: 10/40" in shown and "score 0.42 (step 10)" in shown
    display.finished("trained", 30.0)
    assert display.current is None and display.trained_seconds == [30.0]
