"""The training children of `spacy sla ab` live no longer than the call that
started them, and a run is never trained by two of them at once.

A child runs in a session of its own (processes.run_command), so a SIGKILL
of ab (an OOM kill, a scheduler's hard stop) would leave it running, and a
later call, which takes the lock over, would start a second trainer on the
same run folder. So:

- on Linux the child asks the kernel, before it runs the command, for a
  SIGKILL when the thread that started it ends (prctl PR_SET_PDEATHSIG);
  run_command waits for the child in that thread, so this is when ab dies;
- elsewhere the command runs under a watchdog process (watchdog.py), which
  kills the command's process group once ab's pid is gone;
- while a trainer runs, its pid and start time are in the run folder
  (trainer.json, lock.process_record), and a run whose recorded trainer still
  lives is not started again ([SLA-E098]).
"""
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, List, Optional, Tuple

from ..support.files import write_atomically
from .errors import Errors
from .lock import DamagedRecord, damaged_record_error, process_record, read_holder, record_alive, recorded_pid

TRAINER_RECORD = "trainer.json"
PR_SET_PDEATHSIG = 1  # linux/prctl.h
WATCHDOG = Path(__file__).with_name("watchdog.py")

PreExec = Optional[Callable[[], None]]


def tied_to_this_process(command: List[str], watchdog: Optional[bool] = None) -> Tuple[List[str], PreExec]:
    """The command and the preexec_fn of a child that dies with this
    process: the parent-death signal on Linux, else (or with watchdog=True)
    the command under a watchdog process."""
    if watchdog is None:
        watchdog = not sys.platform.startswith("linux")
    if watchdog:
        return [sys.executable, "-I", str(WATCHDOG), str(os.getpid()), *command], None
    return command, _parent_death_signal(os.getpid())


def _parent_death_signal(parent: int) -> Callable[[], None]:
    # resolved here, in the parent: the child only calls it
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def kill_me_with_my_parent() -> None:
        if prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != parent:  # the parent died before the request
            os.kill(os.getpid(), signal.SIGKILL)

    return kill_me_with_my_parent


def check_no_live_trainer(run_dir: Path, run_name: str) -> None:
    """Refuse ([SLA-E098]) to start a run whose trainer from an earlier call
    still runs ([SLA-E135] for a damaged record); a record of a trainer that
    is gone is removed."""
    record_path = run_dir / TRAINER_RECORD
    record = read_holder(record_path)
    if record is None:
        return
    try:
        alive = recorded_pid(record) is not None and record_alive(record)
    except DamagedRecord as error:
        raise ValueError(damaged_record_error(record_path, run_dir, error)) from None
    if alive:
        raise ValueError(Errors.E098.format(run=run_name, pid=record["pid"], host=record.get("host", "an unknown host"),
                                            record=record_path))
    record_path.unlink(missing_ok=True)


@contextmanager
def recorded(process: "subprocess.Popen[bytes]", record_path: Optional[Path]) -> Iterator[None]:
    """Keep the child's pid and start time at record_path (if given) while
    the block runs, which waits for the child."""
    if record_path is None:
        yield
        return
    record = {**process_record(process.pid), "since": time.strftime("%Y-%m-%d %H:%M:%S"),
              "parent": os.getpid()}
    write_atomically(record_path, json.dumps(record).encode("utf8"))
    try:
        yield
    finally:
        record_path.unlink(missing_ok=True)
