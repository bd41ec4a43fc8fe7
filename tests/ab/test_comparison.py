"""How many seeds a paired difference would need to be shown, and the main
score of an evaluation."""
import pytest

from spacy_sla.ab.comparison import main_score, seeds_needed


def test_seeds_needed_follows_the_t_interval():
    # differences 1, 3: mean 2, sd 1.414; with n seeds the half-width is t_{n-1} * 1.414 / sqrt(n):
    # n=3: 4.30 * 0.816 = 3.51 > 2; n=4: 3.18 * 0.707 = 2.25 > 2; n=5: 2.78 * 0.632 = 1.76 < 2
    assert seeds_needed([1.0, 3.0]) == 5
    assert seeds_needed([0.5, -0.5]) is None
    assert seeds_needed([1.0]) is None


def test_main_score_is_the_weighted_sum_of_the_scores_there_are():
    weights = {"ents_f": 0.5, "tag_acc": 0.25, "cats_score": 0.25}
    scores = {"ents_f": 0.8, "tag_acc": 0.9, "cats_score": None, "speed": 1000.0}
    assert main_score(scores, weights) == pytest.approx(0.5 * 0.8 + 0.25 * 0.9)
    assert main_score({}, weights) == 0
