"""Batch annotation: run a trained pipeline over a large input file and write
the annotated documents as numbered shards, `.spacy` DocBins or JSONL, in one
process (`nlp.pipe`) or on Ray (a Ray Data pipeline whose actor pool loads the
pipeline once per worker).

The input is cut into shards of `shard_size` consecutive input lines (or Docs
of a .spacy file) before anything runs, so both paths write the same shards:
shard k holds the documents of input lines k·S+1 .. (k+1)·S, in input order.
Each shard is read, annotated and written by one worker, atomically (a
temporary file, then os.replace): a shard file that exists is complete, a
worker that dies loses only the shard it was on (Ray retries it), and running
the same command again resumes with the missing shards.

OUTPUT_DIR/annotate.json, the manifest, records what decides the shards'
contents, the pipeline's fingerprint among them (files.pipeline_fingerprint:
its meta.json and config.cfg by hash, its other files by size and
modification time). A run resumes only where the manifest is the same, so a
pipeline replaced at its path is refused rather than mixed into the output.
--overwrite deletes only the files the manifest names (its shards and
bad-lines.txt), never the input and never a file that annotation did not
write; such a file at an output name is refused.

Inputs, chosen by suffix, as `spacy apply` reads them (except plain text,
which here has one document per line):
- `.jsonl`: one JSON object per line, its text in `text_key`; the other fields
  are kept (in the JSONL output's records; in doc.user_data["input_fields"]);
- `.spacy`: the Docs of a DocBin, annotated as they are (the tokenizer does
  not run again, as in `spacy apply`);
- anything else: UTF-8 text, one document per line.
Blank lines are skipped. A bad line (not UTF-8, not a JSON object, no text)
stops the job with FILE:LINE, or with on_error="skip" is skipped and reported.

Ray is imported only by annotate_on_ray, never by `import spacy_sla`.
"""
import json
import math
import os
import re
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .errors import Errors
from .files import pipeline_fingerprint, write_atomically

OUTPUT_FORMATS = ("spacy", "jsonl")
FIELDS = ("entities", "cats", "tags", "pos", "deps", "gates")
DEFAULT_FIELDS = ("entities", "cats", "tags")
TOKEN_FIELDS = ("tags", "pos", "deps", "gates")  # these come with the token texts they align with
ON_ERROR = ("stop", "skip")
MANIFEST = "annotate.json"
BAD_LINES = "bad-lines.txt"
INPUT_FIELDS_KEY = "input_fields"
# write_atomically's temporary files of a shard: .NAME.PID.HEX.tmp
TEMPORARY_SHARD = re.compile(r"\.shard-[0-9]+\.(?:spacy|jsonl)\.[0-9]+\.[0-9a-f]+\.tmp")
# spacy-transformers' output per Doc (wordpiece activations): large and not an
# annotation, so it is not written to the shards.
TRF_DATA_KEY = ("._.", "trf_data", None, None)


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
    """Refuse a path that is not a file that can be opened, before anything
    is written or any worker starts."""
    if path.is_dir():
        raise AnnotationError(Errors.E080.format(what=what, path=path, reason="it is a directory", hint=hint))
    try:
        with path.open("rb"):
            pass
    except OSError as error:
        reason = error.strerror or str(error)
        raise AnnotationError(Errors.E080.format(what=what, path=path, reason=reason, hint=hint)) from error


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
    stopped: bool = False  # on_error="stop" and a bad line: nothing was written

    def stop_error(self) -> AnnotationError:
        return AnnotationError(f"{self.bad_lines[0]}. Fix the line, or pass --on-error skip to skip bad lines.")


@dataclass
class AnnotateSummary:
    n_shards: int
    n_docs: int
    n_resumed: int
    bad_lines: List[BadLine]
    seconds: float


# Planning ---------------------------------------------------------------------------------------


