"""The training children of `spacy sla ab`: killed with ab (a SIGKILL of ab
included), recorded in their run folder while they run, and never started
again on a run whose earlier trainer still lives."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spacy_sla.tools.ab.children import TRAINER_RECORD, check_no_live_trainer, tied_to_this_process
from spacy_sla.tools.ab.lock import process_alive, process_record
from spacy_sla.tools.ab.processes import run_command
from spacy_sla.tools.ab.runs import AbRun, train

on_linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")


@pytest.fixture
def live_process():
    process = subprocess.Popen(["sleep", "600"])
    yield process
    process.kill()
    process.wait()


def test_a_trainer_is_recorded_while_it_runs(tmp_path):
    record = tmp_path / "run" / TRAINER_RECORD
    record.parent.mkdir()
    reads_its_record = "import os, sys; print(os.getpid(), open(sys.argv[1]).read())"
    run_command([sys.executable, "-c", reads_its_record, str(record)], tmp_path / "train.log", record)
    pid, text = (tmp_path / "train.log").read_text(encoding="utf8").split(" ", 1)
    seen = json.loads(text)
    assert seen["pid"] == int(pid) and seen["parent"] == os.getpid()
    assert not record.exists()  # removed once the trainer ended


def a_run(tmp_path: Path) -> AbRun:
    config = tmp_path / "vanilla.cfg"
    config.write_text("[training]\nmax_steps = 2\n", encoding="utf8")
    return AbRun("vanilla", 0, None, config, tmp_path / "out", tmp_path / "train.spacy", tmp_path / "dev.spacy")


def test_a_run_whose_earlier_trainer_lives_is_not_started_again(tmp_path, live_process):
    run = a_run(tmp_path)
    run.run_dir.mkdir(parents=True)
    (run.run_dir / "train-log.jsonl").write_text('{"step": 1}\n', encoding="utf8")  # the earlier trainer's
    record = run.run_dir / TRAINER_RECORD
    record.write_text(json.dumps(process_record(live_process.pid)), encoding="utf8")
    with pytest.raises(ValueError, match=rf"\[SLA-E098\] The run vanilla/seed0 is still being trained by pid "
                                         rf"{live_process.pid} on "):
        train(run)
    assert sorted(path.name for path in run.run_dir.iterdir()) == ["train-log.jsonl", TRAINER_RECORD]
    live_process.kill()
    live_process.wait()
    check_no_live_trainer(run.run_dir, run.name)  # the trainer is gone: its record goes, the run may start
    assert not record.exists()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="process start times come from /proc")
def test_a_reused_pid_is_no_live_trainer(tmp_path, live_process):
    record = tmp_path / TRAINER_RECORD
    record.write_text(json.dumps({**process_record(live_process.pid), "start_ticks": -1}), encoding="utf8")
    check_no_live_trainer(tmp_path, "vanilla/seed0")
    assert not record.exists()


@pytest.mark.parametrize("pid", [0, -1, 1, "4242", 2**40, False, None], ids=repr)
def test_a_trainer_record_whose_pid_no_process_can_have_is_damaged_and_never_killed(tmp_path, pid):
    record = tmp_path / TRAINER_RECORD
    record.write_text(json.dumps({**process_record(os.getpid()), "pid": pid}), encoding="utf8")
    with pytest.raises(ValueError) as refused:
        check_no_live_trainer(tmp_path, "vanilla/seed0")
    message = str(refused.value)
    assert message.startswith(f"[SLA-E135] {record} is damaged: its pid, {json.dumps(pid)}, is not a process id")
    assert "kill" not in message and f"writing into {tmp_path}" in message
    assert record.exists()  # left for the user to judge


# A parent that starts a child as `spacy sla ab` starts `spacy train`, and
# waits for it; the child writes its pid to argv[1] and sleeps.
PARENT = """
import subprocess, sys
child = [sys.executable, "-c", "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(600)",
         sys.argv[1]]
if sys.argv[2] == "untied":
    subprocess.Popen(child, start_new_session=True).wait()
elif sys.argv[2] == "watchdog":
    from spacy_sla.tools.ab.children import tied_to_this_process
    command, preexec_fn = tied_to_this_process(child, watchdog=True)
    subprocess.Popen(command, start_new_session=True, preexec_fn=preexec_fn).wait()
