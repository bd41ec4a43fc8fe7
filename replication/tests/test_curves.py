"""Learning curves drawn from run records (replication/curves.py)."""
import json
import subprocess
import sys

import pytest

from replication.curves import (
    curves_by_task,
    gains_table,
    last_interval_gains,
    line_styles,
    paired_by_step_table,
    paired_differences_by_step,
    plot_curves,
    read_records,
)


def record(task, variant, seed, curve):
    return {"task": task, "variant": variant, "seed": seed, "metric": "cats_mcc", "score": 0.1, "curve": curve}


RECORDS = [
    record("cola", "vanilla", 0, [{"step": 200, "score": 0.2, "losses": {}}, {"step": 0, "score": -0.01, "losses": {}}]),
    record("cola", "plain", 1, [{"step": 100, "score": 0.1, "train_loss": 0.6}, {"step": 200, "score": None}]),
    record("sst2", "sla", 0, []),
]


def test_curves_are_sorted_by_step_and_skip_missing_scores_and_empty_runs():
    tasks = curves_by_task(RECORDS)
    assert tasks == {"cola": {("vanilla", 0): [(0, -0.01), (200, 0.2)], ("plain", 1): [(100, 0.1)]}}
    assert curves_by_task(RECORDS, seeds=[1]) == {"cola": {("plain", 1): [(100, 0.1)]}}


def test_a_task_with_several_budgets_names_each_curve_with_its_budget():
    short = dict(record("cola", "vanilla", 0, [{"step": 100, "score": 0.1}]), settings={"training.max_steps": 400})
    long = dict(record("cola", "vanilla", 0, [{"step": 800, "score": 0.3}]), settings={"training.max_steps": 800})
    assert curves_by_task([short, long]) == {
        "cola": {("vanilla (400 steps)", 0): [(100, 0.1)], ("vanilla (800 steps)", 0): [(800, 0.3)]}}


def test_the_last_interval_gain_says_whether_a_run_was_still_improving():
    def run(seed, scores):
        curve = [{"step": 100 * (i + 1), "score": s} for i, s in enumerate(scores)]
        return dict(record("cola", "sla", seed, curve), settings={"training.max_steps": 300})

    rows = last_interval_gains([run(0, [0.1, 0.2, 0.25]), run(1, [0.1, 0.3, 0.33]), run(2, [0.5]), RECORDS[0]])
    assert [(row["variant"], row["seeds"]) for row in rows] == [("sla", [0, 1]), ("vanilla", [0])]
    sla, vanilla = rows
    assert sla["interval"] == (200, 300) and sla["gains"] == pytest.approx([0.05, 0.03])
    assert sla["mean"] == pytest.approx(0.04) and sla["std"] == pytest.approx(0.0141421, abs=1e-6)
    assert vanilla["gains"] == pytest.approx([0.21]) and vanilla["std"] is None  # 0 -> 200, score -0.01 -> 0.2
    assert "| cola | 300 steps | sla | 200 → 300 | +4.00 ± 1.41 | 2 | +5.00, +3.00 |" in gains_table(rows)


