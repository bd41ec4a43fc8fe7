"""Writing files so that a reader sees the old content or all of the new,
never a half-written file (a full disk, an interrupted run, a worker that
dies): what the converters, `sla prepare` and batch annotation write; and
the fingerprint that says whether a file is still the one a record was
made from."""
import hashlib
import os
import secrets
from pathlib import Path
from typing import Any, Dict


def write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same directory
    and os.replace, so that `path` holds either its old content or all of
    the new one, never a half-written file (a full disk, an interrupted run)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # A fresh name opened with "x" (not tempfile.mkstemp, whose 0600 mode
    # would outlive the replace): the file gets the usual umask permissions.
    temporary = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        with temporary.open("xb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    finally:
        # Gone after the replace; after a failure (also an interrupt) it is removed here.
        temporary.unlink(missing_ok=True)


def file_fingerprint(path: Path) -> Dict[str, Any]:
    """Size and SHA-256 of a file, or of every .spacy file of a directory."""
    digest = hashlib.sha256()
    files = sorted(path.rglob("*.spacy")) if path.is_dir() else [path]
    size = 0
    for file_path in files:
        size += file_path.stat().st_size
        with file_path.open("rb") as file:
            for chunk in iter(lambda: file.read(1 << 20), b""):
                digest.update(chunk)
    return {"size": size, "sha256": digest.hexdigest()}


# Read in full: small, and they name a pipeline's version and settings.
HASHED_PIPELINE_FILES = ("meta.json", "config.cfg")


def pipeline_fingerprint(pipeline_dir: Path) -> Dict[str, Dict[str, Any]]:
    """What tells a pipeline directory from another one put at its path
    later, by file (relative POSIX path): the size and SHA-256 of every
    meta.json and config.cfg, and the size and modification time (ns) of
    every other file. The weights are not read: hashing gigabytes on every
    run would cost more than the shards it checks, and a pipeline trained,
    copied or unpacked anew gets new modification times. Python's
    __pycache__ folders are left out, since importing a pipeline package
    writes them."""
    fingerprint: Dict[str, Dict[str, Any]] = {}
    for path in sorted(pipeline_dir.rglob("*")):
        relative = path.relative_to(pipeline_dir)
        if "__pycache__" in relative.parts or not path.is_file():
            continue
        if path.name in HASHED_PIPELINE_FILES:
            fingerprint[relative.as_posix()] = file_fingerprint(path)
        else:
            status = path.stat()
            fingerprint[relative.as_posix()] = {"size": status.st_size, "mtime_ns": status.st_mtime_ns}
    return fingerprint