else:
    from spacy_sla.tools.ab.processes import run_command
    run_command(child, None)
"""


def _wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


@pytest.mark.slow  # each parent imports spacy_sla
@on_linux
@pytest.mark.parametrize("tie,survives", [("run_command", False), ("watchdog", False), ("untied", True)])
def test_a_child_does_not_outlive_its_parent_killed_with_sigkill(tmp_path, tie, survives):
    """run_command's child (parent-death signal) and a watchdog's die with a
    parent killed by SIGKILL; a child in its own session without either, as
    ab started them before, lives on."""
    pid_file = tmp_path / "child.pid"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(pid_file), tie])
    child_pid = None
    try:
        assert _wait_for(lambda: pid_file.exists() and pid_file.read_text(), 120), "the child did not start"
        child_pid = int(pid_file.read_text())
        assert process_alive(child_pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        gone = _wait_for(lambda: not process_alive(child_pid), 10)
        assert gone is not survives
    finally:
        parent.kill()
        parent.wait()
        if child_pid is not None and process_alive(child_pid):
            os.kill(child_pid, signal.SIGKILL)


def test_off_linux_the_command_runs_under_the_watchdog():
    command, preexec_fn = tied_to_this_process(["spacy", "train"], watchdog=True)
    assert preexec_fn is None
    assert command[1:3] == ["-I", str(Path(sys.modules["spacy_sla.tools.ab.children"].__file__).with_name("watchdog.py"))]
    assert command[3:] == [str(os.getpid()), "spacy", "train"]


@pytest.mark.slow  # `spacy sla ab` in a process of its own, then again to the end
@on_linux
def test_ab_killed_with_sigkill_takes_its_trainer_along_and_the_next_call_trains_that_run(tiny_bert, tmp_path):
    import spacy
    from spacy.cli._util import app
    from typer.testing import CliRunner

    import spacy_sla.tools.cli  # noqa: F401  (registers `sla` on spaCy's app)

    from .test_runs import PARSER, write_corpus, write_user_config
    from util import annotated_docs

    if not spacy.util.is_package(PARSER):
        pytest.skip(f"{PARSER} is not installed")
    runner = CliRunner()
    train_path = write_corpus(tmp_path / "train.spacy", annotated_docs(16, 0))
    dev = write_corpus(tmp_path / "dev.spacy", annotated_docs(8, 1))
    user = write_user_config(tmp_path / "user.cfg", ["ner"])
    result = runner.invoke(app, ["sla", "init-config", str(user), str(tmp_path / "configs"), "--variants", "sla",
                                 "--parser", PARSER])
    assert result.exit_code == 0, result.output
    output = tmp_path / "out"
    arguments = ["sla", "ab", str(tmp_path / "configs"), str(output), "--paths.train", str(train_path),
                 "--paths.dev", str(dev), "--seeds", "0", "--resamples", "100", "--no-figure",
                 "--components.transformer.model.name", str(tiny_bert), "--training.eval_frequency", "2",
                 "--training.batcher.size", "300", "--training.accumulate_gradient", "1",
                 "--training.optimizer.learn_rate.warmup_steps", "1"]
    with (tmp_path / "ab.log").open("w") as log:
        ab = subprocess.Popen([sys.executable, "-m", "spacy", *arguments, "--training.max_steps", "100000"],
                              stdout=log, stderr=subprocess.STDOUT)
    trainer_pid = None
    try:
        assert _wait_for(lambda: any(output.rglob(TRAINER_RECORD)), 300), (tmp_path / "ab.log").read_text()
        (record,) = output.rglob(TRAINER_RECORD)
        trainer_pid = json.loads(record.read_text(encoding="utf8"))["pid"]
        assert process_alive(trainer_pid)
        ab.send_signal(signal.SIGKILL)
        ab.wait()
        assert _wait_for(lambda: not process_alive(trainer_pid), 10), "the trainer outlived ab"
    finally:
        ab.kill()
        ab.wait()
        if trainer_pid is not None and process_alive(trainer_pid):
            os.kill(trainer_pid, signal.SIGKILL)
    result = runner.invoke(app, [*arguments, "--training.max_steps", "4"])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "Took over" in said and "is no longer running" in said
    assert not any(output.rglob(TRAINER_RECORD)) and (output / "report.md").exists()
