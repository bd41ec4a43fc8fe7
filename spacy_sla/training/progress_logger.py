"""The logger `spacy sla ab` adds to each run's config beside the user's:
where training is, as JSON lines the parent reads while the run trains
(progress.py shows them). spaCy calls a logger once per step, with the
step's info at an evaluation and None between them; this one writes a line
at every evaluation (step, losses since the previous one, weighted score)
and between them at most one per `every_seconds` (step only), each with
the seconds since training started, flushed at once so the parent sees it;
and a last line when training ends."""
import json
import time
from typing import IO, Any, Callable, Dict, Optional, Tuple

from spacy.language import Language
from spacy.util import registry

__all__ = ["PROGRESS_FILE", "progress_logger"]

PROGRESS_FILE = "train-progress.jsonl"

LogStep = Callable[[Optional[Dict[str, Any]]], None]


@registry.loggers("spacy-sla.ProgressLogger.v1")
def progress_logger(path: str, every_seconds: float = 1.0
                    ) -> Callable[[Language, IO[str], IO[str]], Tuple[LogStep, Callable[[], None]]]:
    """Training's progress as JSON lines in the file at path (written anew):
    {"step", "max_steps", "seconds"} and, at an evaluation, "losses" and
    "score"; {"done": true} when training ends."""

    def setup(nlp: Language, stdout: IO[str], stderr: IO[str]) -> Tuple[LogStep, Callable[[], None]]:
        max_steps = nlp.config["training"].get("max_steps") or 0
        output = open(path, "w", encoding="utf8")
        started = time.perf_counter()
        state = {"step": -1, "written": 0.0}

        def write(line: Dict[str, Any]) -> None:
            output.write(json.dumps(line) + "\n")
            output.flush()

        def log_step(info: Optional[Dict[str, Any]]) -> None:
            now = time.perf_counter()
            state["step"] = info["step"] if info is not None else state["step"] + 1
            if info is None and now - state["written"] < every_seconds:
                return
            state["written"] = now
            line: Dict[str, Any] = {"step": state["step"], "max_steps": max_steps, "seconds": round(now - started, 3)}
            if info is not None:
                line.update(losses={name: float(value) for name, value in info["losses"].items()},
                            score=float(info["score"]))
            write(line)

        def finalize() -> None:
            write({"step": state["step"], "max_steps": max_steps, "seconds": round(time.perf_counter() - started, 3),
                   "done": True})
            output.close()

        return log_step, finalize

    return setup
