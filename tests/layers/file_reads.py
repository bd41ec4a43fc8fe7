"""The files this process opens while a block runs, from Python's audit
events ("open" is raised by open(), io.open and os.open): what a loader read,
for the tests that a saved pipeline reads no file outside its own. Files that
native code (Rust tokenizers, sentencepiece) opens raise no event."""
import os
import sys
from contextlib import contextmanager
from typing import Iterator, List

_recordings: List[List[str]] = []


def _record_opens(event: str, args: tuple) -> None:
    if event == "open" and _recordings and isinstance(args[0], (str, bytes, os.PathLike)):
        _recordings[-1].append(os.path.abspath(os.fsdecode(args[0])))


# An audit hook cannot be removed: it is added once and records only inside opened_files().
sys.addaudithook(_record_opens)


@contextmanager
def opened_files() -> Iterator[List[str]]:
    """The absolute paths opened in the block, in order."""
    opened: List[str] = []
    _recordings.append(opened)
    try:
        yield opened
    finally:
        _recordings.remove(opened)
