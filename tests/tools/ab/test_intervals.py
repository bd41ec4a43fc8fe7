"""Tests of spacy_sla/tools/ab/intervals.py: the paired t interval, its p value and
Holm's adjustment, checked against hand computations."""
import math

import pytest

from spacy_sla.tools.ab.intervals import AB_MIN_SEEDS, holm_adjusted, paired_difference, t_quantile, t_quantile_975


def test_the_t_interval_of_differences_one_two_three():
    # differences 1, 2, 3: mean 2, sd 1, t_{0.975,2} = 4.303, half-width 4.303 / sqrt(3) = 2.484
    paired = paired_difference({0: 11.0, 1: 12.0, 2: 13.0}, {0: 10.0, 1: 10.0, 2: 10.0})
    assert paired["differences"] == [1.0, 2.0, 3.0] and paired["n"] == 3
    assert paired["mean"] == pytest.approx(2.0) and paired["sd"] == pytest.approx(1.0)
    assert paired["half_width"] == pytest.approx(2.484, abs=5e-4)
    assert (paired["low"], paired["high"]) == (pytest.approx(-0.484, abs=5e-4), pytest.approx(4.484, abs=5e-4))
    assert paired["verdict"] == "not shown"  # the interval covers 0



def test_verdicts_follow_the_interval_and_the_paired_seeds():
    assert paired_difference({0: 2.0, 1: 2.1, 2: 2.2}, {0: 1.0, 1: 1.0, 2: 1.0})["verdict"] == "better"
    assert paired_difference({0: 0.0, 1: 0.1, 2: 0.2}, {0: 1.0, 1: 1.0, 2: 1.0})["verdict"] == "worse"
    only_one = paired_difference({0: 2.0, 1: 3.0}, {1: 1.0, 5: 0.0})  # seeds 0 and 5 have no partner
    assert only_one["seeds"] == [1] and only_one["mean"] == 2.0 and only_one["verdict"] == "not shown (n<2)"
    assert paired_difference({0: 1.0}, {1: 1.0})["n"] == 0



def test_t_quantiles():
    # Student's t table, two-sided 95%
    assert [round(t_quantile_975(df), 3) for df in (1, 2, 4, 30)] == [12.706, 4.303, 2.776, 2.042]
    assert t_quantile_975(10_000) == pytest.approx(1.960, abs=1e-3)
    assert round(t_quantile(4, alpha=0.025), 3) == 3.495  # two-sided 97.5%: Holm's first step over two comparisons
    with pytest.raises(ValueError):
        t_quantile_975(0)



def test_p_value_matches_a_hand_computation():
    # differences 1, 2, 3: t = 2 / (1 / sqrt(3)) = 2 sqrt(3); with 2 df the two-sided p is 1 - t / sqrt(t^2 + 2)
    paired = paired_difference({0: 11.0, 1: 12.0, 2: 13.0}, {0: 10.0, 1: 10.0, 2: 10.0})
    t = 2 * math.sqrt(3)
    assert paired["p_value"] == pytest.approx(1 - t / math.sqrt(t * t + 2))  # 0.0742: interval covers 0
    assert paired_difference({0: 1.0, 1: 1.0}, {0: 1.0, 1: 1.0})["p_value"] == 1.0  # no spread, no difference
    assert paired_difference({0: 2.0, 1: 2.0}, {0: 1.0, 1: 1.0})["p_value"] == 0.0  # no spread, a difference
    assert paired_difference({0: 2.0}, {0: 1.0})["p_value"] is None



def test_holm_adjustment_matches_a_hand_computation():
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04 -> running max 0.02, 0.03, 0.06, 0.06
    assert holm_adjusted([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm_adjusted([0.5, 0.9]) == [1.0, 1.0]
    assert holm_adjusted([]) == []



def test_the_ab_report_gives_no_interval_nor_p_from_fewer_than_three_seeds():
    assert AB_MIN_SEEDS == 3
    for scores in ({0: 2.0, 1: 2.0}, {0: 2.0, 1: 3.0}):  # equal differences or not: one degree of freedom
        paired = paired_difference(scores, {0: 0.0, 1: 0.0}, AB_MIN_SEEDS)
        assert paired["n"] == 2 and paired["differences"] == [2.0, scores[1]] and paired["mean"] == (2 + scores[1]) / 2
        assert (paired["sd"], paired["low"], paired["high"], paired["p_value"]) == (None, None, None, None)
        assert paired["verdict"] == "not shown (needs 3 seeds)"
    three = paired_difference({0: 2.0, 1: 3.0, 2: 4.0}, {0: 0.0, 1: 0.0, 2: 0.0}, AB_MIN_SEEDS)
    assert three["low"] == pytest.approx(3 - 4.303 / math.sqrt(3), abs=5e-4) and three["verdict"] == "better"
