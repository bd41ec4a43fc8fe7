"""One `spacy sla ab` per output directory: OUTPUT_DIR/.ab.lock, created
with O_CREAT | O_EXCL, holds the pid and host of the call that owns the
directory. A second call is refused with [SLA-E053] while that process lives;
a lock left by a process that is gone (killed with SIGKILL, a machine that
rebooted) is taken over. `spacy sla annotate` holds its OUTPUT_DIR the same
way, with its own lock file and error (lock_name, in_use); record_alive
tells whether the process of a pid record (a lock's, a trainer's) runs, and
recorded_pid is the one reader of a record's pid: a pid no process can have
is a damaged record ([SLA-E135]), never a process to signal."""
import json
import os
import socket
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Optional, Type

from .errors import Errors

LOCK_FILE = ".ab.lock"
# pid_t is a C int; 0, -1 and 1 are no process to check: os.kill(0) and
# os.kill(-1) reach whole process groups, 1 is init.
PID_BOUND = 2**31


class DamagedRecord(ValueError):
    """A pid record whose pid no process can have."""


def recorded_pid(record: Dict[str, Any]) -> Optional[int]:
    """The pid of a pid record; None where it has none (a lock being
    written). DamagedRecord for a pid that is not a whole number above 1
    and below PID_BOUND (a bool, 0, -1, 1, a string, 2**40): this software
    never writes one, and taken as a process it would be alive forever or
    overflow os.kill."""
    pid = record.get("pid")
    if pid is None and "pid" not in record:
        return None
    if type(pid) is not int or not 1 < pid < PID_BOUND:
        raise DamagedRecord(json.dumps(pid))
    return pid


def damaged_record_error(record_path: Path, place: Path, error: DamagedRecord) -> str:
    return Errors.E135.format(record=record_path, pid=error, place=place)


def _start_ticks(pid: int) -> Optional[int]:
    """When the process started (clock ticks since boot, /proc/PID/stat),
    which tells a reused pid from the lock's process; None off Linux."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[19]) if fields[0] != "Z" else None


def process_alive(pid: int) -> bool:
    """Whether a process of this pid runs on this host (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return state[state.rindex(")") + 2:].split()[0] != "Z"


def process_record(pid: int) -> Dict[str, Any]:
    """What tells a process of this host from any other, later one with its
    pid: the pid, the host and the process's start time."""
    return {"pid": pid, "host": socket.gethostname(), "start_ticks": _start_ticks(pid)}


def record_alive(holder: Dict[str, Any]) -> bool:
    """Whether the process of a record (process_record) still runs; a
    record of another host, or without a pid, is taken as alive.
    DamagedRecord for a pid no process can have."""
    pid = recorded_pid(holder)
    if pid is None or holder.get("host") != socket.gethostname():
        return True  # nothing to check it by: taken as alive, the error says how to remove it
    if not process_alive(pid):
        return False
    recorded, now = holder.get("start_ticks"), _start_ticks(pid)
    return recorded is None or now is None or recorded == now


def read_holder(lock: Path) -> Optional[Dict[str, Any]]:
    """The lock's record; {} for one being written or unreadable, None
    when there is no lock."""
    try:
        text = lock.read_text(encoding="utf8")
    except FileNotFoundError:
        return None
    try:
        holder = json.loads(text)
    except ValueError:
        return {}
    return holder if isinstance(holder, dict) else {}


def live_holder(output_dir: Path, lock_name: str = LOCK_FILE) -> Optional[Dict[str, Any]]:
    """The record of a live process holding output_dir, else None;
    [SLA-E135] for a damaged record."""
    holder = read_holder(output_dir / lock_name)
    try:
        return holder if holder is not None and record_alive(holder) else None
    except DamagedRecord as error:
        raise ValueError(damaged_record_error(output_dir / lock_name, output_dir, error)) from None


def _refusal(output_dir: Path, lock: Path, holder: Dict[str, Any], in_use: str,
             error_type: Type[ValueError]) -> ValueError:
    return error_type(in_use.format(output_dir=output_dir, pid=holder.get("pid", "unknown"),
                                    host=holder.get("host", "an unknown host"), lock=lock))


def _take_over(lock: Path, stale: Dict[str, Any]) -> bool:
    """Remove a stale lock unless another call replaced it meanwhile: the
    rename moves exactly one file, which is put back if it is not the
    stale one."""
    moved = lock.with_name(f"{lock.name}.{os.getpid()}.stale")
    try:
        os.rename(lock, moved)
    except FileNotFoundError:
        return False
    if read_holder(moved) == stale:
        moved.unlink()
        return True
    try:
        os.link(moved, lock)
    except FileExistsError:
        pass
    moved.unlink()
    return False


@contextmanager
def hold_output_dir(output_dir: Path, notify: Callable[[str], None] = print, lock_name: str = LOCK_FILE,
                    in_use: Optional[str] = None, error_type: Type[ValueError] = ValueError) -> Iterator[Path]:
    """Hold output_dir for this process while the block runs; if a live
    process holds it, refused with an error_type of `in_use` (by default
    [SLA-E053]) formatted with output_dir, pid, host and lock. Released on
    every exit, errors included. An output directory made here is removed
    again if it is left empty."""
    in_use = Errors.E053 if in_use is None else in_use
    created = not output_dir.exists()
    output_dir.mkdir(parents=True, exist_ok=True)
    lock = output_dir / lock_name
    record = {**process_record(os.getpid()), "since": time.strftime("%Y-%m-%d %H:%M:%S")}
    holder: Optional[Dict[str, Any]] = {}
    for _ in range(5):  # a stale lock taken over, or a lock that went meanwhile: try again
        try:
            descriptor = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            holder = read_holder(lock)
            if holder is None:
                continue
            try:
                alive = record_alive(holder)
            except DamagedRecord as error:
                raise error_type(damaged_record_error(lock, output_dir, error)) from None
            if alive:
                raise _refusal(output_dir, lock, holder, in_use, error_type) from None
            if _take_over(lock, holder):
                notify(f"Took over {lock}: its process (pid {holder.get('pid')} on {holder.get('host')}) "
                       "is no longer running.")
            continue
        with os.fdopen(descriptor, "w", encoding="utf8") as file:
            json.dump(record, file)
        break
    else:
        raise _refusal(output_dir, lock, holder or {}, in_use, error_type)
    try:
        yield lock
    finally:
        if read_holder(lock) == record:
            lock.unlink()
        if created:
            try:
                output_dir.rmdir()
            except OSError:  # not empty: what was written stays
                pass