def test_the_paired_difference_at_each_step_uses_the_seeds_that_evaluated_it_in_both_runs():
    def run(variant, seed, scores):
        curve = [{"step": step, "score": score} for step, score in scores.items()]
        return dict(record("conll2003", variant, seed, curve), settings={"training.max_steps": 400})

    records = [
        run("vanilla", 0, {200: 0.50, 400: 0.80}), run("sla", 0, {200: 0.51, 400: 0.79}),
        run("vanilla", 1, {200: 0.60, 400: 0.82}), run("sla", 1, {200: 0.62, 400: 0.80}),
        run("vanilla", 2, {400: 0.84}), run("sla", 2, {200: 0.70, 400: 0.82}),
        run("window", 0, {400: 0.9}),                     # one paired seed: no interval
        run("plain", 0, {100: 0.3}),                      # no step in common with vanilla: no row
    ]
    rows = paired_differences_by_step(records)
    assert [(row["variant"], row["step"], row["paired"]["seeds"]) for row in rows] == [
        ("sla", 200, [0, 1]), ("sla", 400, [0, 1, 2]), ("window", 400, [0])]
    at_200, at_400, window = (row["paired"] for row in rows)
    # differences 0.01, 0.02: mean 0.015, sd 0.00707, t(1) = 12.706 -> half width 0.0635
    assert at_200["mean"] == pytest.approx(0.015) and at_200["half_width"] == pytest.approx(0.06353, abs=1e-5)
    # differences -0.01, -0.02, -0.02: mean -0.01667, sd 0.00577, t(2) = 4.303 -> [-0.0310, -0.0023]: worse
    assert at_400["low"] == pytest.approx(-0.03101, abs=1e-5) and at_400["high"] == pytest.approx(-0.00232, abs=1e-5)
    assert at_400["verdict"] == "worse" and window["verdict"] == "not shown (n<2)"
    table = paired_by_step_table(rows)
    assert "| conll2003 | 400 steps | sla − vanilla | 400 | -1.67 ± 1.43 [-3.10, -0.23] (n=3) | worse | -1.00, -2.00, -2.00 |" in table
    assert "| window − vanilla | 400 | +10.00 (n=1) | not shown (n<2) | +10.00 |" in table
    assert [row["variant"] for row in paired_differences_by_step(records, reference="sla")] == ["vanilla"] * 2 + ["window"]


def test_each_attention_variant_keeps_its_colour_and_each_budget_has_its_line_style():
    variants = ["vanilla", "plain", "sla", "window", "sgnet", "lisa", "softbias", "logthreshold", "depscale",
                "sla-noneighbours", "sla-nopunct"]  # the listed kinds first, then the others by name
    labels = [f"{variant} (400 steps, minilm)" for variant in variants]
    labels += ["vanilla (1200 steps, minilm)", "paper-sla (1070 steps, minilm)"]
    styles = line_styles(labels)
    assert [styles[f"{variant} (400 steps, minilm)"][0] for variant in variants] == list(range(11))  # C0.. first
    # the longest budget solid, the next dashed, the shortest dotted; a recipe's variant in its kind's colour
    assert styles["vanilla (1200 steps, minilm)"] == (0, "-")
    assert styles["paper-sla (1070 steps, minilm)"] == (2, "--")
    assert styles["sla (400 steps, minilm)"] == (2, ":")
    # one budget; the colours count the kinds present
    assert line_styles(["window", "vanilla"]) == {"vanilla": (0, "-"), "window": (1, "-")}


def test_the_figure_is_written_and_no_curve_is_a_clear_error(tmp_path):
    output = tmp_path / "figures" / "curves.png"
    plot_curves(curves_by_task(RECORDS), {"cola": "cats_mcc"}, output)
    assert output.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="--eval-frequency"):
        plot_curves({}, {}, output)


def test_the_cli_reads_records_from_a_directory(tmp_path):
    for item in RECORDS:
        path = tmp_path / "records" / item["task"] / item["variant"] / f"seed{item['seed']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(item), encoding="utf8")
    assert len(read_records(tmp_path / "records")) == 3
    output = tmp_path / "curves.svg"
    result = subprocess.run([sys.executable, "-m", "replication", "curves", str(tmp_path / "records"), "-o",
                             str(output), "--seeds", "0"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert output.read_text().lstrip().startswith("<?xml")
    assert "| cola | steps n/a | vanilla | 0 → 200 | +21.00 ± n/a | 1 | +21.00 |" in result.stdout
    # plain (step 100) and vanilla (steps 0, 200) share no evaluation step: a table without rows
    assert "| task | budget | variant | step | paired Δ vs reference" in result.stdout
    assert "− vanilla |" not in result.stdout
    empty = tmp_path / "empty"
    empty.mkdir()
    result = subprocess.run([sys.executable, "-m", "replication", "curves", str(empty), "-o", str(output)],
                            capture_output=True, text=True)
    assert result.returncode == 1 and "No record with a learning curve" in result.stdout