def plan_shards(settings: AnnotateSettings) -> List[Shard]:
    """Cut the input into shards of shard_size lines (or Docs). For text and
    JSONL only line boundaries are found here (the workers read and parse
    their own byte ranges), so the driver never holds the data."""
    path, size = Path(settings.input_path), settings.shard_size
    if settings.input_format == "spacy":
        from spacy.tokens import DocBin

        try:
            n_docs = len(DocBin().from_disk(path))
        except (ValueError, KeyError, OSError) as error:
            reason = f"it is not a DocBin ({' '.join(str(error).split()) or type(error).__name__})"
            raise AnnotationError(Errors.E080.format(what="input", path=path, reason=reason,
                                                     hint=" written by DocBin.to_disk or `spacy convert`")) from error
        return [Shard(k, start, min(start + size, n_docs), start + 1)
                for k, start in enumerate(range(0, n_docs, size))]
    shards: List[Shard] = []
    start = offset = n_lines = 0
    with path.open("rb") as lines:
        for line in lines:
            offset += len(line)
            n_lines += 1
            if n_lines % size == 0:
                shards.append(Shard(len(shards), start, offset, n_lines - size + 1))
                start = offset
    if offset > start:
        shards.append(Shard(len(shards), start, offset, len(shards) * size + 1))
    return shards


def shard_name(settings: AnnotateSettings, index: int, n_shards: int) -> str:
    return shard_file_name(settings.output_format, index, n_shards)


def shard_file_name(output_format: str, index: int, n_shards: int) -> str:
    # Zero-padded so that the names sort in input order.
    width = max(5, len(str(max(n_shards - 1, 0))))
    return f"shard-{index:0{width}d}.{output_format}"


def written_names(manifest: Dict[str, Any]) -> List[str]:
    """The files in OUTPUT_DIR that the annotation of `manifest` writes,
    besides the manifest itself."""
    n_shards = int(manifest.get("n_shards", 0))
    output_format = str(manifest.get("output_format", ""))
    return [shard_file_name(output_format, index, n_shards) for index in range(n_shards)] + [BAD_LINES]


def _same_file(path: Path, other: Path) -> bool:
    try:
        return path.exists() and os.path.samefile(path, other)
    except OSError:
        return False


def _read_manifest(path: Path, output_dir: Path) -> Optional[Dict[str, Any]]:
    if not path.exists() and not path.is_symlink():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise AnnotationError(Errors.E082.format(path=path, output_dir=output_dir,
                                                 reason=" ".join(str(error).split()))) from error
    if not isinstance(manifest, dict):
        raise AnnotationError(Errors.E082.format(path=path, output_dir=output_dir,
                                                 reason=f"a JSON {type(manifest).__name__}, not an object"))
    if not isinstance(manifest.get("n_shards"), int) or manifest.get("output_format") not in OUTPUT_FORMATS:
        raise AnnotationError(Errors.E082.format(path=path, output_dir=output_dir,
                                                 reason="no whole n_shards or known output_format in it"))
    return manifest


def _another_annotation(settings: AnnotateSettings, previous: Dict[str, Any], manifest: Dict[str, Any],
                        output_dir: Path) -> AnnotationError:
    differences = [key for key in manifest if previous.get(key) != manifest[key]]
    if differences == ["pipeline_fingerprint"] and "pipeline_fingerprint" in previous:
        before, now = previous["pipeline_fingerprint"], manifest["pipeline_fingerprint"]
        changed = sorted(name for name in set(before) | set(now) if before.get(name) != now.get(name))
        shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more file(s)" if len(changed) > 5 else "")
        return AnnotationError(Errors.E077.format(output_dir=output_dir, pipeline=settings.pipeline, changed=shown))
    return AnnotationError(
        f"{output_dir} holds shards of another annotation (differs in: {', '.join(differences)}). "
        "Use another output directory, or --overwrite to delete them."
    )


