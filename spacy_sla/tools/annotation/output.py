"""The output directory of an annotation: its manifest, the shard files and
bad-lines.txt, and how annotated Docs are encoded into a shard."""
import json
import math
import os
import re
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import srsly

from ..support.files import write_atomically
from .errors import Errors
from .settings import OUTPUT_FORMATS, AnnotateSettings, AnnotationError, BadLine, Shard

MANIFEST = "annotate.json"
LOCK_FILE = ".annotate.lock"  # held while an annotation runs (holding_output_dir)
BAD_LINES = "bad-lines.txt"
INPUT_FIELDS_KEY = "input_fields"
TOKEN_FIELDS = ("tags", "pos", "deps", "gates")  # these come with the token texts they align with
# write_atomically's temporary files of a shard: .NAME.PID.HEX.tmp
TEMPORARY_SHARD = re.compile(r"\.shard-[0-9]+\.(?:spacy|jsonl)\.[0-9]+\.[0-9a-f]+\.tmp")
# spacy-transformers' output per Doc (wordpiece activations): large and not an
# annotation, so it is not written to the shards.
TRF_DATA_KEY = ("._.", "trf_data", None, None)


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


def make_output_dir(settings: AnnotateSettings) -> Path:
    """OUTPUT_DIR, made if it is not there ([SLA-E076] where it cannot be)."""
    output_dir = Path(settings.output_dir)
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as error:
        reason = "it is a file" if output_dir.is_file() else "a folder above it is a file"
        raise AnnotationError(Errors.E076.format(output_dir=output_dir, reason=reason)) from error
    except OSError as error:
        raise AnnotationError(Errors.E076.format(output_dir=output_dir, reason=error.strerror or error)) from error
    return output_dir


@contextmanager
def holding_output_dir(settings: AnnotateSettings, report: Callable[[str], None]) -> Iterator[Path]:
    """OUTPUT_DIR, made and held by this annotation while the block runs,
    as `spacy sla ab` holds its own (spacy_sla.tools.ab.lock): another annotation
    into it is refused with [SLA-E097] while this one lives, a directory in
    which the lock cannot be written with [SLA-E076]."""
    from ..ab.lock import hold_output_dir  # the A/B library is imported only when an annotation runs

    output_dir = make_output_dir(settings)
    with ExitStack() as held:
        try:  # only taking the lock: an OSError of the block is the block's
            held.enter_context(hold_output_dir(output_dir, notify=report, lock_name=LOCK_FILE, in_use=Errors.E097,
                                               error_type=AnnotationError))
        except OSError as error:
            reason = f"its lock file {output_dir / LOCK_FILE} cannot be written ({error.strerror or error})"
            raise AnnotationError(Errors.E076.format(output_dir=output_dir, reason=reason)) from error
        yield output_dir


def prepare_output(settings: AnnotateSettings, shards: Sequence[Shard], overwrite: bool = False) -> List[Shard]:
    """Create the output directory and its manifest; returns the shards still
    to write. Shards of another annotation (other pipeline or pipeline
    files, input, fields, ...) are refused unless overwrite, which deletes
    the files their manifest names (never the input); a file at one of this
    annotation's output names that no manifest names is refused either way."""
    output_dir = make_output_dir(settings)
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


# What packing a value for a shard raises: a lone surrogate in a string
# (UnicodeEncodeError), an integer beyond 64 bits in a .spacy shard
# (msgpack's OverflowError), a value of no JSON or msgpack type, a value
# nested deeper than the packer's limit (json's RecursionError, msgpack's
# ValueError).
UNWRITABLE = (UnicodeEncodeError, OverflowError, TypeError, ValueError, RecursionError)


def _pack(settings: AnnotateSettings, value: Any) -> bytes:
    if settings.output_format == "jsonl":
        return json.dumps(value, ensure_ascii=False).encode("utf8")
    return srsly.msgpack_dumps(value)


def _why_unwritable(error: Exception) -> str:
    if isinstance(error, UnicodeEncodeError):
        return f"holds {error.object[error.start:error.end]!r}, a lone surrogate that UTF-8 cannot encode"
    if isinstance(error, OverflowError):
        return "holds an integer beyond 64 bits, which a .spacy shard cannot store (--format jsonl can)"
    if isinstance(error, RecursionError) or "recursion" in str(error):
        return "is nested too deeply to be written"
    return f"cannot be written ({type(error).__name__}: {error})"


def record_problem(settings: AnnotateSettings, record: Optional[Dict[str, Any]]) -> Optional[str]:
    """Why an input record's fields cannot go into a shard (they are kept:
    in the JSONL records, in the Docs' user_data), else None."""
    for key, value in (record or {}).items():
        if key == settings.text_key:
            continue
        try:
            _pack(settings, {key: value})
        except UNWRITABLE as error:
            return f"its field \"{key}\" {_why_unwritable(error)}"
    return None


def encode_shard(settings: AnnotateSettings, docs: Sequence[Any],
                 records: Sequence[Optional[Dict[str, Any]]]) -> Tuple[bytes, List[Tuple[int, str]]]:
    """The shard's bytes, and the documents that cannot be written into it
    (their positions and why), which it leaves out."""
    unwritable: List[Tuple[int, str]] = []
    if settings.output_format == "jsonl":
        lines = []
        for position, (doc, record) in enumerate(zip(docs, records)):
            output = dict(record) if record is not None else {settings.text_key: doc.text}
            output.update(doc_fields(doc, settings.fields))
            try:
                lines.append(_pack(settings, output) + b"\n")
            except UNWRITABLE as error:
                unwritable.append((position, record_problem(settings, record) or f"its annotation {_why_unwritable(error)}"))
        return b"".join(lines), unwritable
    from spacy.tokens import DocBin

    doc_bin = DocBin(store_user_data=True)  # as `spacy apply`: custom attributes (gates) travel with the Docs
    for position, (doc, record) in enumerate(zip(docs, records)):
        doc.user_data.pop(TRF_DATA_KEY, None)
        if record is not None:
            doc.user_data[INPUT_FIELDS_KEY] = {key: value for key, value in record.items() if key != settings.text_key}
        try:
            # DocBin.add packs the user data last, after its other lists grew: packed here first
            _pack(settings, doc.user_data)
        except UNWRITABLE as error:
            unwritable.append((position, record_problem(settings, record) or f"its annotation {_why_unwritable(error)}"))
            continue
        doc_bin.add(doc)
    return doc_bin.to_bytes(), unwritable


def record_bad_lines(settings: AnnotateSettings, bad: Sequence[BadLine]) -> None:
    if bad:
        with (Path(settings.output_dir) / BAD_LINES).open("a", encoding="utf8") as stream:
            stream.writelines(f"{line}\n" for line in bad)


def sort_bad_lines(settings: AnnotateSettings) -> None:
    """Put OUTPUT_DIR/bad-lines.txt in input order (shards finish in any
    order on Ray, and a resumed run appends)."""
    path = Path(settings.output_dir) / BAD_LINES
    if path.exists():
        prefix = len(settings.input_path) + 1  # "PATH:LINE: reason"
        lines = set(path.read_text(encoding="utf8").splitlines())
        ordered = sorted(lines, key=lambda line: int(line[prefix:].split(":", 1)[0]))
        write_atomically(path, "".join(f"{line}\n" for line in ordered).encode("utf8"))
