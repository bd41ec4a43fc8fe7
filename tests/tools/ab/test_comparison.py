"""How many seeds a paired difference would need to be shown (by the
verdict's own rule), the verdicts of Holm's adjustment, and the main score
of an evaluation."""
import numpy
import pytest

from spacy_sla.tools.ab.comparison import adjust, main_score, seeds_needed
from spacy_sla.tools.ab.intervals import AB_MIN_SEEDS, holm_adjusted, paired_difference


def test_seeds_needed_follows_the_t_interval():
    # differences 1, 3: mean 2, sd 1.414; with n seeds the half-width is t_{n-1} * 1.414 / sqrt(n):
    # n=3: 4.30 * 0.816 = 3.51 > 2; n=4: 3.18 * 0.707 = 2.25 > 2; n=5: 2.78 * 0.632 = 1.76 < 2
    assert seeds_needed([1.0, 3.0]) == 5
    assert seeds_needed([0.5, -0.5]) is None
    assert seeds_needed([1.0]) is None
    # over two comparisons, at alpha 0.025 (Holm's first step): n=6: t_5 3.16 × 0.577 = 1.83 < 2, n=5: 2.20 > 2
    assert seeds_needed([1.0, 3.0], family_size=2) == 6
    assert seeds_needed([2.0, 2.0]) is None  # no spread to go by: not "2", which two seeds did not show
    assert seeds_needed([2.0, 2.1]) == AB_MIN_SEEDS  # never fewer than the seeds an interval needs
    assert seeds_needed([1.0, -0.9]) == 101  # mean 0.05, sd 1.34: thousands, beyond the limit


def test_seeds_needed_at_or_below_the_seeds_run_only_where_the_seed_test_shows_it():
    rng = numpy.random.default_rng(0)
    checked = 0
    for _ in range(300):
        n, family = int(rng.integers(3, 9)), int(rng.integers(1, 5))
        differences = list(rng.normal(rng.uniform(-1, 1), rng.uniform(0.1, 1.5), n))
        needed = seeds_needed(differences, family)
        p_values = [paired_difference(dict(enumerate(differences)), dict.fromkeys(range(n), 0.0))["p_value"]]
        p_values += list(rng.uniform(0, 1, family - 1))  # the family's other comparisons, any p-values
        shown = holm_adjusted(p_values)[0] < 0.05
        if needed is not None and needed <= n:
            assert shown, (differences, family)
            checked += 1
    assert checked > 20


def test_adjust_gives_no_verdict_below_three_seeds():
    def row(differences):
        over_seeds = paired_difference(dict(enumerate(differences)), dict.fromkeys(range(len(differences)), 0.0),
                                       AB_MIN_SEEDS)
        documents = {"mean": over_seeds["mean"], "low": 0.5, "high": 1.5, "p_value": 0.001, "verdict": "better"}
        return {"score": "score", "variant": "sla", "over_seeds": over_seeds, "over_documents": documents}

    section = {"rows": [row([1.0, 1.0]), row([1.0, 1.1, 0.9])]}
    adjust([section])
    two, three = section["rows"]
    assert (two["verdict"], two["seeds_needed"]) == ("not shown (needs 3 seeds)", None)
    assert "p_holm" not in two["over_seeds"] and two["over_documents"]["p_holm"] == 0.002
    assert three["verdict"] == "better" and three["seeds_needed"] == 3


def test_main_score_is_the_weighted_sum_of_the_scores_there_are():
    weights = {"ents_f": 0.5, "tag_acc": 0.25, "cats_score": 0.25}
    scores = {"ents_f": 0.8, "tag_acc": 0.9, "cats_score": None, "speed": 1000.0}
    assert main_score(scores, weights) == pytest.approx(0.5 * 0.8 + 0.25 * 0.9)
    assert main_score({}, weights) == 0