def prepare_output(settings: AnnotateSettings, shards: Sequence[Shard], overwrite: bool = False) -> List[Shard]:
    """Create the output directory and its manifest; returns the shards still
    to write. Shards of another annotation (other pipeline or pipeline
    files, input, fields, ...) are refused unless overwrite, which deletes
    the files their manifest names (never the input); a file at one of this
    annotation's output names that no manifest names is refused either way."""
    output_dir = Path(settings.output_dir)
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as error:
        reason = "it is a file" if output_dir.is_file() else "a folder above it is a file"
        raise AnnotationError(Errors.E076.format(output_dir=output_dir, reason=reason)) from error
    except OSError as error:
        raise AnnotationError(Errors.E076.format(output_dir=output_dir, reason=error.strerror or error)) from error
    input_path = Path(settings.input_path)
    manifest_path = output_dir / MANIFEST
    manifest = settings.manifest(len(shards))
    names = written_names(manifest)
    for name in [MANIFEST, *names]:
        if _same_file(output_dir / name, input_path):
            raise AnnotationError(Errors.E078.format(input_path=input_path, name=name, output_dir=output_dir))
    previous = _read_manifest(manifest_path, output_dir)
    if previous != manifest:
        written_before = [] if previous is None else [
            output_dir / name for name in written_names(previous) if (output_dir / name).is_file()]
        # Only shards of another annotation are in the way; a manifest alone is rewritten.
        if written_before and not overwrite:
            raise _another_annotation(settings, previous or {}, manifest, output_dir)
        for path in written_before:
            if not _same_file(path, input_path):
                path.unlink(missing_ok=True)
        foreign = [name for name in names if (output_dir / name).exists() or (output_dir / name).is_symlink()]
        if foreign:
            shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
            raise AnnotationError(Errors.E079.format(output_dir=output_dir, manifest=MANIFEST, names=shown))
    for leftover in output_dir.iterdir():  # from a worker that died while writing
        if TEMPORARY_SHARD.fullmatch(leftover.name):
            leftover.unlink(missing_ok=True)
    write_atomically(manifest_path, json.dumps(manifest, indent=2).encode("utf8"))
    return [shard for shard in shards if not (output_dir / shard_name(settings, shard.index, len(shards))).exists()]


# Reading ----------------------------------------------------------------------------------------


InputItem = Tuple[int, Any, Optional[Dict[str, Any]]]  # (line, text or Doc, the JSONL record)


def read_lines(settings: AnnotateSettings, shard: Shard) -> Tuple[List[InputItem], List[BadLine]]:
    """The documents of a text or JSONL shard and its bad lines."""
    with open(settings.input_path, "rb") as stream:
        stream.seek(shard.start)
        data = stream.read(shard.end - shard.start)
    items: List[InputItem] = []
    bad: List[BadLine] = []
    raw_lines = data.split(b"\n")
    if data.endswith(b"\n"):
        raw_lines.pop()
    for number, raw in enumerate(raw_lines, start=shard.first_line):
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]  # a UTF-8 byte order mark
        raw = raw[:-1] if raw.endswith(b"\r") else raw
        try:
            line = raw.decode("utf8")
        except UnicodeDecodeError as error:
            bad.append(BadLine(settings.input_path, number,
                               f"not UTF-8 text (byte 0x{raw[error.start]:02x} at column {error.start + 1})"))
            continue
        if not line.strip():
            continue
        if settings.input_format == "text":
            items.append((number, line, None))
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            bad.append(BadLine(settings.input_path, number, f"not JSON ({error.msg} at column {error.colno})"))
            continue
        if not isinstance(record, dict):
            bad.append(BadLine(settings.input_path, number, f"not a JSON object but {type(record).__name__}"))
        elif not isinstance(record.get(settings.text_key), str):
            bad.append(BadLine(settings.input_path, number, f"no \"{settings.text_key}\" field with a string"))
        else:
            items.append((number, record[settings.text_key], record))
    return items, bad


# Writing ----------------------------------------------------------------------------------------


def _rounded(value: float) -> Optional[float]:
    return None if math.isnan(value) else round(float(value), 6)


def doc_fields(doc: Any, fields: Sequence[str]) -> Dict[str, Any]:
    """The requested annotations of a Doc as JSON values."""
    out: Dict[str, Any] = {}
    if any(name in TOKEN_FIELDS for name in fields):
        out["tokens"] = [token.text for token in doc]
    if "entities" in fields:
        out["entities"] = [{"start": ent.start_char, "end": ent.end_char, "label": ent.label_, "text": ent.text}
                           for ent in doc.ents]
    if "cats" in fields:
        out["cats"] = {label: float(score) for label, score in doc.cats.items()}
    if "tags" in fields:
        out["tags"] = [token.tag_ for token in doc]
    if "pos" in fields:
        out["pos"] = [token.pos_ for token in doc]
    if "deps" in fields:
        out["deps"] = [token.dep_ for token in doc]
        out["heads"] = [token.head.i for token in doc]
    if "gates" in fields:
        # (n_sla_layers, n_tokens); NaN (tokens without wordpieces) -> null
        gates = doc._.get("sla_gates") if doc.has_extension("sla_gates") else None
        out["gates"] = None if gates is None else [[_rounded(value) for value in row] for row in gates]
    return out


