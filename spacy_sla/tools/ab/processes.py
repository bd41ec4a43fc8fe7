"""The child processes of `spacy sla ab` (`spacy train`, the evaluation):
each runs in a process group of its own, which SIGTERM or SIGINT to ab
stops with it, so that no training goes on without the call that records
it."""
import os
import signal
import subprocess
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional

from .children import recorded, tied_to_this_process

WATCH_SECONDS = 1.0  # how often a watched child's progress is read
STOP_GRACE_SECONDS = 20  # how long a stopped training child may take to exit before it is killed


class AbInterrupted(BaseException):
    """SIGTERM or SIGINT reached `spacy sla ab`. A BaseException, as
    KeyboardInterrupt, so that execute(), which reports a failed run and
    goes on with the grid, lets it through."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.run_name: Optional[str] = None


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Turn SIGTERM and SIGINT into AbInterrupted while the block runs (in
    the main thread; elsewhere signals cannot be handled), so that the
    training child is stopped (run_command) and the lock released on the
    way out; a second signal while that happens is ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stopping = (signal.SIGTERM, signal.SIGINT)

    def interrupt(signum: int, frame: Any) -> None:
        for other in stopping:
            signal.signal(other, signal.SIG_IGN)
        raise AbInterrupted(signum)

    previous = {signum: signal.signal(signum, interrupt) for signum in stopping}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def stop_process_group(process: "subprocess.Popen[bytes]") -> None:
    """Stop a child started in its own session and whatever it started:
    SIGTERM to its process group, SIGKILL after STOP_GRACE_SECONDS, and a
    SIGKILL to what is left of the group once the child has exited."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        process.wait(timeout=STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def wait_watching(process: "subprocess.Popen[bytes]", watch: Optional[Callable[[], None]]) -> int:
    """The child's exit status, calling watch every WATCH_SECONDS until it exits and once after."""
    while watch is not None:
        try:
            returncode = process.wait(timeout=WATCH_SECONDS)
        except subprocess.TimeoutExpired:
            watch()
            continue
        watch()  # the lines written since the last call
        return returncode
    return process.wait()


def run_command(command: List[str], log_path: Optional[Path], record_path: Optional[Path] = None,
                watch: Optional[Callable[[], None]] = None) -> None:
    """Run a command, failing with CalledProcessError; its output goes to
    the terminal or, with log_path, to that file (a Ray worker has no
    terminal, and a failed run is reported with the log's tail). The
    command runs in a process group of its own, stopped with it when this
    process is interrupted (AbInterrupted, KeyboardInterrupt), and killed
    when this process dies (children.tied_to_this_process), so that no
    training goes on without the call that records it; with record_path,
    its pid is kept there while it runs (children.recorded); watch, if
    given, is called every WATCH_SECONDS while it runs (the progress display)."""
    log = None
    try:
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            log = log_path.open("w", encoding="utf8")
        tied_command, preexec_fn = tied_to_this_process(command)
        process = subprocess.Popen(tied_command, stdout=log, stderr=None if log is None else subprocess.STDOUT,
                                   start_new_session=True, preexec_fn=preexec_fn)
        try:
            with recorded(process, record_path):
                returncode = wait_watching(process, watch)
        except BaseException:
            stop_process_group(process)
            raise
    finally:
        if log is not None:
            log.close()
    if returncode:
        raise subprocess.CalledProcessError(returncode, command)
