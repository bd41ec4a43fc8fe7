"""The files `spacy sla ab` writes into OUTPUT_DIR beside the runs (plan.json,
the report), recorded by SHA-256 in .ab-files.json: ab overwrites only
those it wrote itself, never a file of the same name that someone else put
there ([SLA-E064])."""
import hashlib
import json
from pathlib import Path
from typing import List, Sequence

from ..init_config.variant_blocks import REFERENCE
from ..support.files import write_atomically
from .errors import Errors

PLAN = "plan.json"
REPORT = "report"
INTERIM_REPORT = "report-interim"  # --report-only while another call holds OUTPUT_DIR
REPORT_SUFFIXES = (".md", ".json", ".png")
AB_FILES = ".ab-files.json"  # the plan and report files ab wrote, by SHA-256: the only ones it overwrites
INTERIM_FILES = ".ab-interim-files.json"  # the same for the interim report, written beside a running call


def report_names(stem: str = REPORT) -> List[str]:
    return [stem + suffix for suffix in REPORT_SUFFIXES]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _is_ab_plan(path: Path) -> bool:
    """Whether path is a plan.json that ab wrote (by its content)."""
    try:
        plan = json.loads(path.read_text(encoding="utf8"))
    except (OSError, ValueError):
        return False
    return isinstance(plan, dict) and plan.get("reference") == REFERENCE and {"config_dir", "variants",
                                                                             "configs"} <= set(plan)


def foreign_outputs(output_dir: Path, names: Sequence[str], record: str = AB_FILES) -> List[str]:
    """The files of `names` in output_dir that ab did not write: not in its
    record with their content. An output directory of a version of ab that
    kept no record is recognised by its plan.json."""
    present = [name for name in names if (output_dir / name).exists()]
    if not present:
        return []
    record_path = output_dir / record
    if not record_path.exists():
        if _is_ab_plan(output_dir / PLAN):
            return []
        return present
    try:
        written = json.loads(record_path.read_text(encoding="utf8"))
    except ValueError:
        written = {}
    return [name for name in present
            if not (output_dir / name).is_file() or written.get(name) != _sha256(output_dir / name)]


def check_outputs(output_dir: Path, names: Sequence[str], record: str = AB_FILES) -> None:
    """[SLA-E064] unless every file of names in output_dir is one ab wrote."""
    foreign = foreign_outputs(output_dir, names, record)
    if foreign:
        raise ValueError(Errors.E064.format(files=", ".join(foreign), output_dir=output_dir, record=record))


def record_outputs(output_dir: Path, paths: Sequence[Path], record: str = AB_FILES) -> None:
    """Add files ab has just written to its record, so a later call may replace them."""
    record_path = output_dir / record
    try:
        written = json.loads(record_path.read_text(encoding="utf8")) if record_path.exists() else {}
    except ValueError:
        written = {}
    written.update({path.name: _sha256(path) for path in paths})
    write_atomically(record_path, json.dumps(written, indent=2, sort_keys=True).encode("utf8"))


def remove_outputs(output_dir: Path, names: Sequence[str], record: str) -> List[str]:
    """Delete the files of names that ab wrote (in the record with their
    content) and drop them from the record; a file someone else wrote or
    changed, or any file when the record is gone, stays. Returns the names
    deleted."""
    record_path = output_dir / record
    present = [name for name in names if (output_dir / name).is_file()]
    if not present or not record_path.exists():
        return []
    foreign = set(foreign_outputs(output_dir, present, record))
    removed = [name for name in present if name not in foreign]
    for name in removed:
        (output_dir / name).unlink()
    written = json.loads(record_path.read_text(encoding="utf8"))
    kept = {name: digest for name, digest in written.items() if name not in removed}
    if kept:
        write_atomically(record_path, json.dumps(kept, indent=2, sort_keys=True).encode("utf8"))
    else:
        record_path.unlink()
    return removed