def encode_shard(settings: AnnotateSettings, docs: Sequence[Any], records: Sequence[Optional[Dict[str, Any]]]) -> bytes:
    if settings.output_format == "jsonl":
        lines = []
        for doc, record in zip(docs, records):
            output = dict(record) if record is not None else {settings.text_key: doc.text}
            output.update(doc_fields(doc, settings.fields))
            lines.append(json.dumps(output, ensure_ascii=False))
        return ("\n".join(lines) + "\n").encode("utf8") if lines else b""
    from spacy.tokens import DocBin

    doc_bin = DocBin(store_user_data=True)  # as `spacy apply`: custom attributes (gates) travel with the Docs
    for doc, record in zip(docs, records):
        doc.user_data.pop(TRF_DATA_KEY, None)
        if record is not None:
            doc.user_data[INPUT_FIELDS_KEY] = {key: value for key, value in record.items() if key != settings.text_key}
        doc_bin.add(doc)
    return doc_bin.to_bytes()


# Annotating -------------------------------------------------------------------------------------


def load_pipeline(settings: AnnotateSettings, gpu_id: int = -1) -> Any:
    """The pipeline, on the GPU if gpu_id >= 0, with gate storage switched on
    in every sla_transformer when the gates are asked for."""
    import spacy
    from spacy.util import import_file

    if settings.code_path is not None:  # in every worker, before the pipeline's config is resolved
        try:
            import_file("spacy_sla_annotate_code", settings.code_path)
        except Exception as error:  # the user's code: whatever it raises is reported with its file
            reason = f"the --code file {settings.code_path} failed to import ({type(error).__name__}: {error})"
            raise AnnotationError(Errors.E083.format(pipeline=settings.pipeline, reason=reason)) from error
    if gpu_id >= 0:
        spacy.require_gpu(gpu_id)
    try:
        nlp = spacy.load(settings.pipeline)
    except (OSError, ValueError) as error:  # files that are missing or damaged, a factory not registered
        raise AnnotationError(Errors.E083.format(pipeline=settings.pipeline,
                                                 reason=" ".join(str(error).split()))) from error
    if "gates" in settings.fields:
        from .pipeline_component import SLATransformer

        components = [pipe for _, pipe in nlp.pipeline if isinstance(pipe, SLATransformer)]
        if not components:
            raise AnnotationError(
                f"The field 'gates' needs an sla_transformer component; {settings.pipeline} has "
                f"{', '.join(nlp.pipe_names) or 'no components'}."
            )
        for pipe in components:
            pipe.store_gates = True
    return nlp


class ShardAnnotator:
    """Reads, annotates and writes shards with one loaded pipeline: the unit
    of work of both paths (one per process; one per Ray actor)."""

    def __init__(self, settings: AnnotateSettings, n_shards: int, gpu_id: int = -1):
        self.settings = settings
        self.n_shards = n_shards
        self.nlp = load_pipeline(settings, gpu_id)
        self._input_docs: Optional[List[Any]] = None

    def _spacy_docs(self, shard: Shard) -> List[Any]:
        if self._input_docs is None:  # loaded once per worker, sliced per shard
            from spacy.tokens import DocBin

            self._input_docs = list(DocBin().from_disk(self.settings.input_path).get_docs(self.nlp.vocab))
        return self._input_docs[shard.start:shard.end]

    def __call__(self, shard: Shard) -> ShardResult:
        settings = self.settings
        target = Path(settings.output_dir) / shard_name(settings, shard.index, self.n_shards)
        if target.exists():  # finished by an earlier attempt (a retried Ray task, a resumed run)
            return ShardResult(shard.index, str(target), resumed=True)
        if settings.input_format == "spacy":
            inputs: List[Any] = self._spacy_docs(shard)
            records: List[Optional[Dict[str, Any]]] = [None] * len(inputs)
            bad: List[BadLine] = []
        else:
            items, bad = read_lines(settings, shard)
            if bad and settings.on_error == "stop":
                # Returned, not raised: the caller stops the job (a Ray task's
                # exception would reach the driver as text only).
                return ShardResult(shard.index, str(target), bad_lines=bad, stopped=True)
            inputs = [text for _, text, _ in items]
            records = [record for _, _, record in items]
        docs = list(self.nlp.pipe(inputs, batch_size=settings.batch_size))
        write_atomically(target, encode_shard(settings, docs, records))
        return ShardResult(shard.index, str(target), n_docs=len(docs), bad_lines=bad)


