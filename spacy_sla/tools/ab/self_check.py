"""The report's check of itself: each run's main score as ab scored it,
against the dev score that the run's own training logged for the same
model (train-log.jsonl): for model-best, the latest evaluation with the
best score (the one `spacy train` saved as model-best); for model-last, the
last evaluation when it was made at the final step (max_steps), else no
logged score is of that model. A disagreement beyond rounding is
[SLA-W010] at the top of report.md, naming both numbers: usually the
evaluation read other dev examples than training did (--eval-corpus)."""
from typing import Any, Dict, List, Optional, Sequence

from .errors import Warnings
from .evaluation import PLAIN_CORPUS

TOLERANCE = 0.0005  # of a score in [0, 1] (0.05 points ×100): more than the rounding of either number


def logged_score(entries: Sequence[Dict[str, Any]], model: str, max_steps: Optional[int]) -> Optional[Dict[str, Any]]:
    """The step and weighted score that training logged for the model ab
    scores ("last" or "best"), or None when no logged evaluation is of it."""
    if not entries:
        return None
    if model == "best":
        best = max(entry["score"] for entry in entries)
        entry = [entry for entry in entries if entry["score"] == best][-1]  # spaCy saves every tie again
    else:
        entry = entries[-1]
        if not max_steps or entry["step"] != max_steps:  # model-last is a later state than the last evaluation
            return None
    return {"step": entry["step"], "score": float(entry["score"])}


def check_runs(main_scores: Dict[str, Dict[int, Optional[float]]], logged: Dict[str, Dict[int, Optional[Dict]]]
               ) -> List[Dict[str, Any]]:
    """Per arm and seed: ab's main score, the logged one and whether they agree."""
    rows = []
    for variant, by_seed in main_scores.items():
        for seed, ours in by_seed.items():
            theirs = logged.get(variant, {}).get(seed)
            row: Dict[str, Any] = {"variant": variant, "seed": seed, "score": ours, "logged": None, "step": None,
                                   "agrees": None}
            if theirs is not None and ours is not None:
                row.update(logged=theirs["score"], step=theirs["step"], agrees=abs(ours - theirs["score"]) <= TOLERANCE)
            rows.append(row)
    return rows


def self_check_warnings(section: Dict[str, Any], model: str, sizes_compared: bool) -> List[str]:
    """[SLA-W010] per arm whose scores disagree with its training log."""
    corpus = section.get("dev_examples") or {}
    reader = f"{corpus.get('dev_corpus', 'corpora.dev')}: {corpus.get('reader') or 'its reader'}"
    if corpus.get("mode") == PLAIN_CORPUS:
        hint = (f"ab read the dev set with a plain spaCy Corpus (--eval-corpus plain) and training with the arm's "
                f"[training] dev_corpus ({reader}): without --eval-corpus plain, ab reads it as training does.")
    else:
        hint = (f"Both read the dev set with the arm's [training] dev_corpus ({reader}): a reader or component that "
                "is not deterministic (random augmentation or sampling) or a model changed after training gives "
                "such differences; check them, and compare with --eval-corpus plain.")
    by_arm: Dict[str, List[Dict[str, Any]]] = {}
    for row in section["self_check"]:
        if row["agrees"] is False:
            by_arm.setdefault(row["variant"], []).append(row)
    size = f" at training size {section['size']}" if sizes_compared else ""
    return [Warnings.W010.format(
        arm=f"{variant}{size}", model=f"model-{model}", hint=hint,
        pairs="; ".join(f"seed {row['seed']}: {100 * row['score']:.2f} here, {100 * row['logged']:.2f} logged at "
                        f"step {row['step']}" for row in rows))
        for variant, rows in by_arm.items()]
