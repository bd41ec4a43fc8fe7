"""A finished run is never replaced without being asked: `spacy sla ab`
refuses ([SLA-E145]) before anything is written when OUTPUT_DIR holds
finished runs of other settings, names them and what differs, and
`--dry-run` says per run what a call would do."""
import json
import shutil
from pathlib import Path
from typing import Any, Dict

import pytest
from spacy.cli._util import app
from typer.testing import CliRunner

import spacy_sla.tools.cli  # noqa: F401  (registers `sla` on spaCy's app)
from spacy_sla.tools.ab.earlier_runs import KEPT, TO_TRAIN, WOULD_REPLACE, run_status, setting_changes
from spacy_sla.tools.ab.plan import AbPlan, prepare
from spacy_sla.tools.ab.runs import AbRun
from spacy_sla.tools.support.files import file_fingerprint

from .test_plan import ab_args, contents, write_arm_configs, write_data

runner = CliRunner()


def finish(run: AbRun) -> None:
    """The records of a run that finished: run.json with its settings and a model."""
    run.model_dir.mkdir(parents=True)
    (run.model_dir / "meta.json").write_text('{"name": "trained"}', encoding="utf8")
    record = {"settings": run.settings(), "train_data": file_fingerprint(run.train_path), "train_seconds": 3.0}
    (run.run_dir / "run.json").write_text(json.dumps(record), encoding="utf8")


def finished_comparison(tmp_path: Path, tiny_bert: Path, overrides: Dict[str, Any]):
    configs = write_arm_configs(tmp_path / "configs", tiny_bert)
    train, dev = write_data(tmp_path)
    plan = AbPlan(configs, tmp_path / "out", train, dev, ["sla"], [0, 1], overrides=overrides)
    for run in plan.runs():
        finish(run)
    return configs, train, dev


def test_setting_changes_name_each_override_and_edited_file():
    before = {"variant": "sla", "seed": 0, "overrides": {"training.max_steps": 40, "training.dropout": 0.1},
              "config_sha256": "a" * 64}
    now = {"variant": "sla", "seed": 0, "overrides": {"training.max_steps": 2, "system.gpu_allocator": "pytorch"},
           "config_sha256": "b" * 64}
    assert setting_changes(before, now) == [
        "system.gpu_allocator: the config's value -> pytorch",
        "training.dropout: 0.1 -> the config's value",
        "training.max_steps: 40 -> 2",
        "config file edited (SHA-256 aaaaaaaaaa -> bbbbbbbbbb)",
    ]
    assert setting_changes(before, before) == []


def test_a_call_with_other_settings_is_refused_and_loses_nothing(tiny_bert, tmp_path):
    configs, train, dev = finished_comparison(tmp_path, tiny_bert, {"training.max_steps": 40})
    before = contents(tmp_path / "out")
    result = runner.invoke(app, ab_args(configs, tmp_path / "out", train, dev, "--seeds", "0,1",
                                        "--training.max_steps", "2"))
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert "[SLA-E145]" in text and "holds 4 finished run(s)" in text
    assert "vanilla/seed0, sla/seed0, vanilla/seed1, sla/seed1 (training.max_steps: 40 -> 2)" in text
    assert "--replace" in text
    assert contents(tmp_path / "out") == before  # not even plan.json was written
    # the same settings resume: nothing to refuse
    plan = AbPlan(configs, tmp_path / "out", train, dev, ["sla"], [0, 1], overrides={"training.max_steps": 40})
    assert [run.name for run in prepare(plan)] == ["vanilla/seed0", "sla/seed0", "vanilla/seed1", "sla/seed1"]


def test_dry_run_says_kept_would_replace_or_to_train(tiny_bert, tmp_path):
    configs, train, dev = finished_comparison(tmp_path, tiny_bert, {"training.max_steps": 40})
    # seed 0's runs finished with the settings of this call, seed 1's with others, seed 2 has none
    plan = AbPlan(configs, tmp_path / "out", train, dev, ["sla"], [0], overrides={"training.max_steps": 2})
    for run in plan.runs():
        shutil.rmtree(run.run_dir)
        finish(run)
    before = contents(tmp_path / "out")
    result = runner.invoke(app, ab_args(configs, tmp_path / "out", train, dev, "--seeds", "0,1,2",
                                        "--training.max_steps", "2", "--dry-run"))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert f"vanilla/seed0: {KEPT}" in lines and f"sla/seed0: {KEPT}" in lines
    assert f"vanilla/seed1: {WOULD_REPLACE} (training.max_steps: 40 -> 2)" in lines
    assert f"sla/seed2: {TO_TRAIN}" in lines
    assert "Without --replace this call is refused ([SLA-E145]): 2 finished run(s)" in result.output
    result = runner.invoke(app, ab_args(configs, tmp_path / "out", train, dev, "--seeds", "0,1,2",
                                        "--training.max_steps", "2", "--dry-run", "--replace"))
    assert result.exit_code == 0, result.output
    assert "vanilla/seed1: to train, replacing what finished before with other settings (--replace) " \
           "(training.max_steps: 40 -> 2)" in result.output.splitlines()
    assert "refused" not in result.output
    assert contents(tmp_path / "out") == before


def test_other_training_data_is_named(tiny_bert, tmp_path):
    configs, train, dev = finished_comparison(tmp_path, tiny_bert, {})
    run = AbPlan(configs, tmp_path / "out", train, dev, ["sla"], [0]).runs()[0]
    assert run_status(run) == KEPT
    write_data(tmp_path, n_train=13)  # the same path, other documents
    assert run_status(run) == f"{WOULD_REPLACE} (training data: {train} changed since the run trained on it)"
    with pytest.raises(ValueError, match=r"\[SLA-E145\].*changed since the run trained on it"):
        prepare(AbPlan(configs, tmp_path / "out", train, dev, ["sla"], [0]))
    assert len(prepare(AbPlan(configs, tmp_path / "out", train, dev, ["sla"], [0]), replace=True)) == 2