def _summarize(results: Sequence[ShardResult], n_shards: int, started: float) -> AnnotateSummary:
    bad = sorted((line for result in results for line in result.bad_lines), key=lambda line: line.line)
    return AnnotateSummary(n_shards=n_shards, n_docs=sum(result.n_docs for result in results),
                           n_resumed=sum(result.resumed for result in results),
                           bad_lines=bad, seconds=time.time() - started)


def _record_bad_lines(settings: AnnotateSettings, bad: Sequence[BadLine]) -> None:
    if bad:
        with (Path(settings.output_dir) / BAD_LINES).open("a", encoding="utf8") as stream:
            stream.writelines(f"{line}\n" for line in bad)


def _sort_bad_lines(settings: AnnotateSettings) -> None:
    """Put OUTPUT_DIR/bad-lines.txt in input order (shards finish in any
    order on Ray, and a resumed run appends)."""
    path = Path(settings.output_dir) / BAD_LINES
    if path.exists():
        prefix = len(settings.input_path) + 1  # "PATH:LINE: reason"
        lines = set(path.read_text(encoding="utf8").splitlines())
        ordered = sorted(lines, key=lambda line: int(line[prefix:].split(":", 1)[0]))
        write_atomically(path, "".join(f"{line}\n" for line in ordered).encode("utf8"))


def progress_line(done: int, total: int, result: ShardResult) -> str:
    name = Path(result.path).name
    if result.resumed:
        return f"[{done}/{total}] {name}: written before, kept"
    skipped = f", {len(result.bad_lines)} bad line(s) skipped" if result.bad_lines else ""
    return f"[{done}/{total}] {name}: {result.n_docs} docs{skipped}"


def annotate(
    settings: AnnotateSettings,
    *,
    gpu_id: int = -1,
    overwrite: bool = False,
    report: Callable[[str], None] = print,
) -> AnnotateSummary:
    """Annotate in this process, shard by shard, with nlp.pipe."""
    started = time.time()
    settings = settings.resolved()
    settings.check()
    shards = plan_shards(settings)
    todo = prepare_output(settings, shards, overwrite)
    annotator = ShardAnnotator(settings, len(shards), gpu_id)
    results = []
    for done, shard in enumerate(todo, start=1):
        result = annotator(shard)
        if result.stopped:
            raise result.stop_error()
        _record_bad_lines(settings, result.bad_lines)
        results.append(result)
        report(progress_line(done, len(todo), result))
    _sort_bad_lines(settings)
    return _summarize(results + _resumed(shards, todo), len(shards), started)


def _resumed(shards: Sequence[Shard], todo: Sequence[Shard]) -> List[ShardResult]:
    waiting = {shard.index for shard in todo}
    return [ShardResult(shard.index, "", resumed=True) for shard in shards if shard.index not in waiting]


# A terminal colour code, as Ray writes them into the text of a worker's error.
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


def worker_failure(error: Exception) -> AnnotationError:
    """A Ray worker's failure in one line: the coded message of the
    AnnotationError it raised (a pipeline or --code file that does not
    load), which Ray passes on only as text; else the error's first line."""
    text = _COLOUR.sub("", str(error))
    raised = re.findall(r"AnnotationError: (\[(?:SLA-)?E[0-9]+\].*)", text)
    if raised:
        return AnnotationError(raised[-1].strip())
    first_line = next((line.strip() for line in text.splitlines() if line.strip()), type(error).__name__)
    return AnnotationError(Errors.E084.format(reason=first_line))


