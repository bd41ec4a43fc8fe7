"""The child processes of `spacy sla ab`: a command's output goes to its
log, a failure is a CalledProcessError, and SIGTERM or SIGINT becomes
AbInterrupted while ab runs."""
import signal
import subprocess
import sys

import pytest

from spacy_sla.tools.ab.processes import AbInterrupted, run_command, stop_on_signals


def test_a_commands_output_goes_to_its_log(tmp_path):
    log = tmp_path / "run" / "train.log"
    run_command([sys.executable, "-c", "import sys; print('to stdout'); print('to stderr', file=sys.stderr)"], log)
    assert sorted(log.read_text(encoding="utf8").splitlines()) == ["to stderr", "to stdout"]


def test_a_failed_command_raises_with_its_exit_code(tmp_path):
    command = [sys.executable, "-c", "print('went wrong'); raise SystemExit(3)"]
    with pytest.raises(subprocess.CalledProcessError) as failure:
        run_command(command, tmp_path / "train.log")
    assert failure.value.returncode == 3 and failure.value.cmd == command
    assert (tmp_path / "train.log").read_text(encoding="utf8") == "went wrong\n"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_becomes_ab_interrupted_and_the_handlers_come_back(signum):
    before = signal.getsignal(signum)
    with pytest.raises(AbInterrupted) as stop:
        with stop_on_signals():
            signal.raise_signal(signum)
    assert stop.value.signum == signum and str(stop.value) == signal.Signals(signum).name
    assert stop.value.run_name is None
    assert signal.getsignal(signum) is before
