"""The input of an annotation: cut into shards by the driver (which checks
its records' fields on the way, before anything is written) and read shard
by shard by the workers, each line a document or a bad line."""
import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from .errors import Errors
from .settings import AnnotateSettings, AnnotationError, BadLine, Shard


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
    written = [f'"{key}"'.encode() for key in settings.written_keys()] if settings.input_format == "jsonl" else []
    with path.open("rb") as lines:
        for line in lines:
            offset += len(line)
            n_lines += 1
            # A record can hold a written key only as the key's own bytes or with \u escapes: only such lines are parsed.
            if written and (b"\\u" in line or any(key in line for key in written)):
                check_no_clash(settings, line, n_lines)
            if n_lines % size == 0:
                shards.append(Shard(len(shards), start, offset, n_lines - size + 1))
                start = offset
    if offset > start:
        shards.append(Shard(len(shards), start, offset, len(shards) * size + 1))
    return shards


def check_no_clash(settings: AnnotateSettings, line: bytes, number: int) -> None:
    """Refuse ([SLA-E136]), before anything is written, an input record
    with a field the annotation writes into its JSONL record, whose value
    would be lost; a line that is no JSON object is left to the worker, which
    reports it as a bad line."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return
    if isinstance(record, dict):
        for key in settings.written_keys():
            if key in record:
                raise settings.clash_error(f"{settings.input_path}:{number}: the record has the field", key)


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
        except (ValueError, RecursionError) as error:  # valid JSON beyond what Python reads
            bad.append(BadLine(settings.input_path, number, f"JSON that cannot be read ({unreadable_json(error)})"))
            continue
        if not isinstance(record, dict):
            bad.append(BadLine(settings.input_path, number, f"not a JSON object but {type(record).__name__}"))
        elif not isinstance(record.get(settings.text_key), str):
            bad.append(BadLine(settings.input_path, number, f"no \"{settings.text_key}\" field with a string"))
        else:
            items.append((number, record[settings.text_key], record))
    return items, bad


def unreadable_json(error: Exception) -> str:
    if isinstance(error, RecursionError):
        return "nested deeper than Python's recursion limit"
    return " ".join(str(error).split())  # e.g. an integer of more digits than sys.get_int_max_str_digits()
