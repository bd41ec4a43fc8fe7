"""The answer of the report of `spacy sla ab` in plain sentences, one per
compared arm and training size, from the same numbers and the same
wording as the report's table (report_markdown.py): the main score's
difference to vanilla, its intervals, the verdict, how many seeds a
difference of that size would need, and the training cost.

An interval over seeds needs AB_MIN_SEEDS seeds; with fewer, the sentence
gives the interval over dev documents alone and says so, and the seeds
needed are a rough guess from the spread of two differences."""
from typing import Any, Dict, List, Optional

from .comparison import MAIN
from .intervals import AB_MIN_SEEDS, BETTER, WORSE
from .tables import interval_words, signed_points

SEED_LIMIT = 100  # comparison.seeds_needed's limit: more is shown as ">100"


def main_score_name(weights: Dict[str, float]) -> str:
    """The main score as a reader knows it: the score itself when it is one
    score of weight 1, else spaCy's weighted sum written out."""
    if len(weights) == 1 and next(iter(weights.values())) == 1:
        return next(iter(weights))
    return "main score (" + " + ".join(f"{weight:g} × {name}" for name, weight in weights.items()) + ")"


def seeds_to_show(row: Dict[str, Any]) -> str:
    """The table's "seeds to show Δ" cell, by the verdict's own rule
    (comparison.seeds_needed): a number of seeds at or below those run only
    where the seed test shows the difference."""
    needed, n = row.get("seeds_needed"), row["over_seeds"]["n"]
    if needed is None:
        return "n/a"
    if needed > SEED_LIMIT:
        return f">{SEED_LIMIT}"
    if needed <= n and row["verdict"] not in (BETTER, WORSE):
        return f"{needed} (shown over seeds, not over dev documents)"
    return str(needed)


def _seeds_phrase(row: Dict[str, Any]) -> str:
    """What more seeds would do, in words."""
    seeds, needed = row["over_seeds"], row.get("seeds_needed")
    if row["verdict"] in (BETTER, WORSE):
        return ""
    if seeds["mean"] == 0:
        return "no difference to show"
    if needed is None:
        return f"the seeds needed cannot be estimated without {AB_MIN_SEEDS} seeds or a spread between them"
    if needed > SEED_LIMIT:
        return f"more than {SEED_LIMIT} seeds would be needed to show a difference of this size"
    if needed <= seeds["n"]:
        return "the seeds show a difference of this size, the dev documents do not"
    guess = f" (a rough guess from {seeds['n']} seeds)" if seeds["n"] < AB_MIN_SEEDS else ""
    return f"about {needed} seeds would be needed to show a difference of this size{guess}"


def arm_sentence(row: Dict[str, Any], section: Dict[str, Any], several_sizes: bool) -> str:
    """One arm's answer at one training size, from its main-score row."""
    seeds, documents = row["over_seeds"], row["over_documents"]
    where = f", {section['size']} training documents" if several_sizes else ""
    name = main_score_name(section["weights"])
    name = f"the {name}" if name.startswith("main score") else name
    n = seeds["n"]
    text = f"**{row['variant']}{where}**: {signed_points(seeds['mean'])} points of {name} over {n} seed{'s' * (n != 1)}"
    if n >= AB_MIN_SEEDS and seeds.get("low") is not None:
        text += f", 95 % interval {interval_words(seeds)} over seeds and {interval_words(documents)} over dev documents"
    else:
        text += (f", 95 % interval {interval_words(documents)} over dev documents (one over seeds needs "
                 f"{AB_MIN_SEEDS} seeds)")
    text += f": {row['verdict']}"
    more = _seeds_phrase(row)
    if more:
        text += f"; {more}"
    ratio: Optional[float] = section["cost"].get(row["variant"], {}).get("train_time_ratio")
    text += "; training time not recorded." if ratio is None else f"; training cost {ratio:.2f}× vanilla."
    return text


def summary_lines(report: Dict[str, Any]) -> List[str]:
    """The report's opening sentences: each arm against vanilla on the main
    score, size by size."""
    several = len(report["sections"]) > 1
    return [arm_sentence(row, section, several) for section in report["sections"] for row in section["rows"]
            if row["score"] == MAIN and "over_seeds" in row]
