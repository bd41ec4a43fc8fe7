"""The opening sentences of report.md: one per compared arm, computed from
per-seed scores by the report's own functions (paired differences, the
bootstrap interval, Holm's adjustment), and the same numbers as the table."""
import re

import numpy
import pytest

from spacy_sla.tools.ab.comparison import adjust
from spacy_sla.tools.ab.intervals import AB_MIN_SEEDS, paired_difference
from spacy_sla.tools.ab.report_markdown import markdown_report
from spacy_sla.tools.ab.report_summary import main_score_name, summary_lines
from spacy_sla.tools.ab.resampling import bootstrap_interval

from .reports import report as small_report


def computed_report(differences, spread=0.01, train_time_ratio=1.05):
    """vanilla and sla on cats_score over len(differences) seeds, sla's
    scores vanilla's plus the differences; the draws over documents spread
    around the mean difference; the rows through comparison.adjust."""
    seeds = list(range(len(differences)))
    vanilla = {seed: 0.80 + 0.01 * seed for seed in seeds}
    sla = {seed: vanilla[seed] + difference for seed, difference in zip(seeds, differences)}
    over_seeds = paired_difference(sla, vanilla, AB_MIN_SEEDS)
    draws = over_seeds["mean"] + numpy.random.default_rng(0).normal(0, spread, 2000)

    def per_seed(scores):
        return {str(seed): value for seed, value in scores.items()}

    rows = [{"score": "score", "variant": "vanilla", "per_seed": per_seed(vanilla), "mean": 0.8, "std": 0.01},
            {"score": "score", "variant": "sla", "per_seed": per_seed(sla), "mean": 0.8, "std": 0.01,
             "over_seeds": over_seeds, "over_documents": bootstrap_interval(draws, over_seeds["mean"], 2000)}]
    section = {"size": "all", "train": "train.spacy", "dev_documents": 150, "weights": {"cats_score": 1.0},
               "setup": {"transformer": "minilm", "pipeline": ["parser", "transformer", "textcat_multilabel"],
                         "max_steps": 400, "max_epochs": 0, "eval_frequency": 100, "batcher": "batch_by_words",
                         "accumulate_gradient": 1},
               "rows": rows, "curves": {"vanilla": {}, "sla": {}}, "methods": {},
               "cost": {"vanilla": {"train_seconds": 400.0, "train_time_ratio": 1.0, "words_per_second": 900.0,
                                    "predict_time_ratio": 1.0},
                        "sla": {"train_seconds": 420.0, "train_time_ratio": train_time_ratio,
                                "words_per_second": 880.0, "predict_time_ratio": 1.02}}}
    adjust([section])
    plan = {"config_dir": "configs", "variants": ["vanilla", "sla"], "train": "train.spacy", "dev": "dev.spacy",
            "seeds": seeds, "train_sizes": ["all"], "sample_seed": 0, "model": "last", "overrides": {},
            "resamples": 2000}
    return {"plan": plan, "sections": [section]}


def first_sentence_and_table_row(report):
    text = markdown_report(report, None)
    lines = text.splitlines()
    assert lines[0] == "# Does SLA help this pipeline?" and lines[1] == ""
    row = next(line for line in lines if line.startswith("| cats_score | sla |"))
    return lines[2], [cell.strip() for cell in row.strip("|").split("|")], text


def bounds(text):
    """(low, high) of "[low, high]" or "low to high" as written."""
    return tuple(re.findall(r"[+-]\d+\.\d\d", text))


@pytest.mark.parametrize("differences", [[0.02, 0.025, 0.03, 0.018, 0.027], [0.01, -0.005, 0.03, 0.005, 0.015]])
def test_with_five_seeds_the_sentence_says_what_the_table_says(differences):
    sentence, cells, text = first_sentence_and_table_row(computed_report(differences))
    delta, _, documents, _, verdict, seeds_cell = cells[4:10]
    mean, interval = delta.split(" ", 1)
    assert sentence.startswith(f"**sla**: {mean} points of cats_score over 5 seeds, 95 % interval ")
    over_seeds, over_documents = re.search(r"interval (.+) over seeds and (.+) over dev documents", sentence).groups()
    assert bounds(over_seeds) == bounds(interval) and len(bounds(interval)) == 2
    assert bounds(over_documents) == bounds(documents)
    assert f": {verdict};" in sentence and sentence.endswith("; training cost 1.05× vanilla.")
    assert "| sla | 420 | 1.05 |" in text
    if verdict == "better":
        assert seeds_cell == "3" and "seeds would be needed" not in sentence
    else:
        assert verdict == "not shown" and seeds_cell == "8"  # mean 1.1, sd 1.29: t_7 × 1.29 / √8 = 1.08 < 1.1
        assert f"; about {seeds_cell} seeds would be needed to show a difference of this size;" in sentence


def test_with_two_seeds_there_is_no_interval_over_seeds_in_the_sentence_or_the_table():
    sentence, cells, text = first_sentence_and_table_row(computed_report([0.01, 0.03]))
    delta, seeds_p, documents, _, verdict, seeds_cell = cells[4:10]
    assert delta == "+2.00 (interval needs 3 seeds)" and seeds_p == "n/a"
    assert verdict == "not shown (needs 3 seeds)"
    assert sentence.startswith("**sla**: +2.00 points of cats_score over 2 seeds, 95 % interval ")
    assert re.search(r"interval (.+) over dev documents \(one over seeds needs 3 seeds\): not shown \(needs 3 seeds\);",
                     sentence).group(1) == " to ".join(bounds(documents))
    # mean 2, sd 1.41 of two differences: at n = 5 the half-width 2.78 × 1.41 / √5 = 1.76 < 2 (one comparison)
    assert seeds_cell == "5" and "; about 5 seeds would be needed to show a difference of this size (a rough guess " \
                                 "from 2 seeds);" in sentence


def test_two_equal_differences_give_no_degenerate_interval_nor_p():
    sentence, cells, text = first_sentence_and_table_row(computed_report([0.02, 0.02]))
    assert cells[4:6] == ["+2.00 (interval needs 3 seeds)", "n/a"] and cells[8:10] == ["not shown (needs 3 seeds)", "n/a"]
    assert "[+2.00, +2.00]" not in text and "+2.00 to +2.00" not in text and "0.000" not in text
    assert "the seeds needed cannot be estimated without 3 seeds or a spread between them" in sentence


def test_a_sentence_per_arm_and_size_and_the_main_score_by_name():
    report = small_report(sizes=("50", "all"))
    assert [line.split(":")[0] for line in summary_lines(report)] == ["**sla, 50 training documents**",
                                                                      "**sla, all training documents**"]
    assert "points of the main score (0.5 × ents_f + 0.5 × tag_acc) over 3 seeds" in summary_lines(report)[0]
    assert main_score_name({"cats_score": 1.0}) == "cats_score"
    assert main_score_name({"cats_score": 0.5}) == "main score (0.5 × cats_score)"
    report["sections"][0]["cost"]["sla"]["train_time_ratio"] = None
    assert summary_lines(report)[0].endswith(": better; training time not recorded.")
