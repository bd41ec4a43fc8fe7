"""Paired differences between two variants over the seeds both were run
with, their 95% t-intervals and p-values, and the Holm adjustment of a
family of such comparisons, for the comparison table.

A seed fixes the data order and the new layers' initialisation for every
variant alike, so the per-seed differences (variant − vanilla) are paired
and their spread is smaller than the spread of either variant alone. The
interval is mean ± t_{0.975, n−1} · sd / √n of the n differences (sd: sample
standard deviation); the p-value is that of the same paired t-test (H0: the
mean difference is 0), so "the interval excludes 0" and "p < 0.05" agree.
"""
import math
import statistics
from typing import Any, Dict, List, Sequence

from scipy import stats

BETTER, WORSE, NOT_SHOWN, TOO_FEW = "better", "worse", "not shown", "not shown (n<2)"
ALPHA = 0.05
# The seeds `spacy sla ab` needs for an interval over seeds: two give the
# spread one degree of freedom (t = 12.7), an interval as wide as chance
# makes it, and none at all when the two differences are equal (common for
# a score on a small dev set): a point and p = 0. Three are the fewest that
# the report puts an interval, a p-value or a verdict on.
AB_MIN_SEEDS = 3


def too_few(min_seeds: int) -> str:
    """The verdict of a comparison over fewer paired seeds than min_seeds."""
    return TOO_FEW if min_seeds <= 2 else f"not shown (needs {min_seeds} seeds)"


def t_quantile(df: int, alpha: float = ALPHA) -> float:
    """t_{1 − alpha/2, df}, the quantile of a two-sided (1 − alpha) interval."""
    if df < 1:
        raise ValueError(f"A t quantile needs at least 1 degree of freedom, got {df}")
    return float(stats.t.ppf(1 - alpha / 2, df))


def t_quantile_975(df: int) -> float:
    """t_{0.975, df}, the quantile of a two-sided 95% interval."""
    return t_quantile(df)


def paired_difference(scores: Dict[int, float], baseline: Dict[int, float],
                      min_seeds: int = 2) -> Dict[str, Any]:
    """Differences scores[seed] − baseline[seed] over the seeds both have:
    their mean, sample sd, the 95% t-interval, the two-sided p-value and a
    verdict ("better", "worse": the interval excludes 0; "not shown": it
    covers 0; too_few(min_seeds), e.g. "not shown (n<2)": fewer paired
    seeds than min_seeds (at least 2), so no interval, sd or p-value)."""
    seeds: List[int] = sorted(set(scores) & set(baseline))
    differences = [scores[seed] - baseline[seed] for seed in seeds]
    result: Dict[str, Any] = {
        "seeds": seeds, "n": len(seeds), "differences": differences,
        "mean": statistics.mean(differences) if differences else None,
        "sd": None, "half_width": None, "low": None, "high": None, "p_value": None, "verdict": too_few(min_seeds),
    }
    if len(differences) < max(2, min_seeds):
        return result
    mean = statistics.mean(differences)
    sd = statistics.stdev(differences)
    df = len(differences) - 1
    standard_error = sd / math.sqrt(len(differences))
    half_width = t_quantile_975(df) * standard_error
    low, high = mean - half_width, mean + half_width
    # Identical differences: no spread, so the mean is exact (p = 1 if it is 0, else 0).
    p_value = (1.0 if mean == 0 else 0.0) if standard_error == 0 else float(2 * stats.t.sf(abs(mean) / standard_error, df))
    verdict = BETTER if low > 0 else WORSE if high < 0 else NOT_SHOWN
    result.update({"sd": sd, "half_width": half_width, "low": low, "high": high, "p_value": p_value, "verdict": verdict})
    return result


def holm_adjusted(p_values: Sequence[float]) -> List[float]:
    """Holm's step-down adjustment of a family of p-values, in their input
    order: the k-th smallest of m is multiplied by (m − k + 1), then made
    non-decreasing in that order and capped at 1. An adjusted p below 0.05
    keeps the family's chance of any false "better"/"worse" under 5%."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [0.0] * len(p_values)
    running_max = 0.0
    for rank, index in enumerate(order):
        running_max = max(running_max, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running_max
    return adjusted
