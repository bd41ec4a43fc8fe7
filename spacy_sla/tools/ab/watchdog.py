"""`python -I watchdog.py PARENT_PID COMMAND...`: run COMMAND while the
process PARENT_PID lives, and kill COMMAND's process group (COMMAND and
whatever it started) once that process is gone. Where the kernel cannot tie a
child to its parent (no prctl PR_SET_PDEATHSIG off Linux), `spacy sla ab`
starts its training children under it (children.tied_to_this_process).

Run by path, in isolated mode, with the standard library only: it imports
neither spacy_sla nor anything beside this file."""
import os
import signal
import subprocess
import sys
from typing import List

POLL_SECONDS = 1.0


def parent_alive(parent: int) -> bool:
    if os.getppid() != parent:  # re-parented: the parent is gone
        return False
    try:
        os.kill(parent, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def watch(parent: int, command: List[str]) -> int:
    """Run `command` in this process group while `parent` lives; once it is
    gone, kill the group. Returns the command's exit code."""
    child = subprocess.Popen(command)
    # stop_process_group signals the whole group, so the command gets a stop
    # signal itself; the watchdog waits for it to end
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, signal.SIG_IGN)
    while True:
        try:
            return child.wait(timeout=POLL_SECONDS)
        except subprocess.TimeoutExpired:
            pass
        if not parent_alive(parent):
            os.killpg(os.getpgrp(), signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(watch(int(sys.argv[1]), sys.argv[2:]))
