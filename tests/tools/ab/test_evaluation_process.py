"""The evaluation's own process (`python -m spacy_sla.tools.ab.evaluation_process`):
it starts without runpy's warning about a module the package imported, and
a failure leaves its record beside the output."""
import json
import subprocess
from pathlib import Path

from spacy_sla.tools.ab.evaluation import LOAD, failure_path
from spacy_sla.tools.ab.runs import evaluation_command


def test_the_evaluation_process_starts_without_a_runpy_warning_and_records_its_failure(tmp_path: Path):
    output = tmp_path / "dev-evaluation.json"
    command = evaluation_command(tmp_path / "no-model", tmp_path / "dev.spacy", output, resamples=10)
    assert command[1:3] == ["-m", "spacy_sla.tools.ab.evaluation_process"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    assert "RuntimeWarning" not in result.stderr and "found in sys.modules" not in result.stderr, result.stderr[:2000]
    assert result.stderr.lstrip().startswith("Traceback"), result.stderr[:2000]  # the log starts with the failure
    record = json.loads(failure_path(output).read_text(encoding="utf8"))
    assert record["step"] == LOAD and record["corpus"]["mode"] == "config" and not output.exists()
    assert record["error"].startswith("OSError") and "no-model" in record["error"]
