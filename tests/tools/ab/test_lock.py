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

from spacy_sla.tools.ab.lock import LOCK_FILE, DamagedRecord, hold_output_dir, live_holder, read_holder, recorded_pid


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


# pids no process can have: process groups and every process to os.kill (0, -1), init (1), no number, beyond pid_t
DAMAGED_PIDS = [0, -1, 1, "4242", 2**40, True, 1.5, None]


@pytest.mark.parametrize("pid", DAMAGED_PIDS, ids=repr)
def test_a_lock_whose_pid_no_process_can_have_is_a_damaged_record(tmp_path, pid):
    output = tmp_path / "out"
    output.mkdir()
    lock = output / LOCK_FILE
    lock.write_text(json.dumps({"pid": pid, "host": socket.gethostname()}), encoding="utf8")
    with pytest.raises(ValueError) as refused:
        with hold_output_dir(output, notify=pytest.fail):
            pytest.fail("a damaged lock was taken")
    message = str(refused.value)
    assert message.startswith(f"[SLA-E135] {lock} is damaged: its pid, {json.dumps(pid)}, is not a process id")
    assert f"delete {lock}" in message and "kill" not in message
    assert read_holder(lock) == {"pid": pid, "host": socket.gethostname()}  # left as it was
    with pytest.raises(ValueError, match=r"\[SLA-E135\]"):
        live_holder(output)  # what `spacy sla ab --report-only` asks


@pytest.mark.parametrize("record,pid", [({"pid": 4242}, 4242), ({"pid": 2**31 - 1}, 2**31 - 1), ({}, None),
                                        ({"host": "elsewhere"}, None)])
def test_a_pid_record_names_a_process_id_or_none(record, pid):
    assert recorded_pid(record) == pid


@pytest.mark.parametrize("pid", [2, 2**31, "x"])
def test_the_pid_bounds_are_those_of_pid_t(pid):
    if pid == 2:
        assert recorded_pid({"pid": pid}) == 2
    else:
        with pytest.raises(DamagedRecord):
            recorded_pid({"pid": pid})
