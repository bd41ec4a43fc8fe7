"""What an annotation job is given and what it returns: the settings, their
checks (run before anything is written or any worker starts), the shards
of the input and the results."""
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ..support.files import pipeline_fingerprint
from .errors import Errors

OUTPUT_FORMATS = ("spacy", "jsonl")
FIELDS = ("entities", "cats", "tags", "pos", "deps", "gates")
DEFAULT_FIELDS = ("entities", "cats", "tags")
ON_ERROR = ("stop", "skip")
# The keys each field writes into a JSONL output record (output.doc_fields):
# the token-level ones come with the token texts they align with.
WRITTEN_KEYS = {"entities": ("entities",), "cats": ("cats",), "tags": ("tokens", "tags"), "pos": ("tokens", "pos"),
                "deps": ("tokens", "deps", "heads"), "gates": ("tokens", "gates")}


class AnnotationError(ValueError):
    """Bad input with on_error="stop", or options or an output directory
    that do not fit; the message says what to do."""


@dataclass(frozen=True)
class BadLine:
    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


@dataclass(frozen=True)
class Shard:
    """A slice of the input: bytes [start, end) of a text or JSONL file, whose
    first line is line number first_line (1-based), or Docs [start, end) of a
    .spacy file (first_line = start + 1)."""

    index: int
    start: int
    end: int
    first_line: int


def check_pipeline(pipeline: str) -> None:
    """Refuse, before any output is written or any worker starts, a pipeline
    that spacy.load would not find: spacy.load's own [E050] surfaces as a
    traceback in this process and as a failed task on Ray."""
    from spacy.util import is_package

    # what spacy.util.load_model accepts as a name
    if pipeline.startswith("blank:") or is_package(pipeline):
        return
    path = Path(pipeline)
    if path.is_dir():
        missing = [name for name in ("config.cfg", "meta.json") if not (path / name).is_file()]
        if missing:
            raise AnnotationError(Errors.E081.format(path=path, missing=" and no ".join(missing)))
        return
    if path.exists():
        raise AnnotationError(Errors.E081.format(path=path, missing="directory (it is a file)"))
    raise AnnotationError(
        f"Could not find the pipeline '{pipeline}': there is no directory {Path(pipeline).resolve()} and no "
        "installed package of that name. Give a trained pipeline's directory or package name."
    )


@dataclass(frozen=True)
class AnnotateSettings:
    pipeline: str  # a package name or a directory
    input_path: str
    output_dir: str
    output_format: str = "spacy"
    fields: Tuple[str, ...] = DEFAULT_FIELDS
    text_key: str = "text"
    on_error: str = "stop"
    batch_size: int = 64
    shard_size: int = 1000
    code_path: Optional[str] = None  # a Python file with registered functions, as `spacy apply --code`

    @property
    def input_format(self) -> str:
        return {".jsonl": "jsonl", ".spacy": "spacy"}.get(Path(self.input_path).suffix.lower(), "text")

    def check(self) -> None:
        check_pipeline(self.pipeline)
        check_readable(Path(self.input_path), "input", " (JSONL, a .spacy file or UTF-8 text)")
        if self.code_path is not None:
            check_readable(Path(self.code_path), "--code file", " (Python code that registers functions)")
        if self.output_format not in OUTPUT_FORMATS:
            raise AnnotationError(f"Unknown output format '{self.output_format}': use {' or '.join(OUTPUT_FORMATS)}.")
        unknown = [name for name in self.fields if name not in FIELDS]
        if unknown:
            raise AnnotationError(f"Unknown field(s) {', '.join(unknown)}: choose from {', '.join(FIELDS)}.")
        if self.on_error not in ON_ERROR:
            raise AnnotationError(f"Unknown on_error '{self.on_error}': use stop or skip.")
        if self.batch_size < 1 or self.shard_size < 1:
            raise AnnotationError("The batch size and the shard size must be at least 1.")
        if self.text_key in self.written_keys():
            raise self.clash_error("--text-key names the field", self.text_key)
        check_output_outside_pipeline(Path(self.output_dir), self.pipeline)

    def written_keys(self) -> Tuple[str, ...]:
        """The keys of a JSONL output record that the annotation writes;
        a .spacy shard keeps the input's fields apart, so none."""
        if self.output_format != "jsonl":
            return ()
        return tuple(dict.fromkeys(key for name in self.fields for key in WRITTEN_KEYS.get(name, ())))

    def clash_error(self, where: str, key: str) -> AnnotationError:
        writers = ", ".join(name for name in self.fields if key in WRITTEN_KEYS.get(name, ()))
        return AnnotationError(Errors.E136.format(where=where, key=key, fields=",".join(self.fields),
                                                  writers=writers))

    def resolved(self) -> "AnnotateSettings":
        """Absolute paths, so that workers in other directories (Ray) find
        them; a pipeline that is not a path is a package name."""
        pipeline = str(Path(self.pipeline).resolve()) if Path(self.pipeline).exists() else self.pipeline
        code_path = None if self.code_path is None else str(Path(self.code_path).resolve())
        return replace(self, pipeline=pipeline, input_path=str(Path(self.input_path).resolve()),
                       output_dir=str(Path(self.output_dir).resolve()), fields=tuple(self.fields),
                       code_path=code_path)

    def manifest(self, n_shards: int) -> Dict[str, Any]:
        """What decides the contents of the shards: a second run resumes only
        where it is the same (the batch size, the hardware and on_error do
        not count: a shard written with "stop" had no bad line to skip)."""
        stat = Path(self.input_path).stat()
        return {"pipeline": self.pipeline, "pipeline_fingerprint": pipeline_files_fingerprint(self.pipeline),
                "input": self.input_path, "input_bytes": stat.st_size,
                "input_mtime_ns": stat.st_mtime_ns, "output_format": self.output_format,
                "fields": list(self.fields), "text_key": self.text_key, "shard_size": self.shard_size,
                "n_shards": n_shards}


