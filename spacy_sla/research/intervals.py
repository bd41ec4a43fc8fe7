"""Paired differences between two variants over the seeds both were run
with, and their 95% t-intervals, for the comparison table.

A seed fixes the data order and the new layers' initialisation for every
variant alike, so the per-seed differences (variant − vanilla) are paired
and their spread is smaller than the spread of either variant alone. The
interval is mean ± t_{0.975, n−1} · sd / √n of the n differences (sd: sample
standard deviation). The t quantiles come from the table below (scipy is
not a dependency of this project).
"""
import math
import statistics
from typing import Dict, List, Optional

# Two-sided 95% quantiles of Student's t, t_{0.975, df}, to three decimals.
T_975: Dict[int, float] = {
    1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
    11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093, 20: 2.086,
    21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060, 26: 2.056, 27: 2.052, 28: 2.048, 29: 2.045, 30: 2.042,
    40: 2.021, 60: 2.000, 120: 1.980,
}
NORMAL_975 = 1.960

BETTER, WORSE, NOT_SHOWN, TOO_FEW = "better", "worse", "not shown", "not shown (n<2)"


def t_quantile_975(df: int) -> float:
    """t_{0.975, df}; between tabulated degrees of freedom the value of the
    next smaller one (slightly wider intervals, never narrower), beyond
    120 the normal quantile."""
    if df < 1:
        raise ValueError(f"A t quantile needs at least 1 degree of freedom, got {df}")
    if df > 120:
        return NORMAL_975
    return T_975[max(known for known in T_975 if known <= df)]


def paired_difference(scores: Dict[int, float], baseline: Dict[int, float]) -> Dict[str, Optional[object]]:
    """Differences scores[seed] − baseline[seed] over the seeds both have:
    their mean, sample sd, the 95% t-interval and a verdict ("better",
    "worse": the interval excludes 0; "not shown": it covers 0; "not shown
    (n<2)": fewer than two paired seeds, so no interval)."""
    seeds: List[int] = sorted(set(scores) & set(baseline))
    differences = [scores[seed] - baseline[seed] for seed in seeds]
    result: Dict[str, Optional[object]] = {
        "seeds": seeds, "n": len(seeds), "differences": differences,
        "mean": statistics.mean(differences) if differences else None,
        "sd": None, "half_width": None, "low": None, "high": None, "verdict": TOO_FEW,
    }
    if len(differences) < 2:
        return result
    mean = statistics.mean(differences)
    sd = statistics.stdev(differences)
    half_width = t_quantile_975(len(differences) - 1) * sd / math.sqrt(len(differences))
    low, high = mean - half_width, mean + half_width
    verdict = BETTER if low > 0 else WORSE if high < 0 else NOT_SHOWN
    result.update({"sd": sd, "half_width": half_width, "low": low, "high": high, "verdict": verdict})
    return result
