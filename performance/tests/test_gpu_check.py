"""The GPU check (python -m performance.gpu_check run): its CPU mode end to
end on tiny models (slow), its time limits, its refusals, its summary, and
the one command line the GPU machine runs, as the docs give it."""
import json
import sys
import time
from pathlib import Path

import pytest

from performance.encoder_cost import MODEL_TYPES
from performance.gpu_check import (
    DEVICE_COMMAND,
    STEP_LIMITS_S,
    Runner,
    Step,
    format_summary,
    junit_counts,
    main,
    run_check,
    step_environment,
)

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.mark.slow  # two short `spacy train` runs and the benchmark of every family, tiny (about two minutes)
def test_the_cpu_mode_runs_every_step_and_writes_the_summary(tmp_path):
    output = tmp_path / "out"
    assert main(["run", "--gpu-id", "-1", "--output", str(output)]) == 0
    summary = json.loads((output / "summary.json").read_text())
    assert summary["passed"] and [step["name"] for step in summary["steps"]] == list(STEP_LIMITS_S)
    assert summary["command"] == f"python -m performance.gpu_check run --gpu-id -1 --output {output}"
    steps = {step["name"]: step for step in summary["steps"]}
    assert steps["environment"]["details"]["transformers"].startswith("4.53")
    tests = steps["tests"]["details"]
    assert tests["tests"] > 50 and tests["skipped"] == tests["tests"]  # no CUDA here: every gpu test skipped
    training = steps["train"]["details"]
    for variant in ("vanilla", "sla"):
        assert training[variant]["finite_losses"] and training[variant]["logged_steps"][-1] == 4
        assert 0.0 <= training[variant]["last_score"] <= 1.0 and training[variant]["used_gpu"] is False
    assert training["mixed_precision"] is False  # SLA-E115 on the CPU
    families = steps["benchmark"]["details"]["families"]
    assert list(families) == list(MODEL_TYPES)
    for report in families.values():
        assert report["ratios"]["sla"]["predict"] > 0 and report["ratios"]["sla"]["train"] > 0
    text = (output / "summary.md").read_text()
    assert text.startswith("# GPU check: passed") and "| sla | " in text and "| modernbert | " in text
    assert "===== train:" in (output / "steps.log").read_text() and (output / "tests.xml").exists()


def test_a_step_that_runs_out_of_time_is_killed_and_reported(tmp_path):
    runner = Runner(tmp_path, budget_s=60.0, env=step_environment(None))
    step = Step("sleep")
    started = time.monotonic()
    result = runner.command(step, [sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"], 2.0)
    runner.log.close()
    assert result is None and step.status == "timed out" and time.monotonic() - started < 30
    log = (tmp_path / "steps.log").read_text()
    assert "started" in log and "killed after 2 s" in log


def test_no_step_starts_without_time_left(tmp_path):
    runner = Runner(tmp_path, budget_s=5.0, env=step_environment(None))  # all of it the summary's reserve
    step = Step("late")
    assert runner.command(step, [sys.executable, "-c", "print(1)"], 60.0) is None
    runner.log.close()
    assert step.status == "timed out" and step.note == "no time left in the budget"


def test_an_empty_wheelhouse_fails_the_install_and_nothing_else_runs(tmp_path):
    (tmp_path / "whl").mkdir()
    summary = run_check(tmp_path / "out", gpu_id=-1, wheelhouse=tmp_path / "whl", budget_s=60.0)
    assert not summary["passed"] and [step["name"] for step in summary["steps"]] == ["install"]
    assert summary["steps"][0]["status"] == "failed" and "no wheels in" in summary["steps"][0]["note"]
    assert "# GPU check: NOT passed" in (tmp_path / "out" / "summary.md").read_text()


def test_unknown_steps_are_refused_before_anything_runs(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["run", "--gpu-id", "-1", "--output", str(tmp_path / "out"), "--steps", "tests,warmup"])
    assert "unknown steps warmup" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_junit_counts_and_failed_tests(tmp_path):
    report = tmp_path / "tests.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest" tests="4" failures="1" errors="0" skipped="1">'
        '<testcase classname="tests.layers.test_cuda" name="test_a"/>'
        '<testcase classname="tests.layers.test_cuda" name="test_b"><failure message="x"/></testcase>'
        '<testcase classname="tests.layers.test_cuda" name="test_c"><skipped/></testcase>'
        '<testcase classname="tests.layers.test_cuda" name="test_d"/></testsuite></testsuites>'
    )
    assert junit_counts(report) == {"tests": 4, "failures": 1, "errors": 0, "skipped": 1, "passed": 2,
                                    "failed_tests": ["tests.layers.test_cuda::test_b"]}


def test_the_summary_shows_every_family_with_its_ratios_or_why_it_has_none():
    ratios = {"sla": {"predict": 1.25, "train": 1.5, "peak_memory": 1.125}}
    variants = {"vanilla": {"predict_seconds": 0.01, "train_seconds": 0.03}}
    summary = {
        "command": "python -m performance.gpu_check run --gpu-id 0", "gpu_id": 0, "budget_s": 480.0, "seconds": 300.0,
        "date": "2026-01-01", "passed": False,
        "steps": [
            {"name": "environment", "status": "passed", "seconds": 5.0, "note": "",
             "details": {"device": "NVIDIA H100 80GB HBM3", "torch": "2.11.0", "cuda": "13.0", "spacy": "3.8.18",
                         "transformers": "4.53.2", "cupy": "14.2.0"}},
            {"name": "benchmark", "status": "failed", "seconds": 200.0, "note": "failed on albert",
             "details": {"settings": {"layers": 12, "hidden": 768, "heads": 12, "batch_size": 32, "pieces": 128,
                                      "repeats": 10, "device": "cuda:0", "mixed_precision": True},
                         "families": {"bert": {"ratios": ratios, "variants": variants},
                                      "albert": {"error": "RuntimeError: boom"}, "modernbert": {"not_run": "time budget"}}}},
        ],
    }
    text = format_summary(summary)
    assert text.startswith("# GPU check: NOT passed\n\n2026-01-01, NVIDIA H100 80GB HBM3; torch 2.11.0 (CUDA 13.0)")
    assert "| benchmark | failed | 200.0 | failed on albert |" in text
    assert "| bert | 1.250 | 1.500 | 1.125 | 10.0 | 30.0 |" in text
    assert "| albert | RuntimeError: boom |" in text and "| modernbert | time budget |" in text
    assert "its times mean nothing" not in text


def test_the_gpu_machines_command_is_in_the_docs_and_one_short_line():
    assert len(DEVICE_COMMAND) <= 2000 and "\n" not in DEVICE_COMMAND
    assert DEVICE_COMMAND in (ROOT / "docs" / "performance.md").read_text(encoding="utf8")
