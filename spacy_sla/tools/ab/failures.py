"""Why a run of `spacy sla ab` failed, said so that a user can act on it:
the arm, the seed and the step (train or evaluate), where in the user's own
code the error was raised, the run's log, and whether plain `spacy train` /
`spacy evaluate` of that config fails the same way; and the failures that
every further run would repeat, so that those runs are not started."""
import json
import re
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from .errors import Errors
from .evaluation import LOAD, PLAIN_CORPUS, READ, SCORE, STATISTICS, failure_path

TRAIN, EVALUATE = "train", "evaluate"
# how thinc's ConfigValidationError starts, and the title spaCy's commands print for one in a component's block
CONFIG_VALIDATION = ("Config validation error", "Config error for")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)')
_TRACEBACK = "Traceback (most recent call last):"


@dataclass
class RunFailure:
    """A failed step of a run: `error` is the exception's type and first line."""

    stage: str  # TRAIN or EVALUATE
    error: str
    log: Optional[Path] = None
    evaluation_step: str = ""  # within the evaluation: evaluation.py's LOAD, READ, SCORE or STATISTICS
    corpus: Dict[str, Any] = field(default_factory=dict)  # how the evaluation read the dev examples
    user_frames: List[str] = field(default_factory=list)  # "FILE:LINE (FUNCTION)", outermost first
    config_validation: bool = False

    @property
    def signature(self) -> tuple:
        """What makes two failures the same failure."""
        return self.stage, self.evaluation_step, self.error


