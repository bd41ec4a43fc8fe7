"""Markdown tables of paired comparisons over seeds and over resampled dev
documents (resampling.py), and of the same split by mask (mask_strata.py):
the report of `spacy sla ab` and the replication's bootstrap comparisons print them."""
from typing import Any, Dict, Optional, Sequence

from .mask_strata import GAP, STRATUM_LABELS


def signed_points(value: Optional[float]) -> str:
    """A difference of scores in [0, 1] as signed points (×100)."""
    return "n/a" if value is None else f"{100 * value:+.2f}"


def interval_text(result: Dict[str, Any]) -> str:
    """An interval's bounds as "[low, high]" in points, "n/a" without one."""
    if result.get("low") is None:
        return "n/a"
    return f"[{signed_points(result['low'])}, {signed_points(result['high'])}]"


def interval_words(result: Dict[str, Any]) -> str:
    """The same interval as "low to high", for a sentence."""
    if result.get("low") is None:
        return "n/a"
    return f"{signed_points(result['low'])} to {signed_points(result['high'])}"


_DIFFERENCE_HEADER = ("seeds | per seed Δ (×100) | mean Δ | over seeds: 95% t-interval | verdict "
                      "| over documents: 95% bootstrap interval | p | verdict |")


def _difference_cells(row: Dict[str, Any]) -> str:
    """A row's seeds, per-seed differences, mean, both intervals, p and verdicts as table cells."""
    seeds, documents = row["over_seeds"], row["over_documents"]
    per_seed = ", ".join(signed_points(value) for value in seeds["differences"])
    p_value = "n/a" if documents["p_value"] is None else f"{documents['p_value']:.3f}"
    return (f"{len(row['seeds'])} | {per_seed} | {signed_points(seeds['mean'])} | {interval_text(seeds)} | {seeds['verdict']} "
            f"| {interval_text(documents)} | {p_value} | {documents['verdict']} |")


def bootstrap_table(comparison: Dict[str, Any]) -> str:
    """The comparison as a markdown table, differences ×100."""
    lines = ["| comparison | " + _DIFFERENCE_HEADER, "|---" * 9 + "|"]
    for row in comparison["rows"]:
        lines.append(f"| {row['variant']} − {row['reference']} | " + _difference_cells(row))
    return "\n".join(lines)


def strata_table(rows: Sequence[Dict[str, Any]]) -> str:
    """The rows of `--by-mask` (mask_strata.rows_by_mask) as a markdown
    table, differences ×100. A part without documents (whole documents in
    128-token spans: every one is restricted) has no row, nor has its
    variant's restricted − unrestricted; a line under the table says so."""
    lines = ["| comparison | dev documents | " + _DIFFERENCE_HEADER, "|---" * 10 + "|"]
    empty = {(row["variant"], row["reference"]): row["stratum"] for row in rows
             if row["stratum"] in STRATUM_LABELS and not row["documents"]}
    for row in rows:
        if not row["documents"] or (row["stratum"] == GAP and (row["variant"], row["reference"]) in empty):
            continue
        if row["stratum"] in STRATUM_LABELS:
            what = f"{row['variant']} − {row['reference']}, {STRATUM_LABELS[row['stratum']]}"
        else:
            what = f"({row['variant']} − {row['reference']}): restricted − unrestricted"
        lines.append(f"| {what} | {row['documents']} | " + _difference_cells(row))
    notes = [f"- {variant}: no dev document where {STRATUM_LABELS[stratum]}, so no comparison of the two parts"
             for (variant, _), stratum in empty.items()]
    return "\n".join(lines + ([""] + notes if notes else []))
