"""Finished runs in OUTPUT_DIR that a call of `spacy sla ab` would train
again: a run folder whose record (run.json) says it finished with other
settings or on other training data than the run the call plans there.
Training it would replace its models and records, so ab refuses
([SLA-E145]) unless `--replace` says so, and `--dry-run` says per run
whether it is kept, would be replaced or is to train (run_status)."""
import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..support.files import file_fingerprint
from .data import SAMPLES
from .errors import Errors
from .runs import EVALUATION, RUN_SETTINGS, AbRun, finished_settings

KEPT = "kept (finished before with the same settings), nothing to run"
WOULD_REPLACE = "would replace (needs --replace): finished before with other settings"
REPLACES = "to train, replacing what finished before with other settings (--replace)"
TO_TRAIN = "to train"
SHOWN_CHANGES = 4  # settings named per group of runs in [SLA-E145]; the rest are counted
CONFIG_VALUE = "the config's value"  # an override one of the two calls did not give


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def setting_changes(recorded: Dict[str, Any], current: Dict[str, Any]) -> List[str]:
    """The settings in which a recorded run differs from the planned one, as
    `KEY: BEFORE -> NOW`; the overrides one by one under their own dotted
    names (`training.max_steps: 40 -> 2`), a config or code file by its
    SHA-256 (edited since)."""
    changes = []
    before, now = recorded.get("overrides") or {}, current.get("overrides") or {}
    for key in sorted(set(before) | set(now)):
        if before.get(key, CONFIG_VALUE) != now.get(key, CONFIG_VALUE):
            changes.append(f"{key}: {_shown(before.get(key, CONFIG_VALUE))} -> {_shown(now.get(key, CONFIG_VALUE))}")
    for key in sorted(set(recorded) | set(current)):
        if key == "overrides" or recorded.get(key) == current.get(key):
            continue
        if key.endswith("_sha256"):
            changes.append(f"{key[:-len('_sha256')]} file edited (SHA-256 {str(recorded.get(key))[:10]} -> "
                           f"{str(current.get(key))[:10]})")
        else:
            changes.append(f"{key}: {_shown(recorded.get(key))} -> {_shown(current.get(key))}")
    return changes


def _recorded(run: AbRun) -> Optional[Dict[str, Any]]:
    """run.json of a run that finished (its model or its evaluation is there), whatever its settings."""
    path = run.run_dir / RUN_SETTINGS
    if not (path.is_file() and (run.model_dir.exists() or (run.run_dir / EVALUATION).exists())):
        return None
    try:
        record = json.loads(path.read_text(encoding="utf8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def samples_redrawn(train_path: Path, data_dir: Path, sample_seed: int) -> bool:
    """Whether the training samples recorded in data_dir were drawn from
    another corpus (the file at train_path changed since) or with another
    seed, so that drawing them again would change every sampled run's data."""
    path = data_dir / SAMPLES
    if not path.is_file() or not train_path.exists():
        return False
    kept = json.loads(path.read_text(encoding="utf8"))
    return kept.get("fingerprint") != file_fingerprint(train_path) or kept.get("sample_seed") != sample_seed


def replaced_by(run: AbRun, redrawn: bool = False) -> List[str]:
    """What differs in the finished run at the run's folder (setting_changes,
    or its training data), or nothing when no finished run is there or it is
    the same run (kept). redrawn: the training samples will be drawn again
    (samples_redrawn)."""
    record = _recorded(run)
    if record is None:
        return []
    changes = setting_changes(record.get("settings") or {}, run.settings())
    sampled = run.size is not None
    if not changes and ((sampled and redrawn) or (not sampled and finished_settings(run) is None)):
        changes.append(f"training data: {run.train_path} changed since"
                       + (" the sample was drawn" if sampled else " the run trained on it"))
    return changes


def earlier_runs_of_other_settings(runs: Sequence[AbRun], redrawn: bool = False
                                   ) -> List[Tuple[AbRun, List[str]]]:
    """Every run whose folder holds a finished run that training would replace, with what differs."""
    found = [(run, replaced_by(run, redrawn)) for run in runs]
    return [(run, changes) for run, changes in found if changes]


def check_nothing_replaced(output_dir: Path, runs: Sequence[AbRun], redrawn: bool = False) -> None:
    """[SLA-E145] when training these runs would replace finished runs of
    other settings: each group of runs with the settings that differ."""
    earlier = earlier_runs_of_other_settings(runs, redrawn)
    if not earlier:
        return
    groups: Dict[Tuple[str, ...], List[str]] = {}
    for run, changes in earlier:
        groups.setdefault(tuple(changes), []).append(run.name)
    described = []
    for changed, names in groups.items():
        shown = "; ".join(changed[:SHOWN_CHANGES]) + (
            f"; and {len(changed) - SHOWN_CHANGES} more" if len(changed) > SHOWN_CHANGES else "")
        described.append(f"{', '.join(names)} ({shown})")
    raise ValueError(Errors.E145.format(output_dir=output_dir, n_runs=len(earlier), runs="; ".join(described)))


def run_status(run: AbRun, replace: bool = False, redrawn: bool = False) -> str:
    """What a call would do with the run: KEPT, TO_TRAIN, or, for a finished
    run of other settings, WOULD_REPLACE (REPLACES with --replace) and what differs."""
    changes = replaced_by(run, redrawn)
    if changes:
        return f"{REPLACES if replace else WOULD_REPLACE} ({'; '.join(changes)})"
    return KEPT if finished_settings(run) is not None else TO_TRAIN


def runs_to_train(runs: Sequence[AbRun], redrawn: bool = False) -> List[AbRun]:
    """The runs a call would train (with --replace where it needs it): not
    kept, nor restored records whose training sample is not drawn yet."""
    return [run for run in runs
            if not ((run.run_dir / RUN_SETTINGS).exists() and not run.train_path.exists())
            and run_status(run, True, redrawn) != KEPT]
