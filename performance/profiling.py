"""Where the extra time of SLA goes: PyTorch operator profiles of a
prediction and of a training step for each benchmark variant on the same
parsed Docs, and the per-operator difference SLA - vanilla.

The benchmark's ratios say how much slower SLA is; this says why, with
the profiler's own numbers (self CPU time per operator).

    python -m spacy sla benchmark --profile 25x32 ...
"""
from typing import Any, Callable, Dict, List, Tuple

from torch.profiler import ProfilerActivity, profile


def parse_profile_setting(text: str) -> Tuple[int, int]:
    """'25x32' -> (25 words, batch size 32)."""
    words, _, batch_size = text.lower().partition("x")
    if not words.isdigit() or not batch_size.isdigit():
        raise ValueError(f"A profile setting reads WORDSxBATCH, e.g. 25x32, not {text!r}")
    return int(words), int(batch_size)


def self_milliseconds(function: Callable[[], Any], repeats: int = 3) -> Dict[str, float]:
    """Self CPU time per operator, in ms per call, averaged over `repeats`
    calls after one warm-up."""
    function()
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        for _ in range(repeats):
            function()
    return {event.key: event.self_cpu_time_total / 1000 / repeats for event in profiler.key_averages()}


def operator_differences(
    profiles: Dict[str, Dict[str, Dict[str, float]]], phase: str, variant: str = "sla", top: int = 8
) -> Dict[str, Any]:
    """The operators that account for most of variant's extra time over
    vanilla in a phase, each difference also as a share of vanilla's total
    (the sum of small differences elsewhere is noise-prone, so it is not
    the denominator)."""
    base, other = profiles["vanilla"][phase], profiles[variant][phase]
    total_base, total_other = sum(base.values()), sum(other.values())
    extra = total_other - total_base
    rows: List[Dict[str, Any]] = []
    for name in set(base) | set(other):
        difference = other.get(name, 0.0) - base.get(name, 0.0)
        rows.append({
            "operator": name,
            "vanilla_ms": base.get(name, 0.0),
            f"{variant}_ms": other.get(name, 0.0),
            "difference_ms": difference,
            "share_of_vanilla": difference / total_base if total_base else 0.0,
        })
    rows.sort(key=lambda row: -row["difference_ms"])
    return {"phase": phase, "variant": variant, "vanilla_total_ms": total_base, f"{variant}_total_ms": total_other,
            "difference_ms": extra, "operators": rows[:top]}


def format_differences(differences: Dict[str, Any]) -> str:
    variant = differences["variant"]
    lines = [
        f"{differences['phase']}: vanilla {differences['vanilla_total_ms']:.1f} ms, {variant} "
        f"{differences[f'{variant}_total_ms']:.1f} ms (self CPU time, all operators), difference "
        f"{differences['difference_ms']:+.1f} ms",
        "",
        f"| operator | vanilla ms | {variant} ms | difference ms | difference / vanilla total |",
        "|---|---|---|---|---|",
    ]
    for row in differences["operators"]:
        lines.append(
            f"| `{row['operator']}` | {row['vanilla_ms']:.1f} | {row[f'{variant}_ms']:.1f} | {row['difference_ms']:+.1f} "
            f"| {100 * row['share_of_vanilla']:+.1f}% |"
        )
    return "\n".join(lines) + "\n"