class _RayShardAnnotator:
    """The Ray Data actor: one pipeline per worker, one shard per call."""

    def __init__(self, settings: Dict[str, Any], n_shards: int, use_gpu: bool):
        # Ray gives the actor its GPU through CUDA_VISIBLE_DEVICES: device 0.
        self.annotator = ShardAnnotator(AnnotateSettings(**settings), n_shards, 0 if use_gpu else -1)

    def __call__(self, batch: Dict[str, Any]) -> Dict[str, List[Any]]:
        out: Dict[str, List[Any]] = {"index": [], "path": [], "n_docs": [], "resumed": [], "stopped": [],
                                     "bad_lines": []}
        for index, start, end, first_line in zip(batch["index"], batch["start"], batch["end"], batch["first_line"]):
            result = self.annotator(Shard(int(index), int(start), int(end), int(first_line)))
            out["index"].append(result.index)
            out["path"].append(result.path)
            out["n_docs"].append(result.n_docs)
            out["resumed"].append(result.resumed)
            out["stopped"].append(result.stopped)
            # A JSON string keeps the column a plain Arrow type.
            out["bad_lines"].append(json.dumps([asdict(line) for line in result.bad_lines]))
        return out


def annotate_on_ray(
    settings: AnnotateSettings,
    *,
    address: Optional[str] = None,
    workers: Optional[int] = None,
    cpus_per_worker: float = 1.0,
    gpus_per_worker: float = 0.0,
    overwrite: bool = False,
    report: Callable[[str], None] = print,
) -> AnnotateSummary:
    """Annotate with a Ray Data pipeline: the shard plan is read into a
    dataset, an actor pool of `workers` (default: as many as the cluster's
    CPUs or GPUs allow) loads the pipeline once per actor and annotates and
    writes one shard per call; Ray restarts a worker that died and retries
    its shard. The input and output directories must be on storage every
    node sees at the same path."""
    from .ray_session import import_ray, ray_session

    started = time.time()
    settings = settings.resolved()
    settings.check()
    import_ray()  # refused without Ray before the output directory is touched
    shards = plan_shards(settings)
    todo = prepare_output(settings, shards, overwrite)
    results: List[ShardResult] = []
    if todo:

        with ray_session(address) as ray:
            context = ray.data.DataContext.get_current()
            context.enable_progress_bars = False  # one progress line per shard instead
            if workers is None:
                resources = ray.cluster_resources()
                if gpus_per_worker > 0:
                    workers = int(resources.get("GPU", 0) // gpus_per_worker)
                else:
                    workers = int(resources.get("CPU", 1) // max(cpus_per_worker, 1e-9))
            workers = max(1, min(workers, len(todo)))
            report(f"{len(todo)} shard(s) to write with {workers} Ray worker(s) "
                   f"({cpus_per_worker:g} CPU and {gpus_per_worker:g} GPU each)")
            dataset = ray.data.from_items([asdict(shard) for shard in todo], override_num_blocks=len(todo))
            annotated = dataset.map_batches(
                _RayShardAnnotator,
                fn_constructor_kwargs={"settings": asdict(settings), "n_shards": len(shards),
                                       "use_gpu": gpus_per_worker > 0},
                batch_size=1,
                compute=ray.data.ActorPoolStrategy(size=workers),
                num_cpus=cpus_per_worker,
                num_gpus=gpus_per_worker,
            )
            try:
                for row in annotated.iter_rows():
                    bad = [BadLine(**line) for line in json.loads(row["bad_lines"])]
                    result = ShardResult(int(row["index"]), str(row["path"]), int(row["n_docs"]),
                                         bool(row["resumed"]), bad, bool(row["stopped"]))
                    if result.stopped:
                        raise result.stop_error()  # shards finished meanwhile stay written
                    _record_bad_lines(settings, bad)
                    results.append(result)
                    report(progress_line(len(results), len(todo), result))
            except ray.exceptions.RayError as error:
                raise worker_failure(error) from error
    _sort_bad_lines(settings)
    return _summarize(results + _resumed(shards, todo), len(shards), started)