def _library_roots() -> List[Path]:
    paths = sysconfig.get_paths()
    roots = {Path(paths[key]).resolve() for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    return sorted(roots | {Path(__file__).resolve().parents[2]})  # and spacy_sla itself


def user_frames(frames: Sequence[Dict[str, Any]]) -> List[str]:
    """The frames of code that is neither Python's, an installed package's
    nor spacy-sla's: the user's --code file and what it imports."""
    roots = _library_roots()
    kept = []
    for frame in frames:
        if frame["file"].startswith("<"):
            continue
        path = Path(frame["file"]).resolve()
        if not any(path.is_relative_to(root) for root in roots):
            kept.append(f"{frame['file']}:{frame['line']} ({frame['function']})")
    return kept


def logged_failure(text: str) -> Dict[str, Any]:
    """The error a log ends with: the exception line of its last traceback
    (with the frames of every traceback in it: a chained error starts in the
    first), or the last failure spaCy's command printed without one (its
    "✘" line and the line that says what), e.g. for a config it refuses."""
    lines = _ANSI.sub("", text).splitlines()
    starts = [index for index, line in enumerate(lines) if line.startswith(_TRACEBACK)]
    frames = [match.groupdict() for line in lines if (match := _FRAME.match(line))]
    error = next((line.strip() for line in reversed(lines) if line.strip()), "")
    printed = [index for index, line in enumerate(lines) if line.lstrip().startswith("✘")]
    if starts:
        error = next((line.strip() for line in lines[starts[-1] + 1:] if line.strip() and not line.startswith(" ")),
                     error)
    elif printed:
        detail = next((line for line in lines[printed[-1] + 1:] if line.strip()), "")
        error = lines[printed[-1]].strip().lstrip("✘").strip() + (f": {' '.join(detail.split())}" if detail else "")
    tail = "\n".join(lines[starts[-1]:] if starts else lines[printed[-1]:] if printed else lines)
    return {"error": error, "frames": frames, "config_validation": any(title in tail for title in CONFIG_VALIDATION)}


def read_failure(stage: str, log: Optional[Path], evaluation_output: Optional[Path] = None) -> RunFailure:
    """What the log (and, for the evaluation, its failure record) says."""
    text = log.read_text(encoding="utf8", errors="replace") if log is not None and log.exists() else ""
    logged = logged_failure(text)
    failure = RunFailure(stage, logged["error"] or "see the log", log if text else None,
                         user_frames=user_frames(logged["frames"]), config_validation=logged["config_validation"])
    record_path = failure_path(evaluation_output) if evaluation_output is not None else None
    if stage == EVALUATE and record_path is not None and record_path.exists():
        record = json.loads(record_path.read_text(encoding="utf8"))
        failure.error, failure.evaluation_step, failure.corpus = record["error"], record["step"], record["corpus"]
        failure.user_frames = user_frames(record["frames"])
    return failure


def run_label(run: Any) -> str:
    size = f", training size {run.size}" if getattr(run, "sizes_compared", False) else ""
    return f"the {run.variant} arm, seed {run.seed}{size}"


def same_way(run: Any, failure: RunFailure, run_config: Path, logged_evaluations: int) -> str:
    """Whether plain `spacy train` / `spacy evaluate` of the arm's config
    fails the same way, by what the failed step is."""
    code = "" if run.code_path is None else f" --code {run.code_path}"
    if failure.stage == TRAIN:
        return (f"The train step is plain `spacy train` of the arm's config with the run's data, seed and overrides "
                f"(`python -m spacy train {run_config} --output DIR{code}`), which fails the same way.")
    evaluate = f"`python -m spacy evaluate {run.model_dir} {run.dev_path}{code}`"
    reader = failure.corpus.get("reader") or "its reader"
    dev_corpus = f"[training] dev_corpus ({failure.corpus.get('dev_corpus', 'corpora.dev')}: {reader})"
    trained = (f"; it logged {logged_evaluations} evaluation(s) of this run without failing (train-log.jsonl)"
               if logged_evaluations else "")
    step = failure.evaluation_step
    if step == LOAD:
        return f"Loading the trained model failed: {evaluate} loads it the same way and fails the same way."
    if step == STATISTICS:
        return ("It failed in the per-document statistics of the bootstrap (the components' scorers on parts of "
                "the dev set), which neither `spacy train` nor `spacy evaluate` runs: both score the whole dev set.")
    what = "reading the dev examples" if step == READ else "predicting and scoring the dev examples (nlp.evaluate)"
    if failure.corpus.get("mode") == PLAIN_CORPUS:
        return (f"It failed {what} with a plain spaCy Corpus over the dev file (--eval-corpus plain): {evaluate} "
                f"does the same and fails the same way. `spacy train` scores with the arm's {dev_corpus}{trained}; "
                "without --eval-corpus plain, ab reads the dev set as training does.")
    if step in (READ, SCORE):
        return (f"It failed {what} as `spacy train` reads and scores them (the arm's {dev_corpus}, then "
                f"nlp.evaluate), so the evaluation inside `spacy train` of this model fails the same way{trained}. "
                f"{evaluate} reads a plain Corpus instead (--eval-corpus plain).")
    return "See the log for the step that failed."


def failure_message(run: Any, failure: RunFailure, run_config: Path, logged_evaluations: int) -> str:
    """[SLA-E100]: the run, the step, the error and where the user's code raised it, whether plain spaCy fails
    the same way, and the log."""
    where = f" (raised in your code at {failure.user_frames[-1]})" if failure.user_frames else ""
    return Errors.E100.format(run=run_label(run), stage=failure.stage, error=failure.error, where=where,
                              same_way=same_way(run, failure, run_config, logged_evaluations),
                              log=failure.log or "none (the step wrote no log)")


def repeating_failure(results: Sequence[Any], arms: Sequence[str], latest: Any = None) -> Optional[str]:
    """Why the runs not yet finished would fail as the finished ones did, or
    None: a config that spaCy's validation refuses (every run of it is
    refused), or the same error at the same step in the first finished run
    of every arm. `results` are the finished AbResults in the order of the
    plan, `latest` the one that finished last (default: the last)."""
    latest = latest if latest is not None else (results[-1] if results else None)
    failure = getattr(latest, "failure", None)
    if failure is not None and failure.config_validation:
        return (f"{run_label(latest.run)} was refused by spaCy's config validation ({failure.error}), which every "
                "run of that config repeats.")
    firsts: Dict[str, Any] = {}
    for result in results:
        firsts.setdefault(result.run.variant, result)
    if len(arms) < 2 or set(firsts) != set(arms):
        return None
    failures = [failure for arm in arms if (failure := getattr(firsts[arm], "failure", None)) is not None]
    if len(failures) < len(arms) or len({failure.signature for failure in failures}) > 1:
        return None
    return (f"the first run of every arm ({', '.join(run_label(firsts[arm].run) for arm in arms)}) failed at the "
            f"{failures[0].stage} step with the same error ({failures[0].error}), which the other runs would repeat.")