def check_readable(path: Path, what: str, hint: str) -> None:
    """Refuse a path that is not a regular file that can be opened, before
    anything is written or any worker starts: a named pipe or a device
    cannot be cut into shards by offset (and opening a pipe waits for a
    writer), so it is refused before it is opened."""
    try:
        mode = path.stat().st_mode
        if not stat.S_ISREG(mode):
            kind = "a named pipe" if stat.S_ISFIFO(mode) else "a device or a socket"
            reason = "it is a directory" if stat.S_ISDIR(mode) else f"it is {kind}, not a regular file"
            raise AnnotationError(Errors.E080.format(what=what, path=path, reason=reason, hint=hint))
        with path.open("rb"):
            pass
    except OSError as error:
        reason = error.strerror or str(error)
        raise AnnotationError(Errors.E080.format(what=what, path=path, reason=reason, hint=hint)) from error


def check_output_outside_pipeline(output_dir: Path, pipeline: str) -> None:
    """Refuse an OUTPUT_DIR in the pipeline's directory ([SLA-E137]): the
    pipeline's fingerprint covers its files, so the shards written there
    would change it, and no run could resume."""
    if pipeline.startswith("blank:"):
        return
    pipeline_dir = Path(pipeline) if Path(pipeline).is_dir() else installed_pipeline_dir(pipeline)
    if pipeline_dir is None:
        return
    inside, outside = output_dir.resolve(), pipeline_dir.resolve()
    if inside == outside or outside in inside.parents:
        raise AnnotationError(Errors.E137.format(output_dir=output_dir, pipeline_dir=pipeline_dir))


def installed_pipeline_dir(pipeline: str) -> Optional[Path]:
    from spacy.util import get_package_path, is_package

    return get_package_path(pipeline) if is_package(pipeline) else None


def pipeline_files_fingerprint(pipeline: str) -> Dict[str, Any]:
    """files.pipeline_fingerprint of a pipeline directory, or of an
    installed pipeline package's directory; a blank pipeline has no files."""
    if pipeline.startswith("blank:"):
        return {}
    if Path(pipeline).is_dir():
        return pipeline_fingerprint(Path(pipeline))
    from spacy.util import get_package_path

    return pipeline_fingerprint(get_package_path(pipeline))


@dataclass
class ShardResult:
    index: int
    path: str
    n_docs: int = 0
    resumed: bool = False  # the shard was written by an earlier run
    bad_lines: List[BadLine] = field(default_factory=list)
    stopped: bool = False  # on_error="stop" and a bad line or document: nothing was written

    def stop_error(self) -> AnnotationError:
        first = self.bad_lines[0]
        return AnnotationError(Errors.E096.format(path=first.path, line=first.line, reason=first.reason))


@dataclass
class AnnotateSummary:
    n_shards: int
    n_docs: int
    n_resumed: int
    bad_lines: List[BadLine]
    seconds: float
