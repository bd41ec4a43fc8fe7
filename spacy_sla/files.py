"""Writing files so that a reader sees the old content or all of the new,
never a half-written file (a full disk, an interrupted run, a worker that
dies): what the converters, `sla prepare` and batch annotation write."""
import os
import secrets
from pathlib import Path


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
