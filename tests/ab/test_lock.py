"""The lock of an output directory: a lock of a process that is gone, or of
a pid reused by another process, is taken over, and released on the way
out, on an error too."""
import json
import os
import socket
import subprocess
from pathlib import Path
from typing import List

import pytest

from spacy_sla.ab.lock import LOCK_FILE, hold_output_dir, read_holder


@pytest.fixture
def live_process():
    process = subprocess.Popen(["sleep", "600"])
    yield process
    process.kill()
    process.wait()


def test_a_lock_of_a_process_that_is_gone_is_taken_over_and_released(tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    output = tmp_path / "out"
    output.mkdir()
    (output / LOCK_FILE).write_text(json.dumps({"pid": gone.pid, "host": socket.gethostname()}), encoding="utf8")
    notes: List[str] = []
    with pytest.raises(RuntimeError, match="stopped inside"):
        with hold_output_dir(output, notify=notes.append) as lock:
            assert read_holder(lock)["pid"] == os.getpid()
            raise RuntimeError("stopped inside")
    assert len(notes) == 1 and f"pid {gone.pid}" in notes[0] and "no longer running" in notes[0]
    assert not (output / LOCK_FILE).exists()  # released on the error too


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="process start times come from /proc")
def test_a_reused_pid_does_not_hold_the_lock(tmp_path, live_process):
    output = tmp_path / "out"
    output.mkdir()
    (output / LOCK_FILE).write_text(json.dumps({"pid": live_process.pid, "host": socket.gethostname(),
                                                "start_ticks": -1}), encoding="utf8")
    notes: List[str] = []
    with hold_output_dir(output, notify=notes.append):
        assert read_holder(output / LOCK_FILE)["pid"] == os.getpid()
    assert notes and not (output / LOCK_FILE).exists()
