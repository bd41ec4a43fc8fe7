"""report.md of `spacy sla ab`: the comparison tables of the main score and
of the others, the cost, the dev curves and what the report covers."""
from spacy_sla.tools.ab.report_markdown import comparison_table, cost_table, curve_table, markdown_report

from .reports import comparison_row, report, section

MAIN_ROWS = [
    "| main score (0.5 × ents_f + 0.5 × tag_acc) | vanilla | 80.00 ± 1.00 | 79.00, 81.00, 80.00 | (reference) "
    "| | | | | |",
    "| main score (0.5 × ents_f + 0.5 × tag_acc) | sla | 83.00 ± 2.00 | 81.00, 85.00, 83.00 | +3.00 [+1.00, +5.00] "
    "| 0.012 (0.024) | [+1.50, +4.50] | 0.002 | better | 3 |",
]


def test_the_main_score_and_the_others_have_tables_of_their_own():
    main = comparison_table(section(), main=True).splitlines()
    assert main[0].startswith("| score | variant | mean ± std (×100) | per seed |") and main[2:] == MAIN_ROWS
    other = comparison_table(section(), main=False).splitlines()
    assert other[2:] == ["| ents_f | vanilla | 70.00 ± n/a | 70.00 | (reference) | | | | | |"]


def test_seeds_to_show_a_difference_follow_the_verdict():
    wide = section()
    wide["rows"][1].update(seeds_needed=101, verdict="not shown")
    assert comparison_table(wide, main=True).splitlines()[3].endswith("| not shown | >100 |")
    wide["rows"][1]["seeds_needed"] = None
    assert comparison_table(wide, main=True).splitlines()[3].endswith("| not shown | n/a |")
    # as many seeds as were run, yet not shown: the bootstrap over documents did not show it
    wide["rows"][1]["seeds_needed"] = 3
    assert comparison_table(wide, main=True).splitlines()[3].endswith(
        "| not shown | 3 (shown over seeds, not over dev documents) |")


def test_two_seeds_give_no_interval_over_seeds():
    two = section()
    row = two["rows"][1]
    row["over_seeds"] = {"n": 2, "differences": [0.02, 0.02], "mean": 0.02, "low": None, "high": None,
                         "p_value": None}
    row.update(verdict="not shown (needs 3 seeds)", seeds_needed=None)
    assert comparison_table(two, main=True).splitlines()[3].endswith(
        "| +2.00 (interval needs 3 seeds) | n/a | [+1.50, +4.50] | 0.002 | not shown (needs 3 seeds) | n/a |")


def test_cost_and_curves():
    assert cost_table(section()).splitlines()[2:] == ["| vanilla | 10 | 1.00 | 1501 | 1.00 |",
                                                      "| sla | 12 | 1.15 | n/a | n/a |"]
    assert curve_table(section()).splitlines() == ["| step | vanilla | sla |", "|---|---|---|",
                                                   "| 2 | 50.00 | 55.00 |", "| 4 | 80.00 | n/a |"]
    assert curve_table({"curves": {"vanilla": {}, "sla": {}}}) == "(no dev curve: the runs kept no training log)"


def test_the_report_has_a_part_per_training_size():
    text = markdown_report(report(sizes=("50", "all")), "report.png")
    assert text.startswith("# Does SLA help this pipeline?\n")
    assert "Seeds: 0, 1, 2. Training sizes: 50, all (samples drawn once with seed 0, nested)." in text
    assert "![paired differences to vanilla with their intervals, and the dev curves](report.png)" in text
    assert [line for line in text.splitlines() if line.startswith("## ")] == ["## Training size: 50",
                                                                            "## Training size: all"]
    assert text.count(MAIN_ROWS[1]) == 2
    assert "Bootstrap statistic per score: ents_f: counts, cats_macro_auc: auc" in text
    assert "Interim report" not in text and "between the variants" not in text


def test_an_interim_report_names_what_it_left_out_and_pairs_of_variants_get_a_table():
    partial = report()
    partial["left_out"] = ["vanilla/seed2 (not finished)"]
    partial["sections"][0]["between_variants"] = [
        comparison_row("sla", "window", [0.01, 0.03], 0.0, 0.04, 0.2, "not shown")]
    text = markdown_report(partial, None)
    assert "left out until then: vanilla/seed2 (not finished)." in text
    assert "| sla − window | 2 | +1.00, +3.00 | +2.00 | [+0.00, +4.00] | not shown |" in text
    assert "![" not in text  # no figure
