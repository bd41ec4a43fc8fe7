"""The report of `spacy sla ab` as markdown: the comparison tables of each
training size (main score, other scores), the cost, the dev curves, the
comparisons between variants and by mask, with how to read them."""
from typing import Any, Dict, Optional

from .comparison import MAIN
from .intervals import AB_MIN_SEEDS
from .report_summary import main_score_name, seeds_to_show, summary_lines
from .tables import bootstrap_table, interval_text, signed_points, strata_table


def _pct(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{100 * value:.2f}"


def _p(result: Dict[str, Any]) -> str:
    if result.get("p_value") is None:
        return "n/a"
    holm = result.get("p_holm")
    return f"{result['p_value']:.3f}" + ("" if holm is None else f" ({holm:.3f})")


def _over_seeds(seeds: Dict[str, Any]) -> str:
    """The mean difference and its t-interval, or why there is none."""
    if seeds.get("low") is None and seeds["n"] < AB_MIN_SEEDS:
        return f"{signed_points(seeds['mean'])} (interval needs {AB_MIN_SEEDS} seeds)"
    return f"{signed_points(seeds['mean'])} {interval_text(seeds)}"


def comparison_table(section: Dict[str, Any], main: bool) -> str:
    lines = [
        "| score | variant | mean ± std (×100) | per seed | Δ vs vanilla, 95% t-interval over seeds | p (Holm) "
        "| 95% bootstrap interval over documents | p (Holm) | verdict | seeds to show Δ |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in section["rows"]:
        if (row["score"] == MAIN) != main:
            continue
        spread = "n/a" if row["std"] is None else _pct(row["std"])
        per_seed = ", ".join(_pct(value) for value in row["per_seed"].values())
        if "over_seeds" in row:
            seeds, documents = row["over_seeds"], row["over_documents"]
            comparison = (f"| {_over_seeds(seeds)} | {_p(seeds)} | {interval_text(documents)} | {_p(documents)} "
                          f"| {row['verdict']} | {seeds_to_show(row)} |")
        else:
            comparison = "| (reference) | | | | | |"
        name = main_score_name(section["weights"]) if row["score"] == MAIN else row["score"]
        lines.append(f"| {name} | {row['variant']} "
                     f"| {_pct(row['mean'])} ± {spread} | {per_seed} {comparison}")
    return "\n".join(lines)


def cost_table(section: Dict[str, Any]) -> str:
    lines = ["| variant | training s/run | time ratio | prediction words/s (dev set) | time ratio |", "|---|---|---|---|---|"]
    for variant, cost in section["cost"].items():
        def number(value: Optional[float], digits: int = 0) -> str:
            return "n/a" if value is None else f"{value:.{digits}f}"

        lines.append(f"| {variant} | {number(cost['train_seconds'])} | {number(cost['train_time_ratio'], 2)} "
                     f"| {number(cost['words_per_second'])} | {number(cost['predict_time_ratio'], 2)} |")
    return "\n".join(lines)


def curve_table(section: Dict[str, Any]) -> str:
    steps = sorted({step for curve in section["curves"].values() for step in curve})
    if not steps:
        return "(no dev curve: the runs kept no training log)"
    variants = list(section["curves"])
    lines = ["| step | " + " | ".join(variants) + " |", "|---" * (len(variants) + 1) + "|"]
    for step in steps:
        cells = [_pct(section["curves"][variant].get(step)) for variant in variants]
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def dev_examples_text(section: Dict[str, Any]) -> str:
    """How the evaluation read the dev examples, in a sentence."""
    corpus = section.get("dev_examples") or {}
    reader = f"`{corpus.get('dev_corpus', 'corpora.dev')}` (`{corpus.get('reader') or 'its reader'}`)"
    if corpus.get("mode") == "config":
        return (f"Dev examples: read by each arm's `[training] dev_corpus` {reader} with the dev file, as `spacy train` "
                "scores.")
    return (f"Dev examples: read by spaCy's plain Corpus over the dev file, as `spacy evaluate` scores (--eval-corpus "
            f"plain; the arms' training scored with {reader}).")


def self_check_text(section: Dict[str, Any]) -> str:
    """How many runs' main scores agree with their training logs ([SLA-W010] at the top names the others)."""
    rows = section.get("self_check", [])
    checked = [row for row in rows if row["agrees"] is not None]
    text = (f"Main score against each run's training log (the score it logged for the same model): "
            f"{sum(row['agrees'] for row in checked)} of {len(checked)} checked runs agree")
    if len(checked) < len(rows):
        text += (f"; {len(rows) - len(checked)} not checked (no logged evaluation of that model: model-last is checked "
                 "when the last evaluation was at max_steps)")
    return text + "."


def markdown_report(report: Dict[str, Any], figure: Optional[str]) -> str:
    plan = report["plan"]
    parts = [
        "# Does SLA help this pipeline?",
        "",
        *[line for sentence in summary_lines(report) for line in (sentence, "")],
        *[line for warning in report.get("warnings", []) for line in (f"> **Warning** {warning}", "")],
        f"Configs: `{plan['config_dir']}` ({', '.join(plan['variants'])}; the reference is vanilla). "
        f"Training data: `{plan['train']}`; dev data: `{plan['dev']}`. Seeds: {', '.join(map(str, plan['seeds']))}. "
        f"Training sizes: {', '.join(plan['train_sizes'])} (samples drawn once with seed {plan['sample_seed']}, nested). "
        f"Scored model: model-{plan['model']}. " + (dev_examples_text(report["sections"][0]) + " "
                                                    if report["sections"] else "")
        + f"Overrides: {plan['overrides'] or 'none'}"
        + "".join(f"; at size {size}: {settings}" for size, settings in plan.get("size_overrides", {}).items()) + ".",
        "",
        "How to read it: Δ is variant − vanilla of the same seed, ×100. The t-interval covers the randomness of training "
        "(seeds); the bootstrap interval resamples the dev documents (the same draws for every seed and variant, "
        f"{plan['resamples']} draws) and covers the choice of dev set. p in brackets: Holm's adjustment, over the main "
        "score's comparisons and, separately, over all other scores' comparisons. The verdict is \"better\" or \"worse\" "
        "only where both adjusted tests exclude 0 in the same direction, otherwise \"not shown\" (which is not \"no "
        f"effect\"); an interval over seeds needs {AB_MIN_SEEDS} seeds, and with fewer there is no verdict. \"Seeds to "
        "show Δ\": how many seeds a difference of the observed size and spread would need for the seed test to show it "
        "after the adjustment (a number at or below the seeds run: the seeds show it, the dev documents do not). "
        "Scores of frozen components (the same model in every run) and the tokenizer's are left out.",
    ]
    if report.get("left_out"):
        parts += ["", "**Interim report**: a seed is compared once every variant has finished it; left out until "
                  "then: " + ", ".join(report["left_out"]) + "."]
    if figure:
        parts += ["", f"![paired differences to vanilla with their intervals, and the dev curves]({figure})"]
    for section in report["sections"]:
        setup = section["setup"]
        parts += [
            "",
            f"## Training size: {section['size']}",
            "",
            f"Transformer `{setup['transformer']}`; pipeline {setup['pipeline']}; budget: max_steps "
            f"{setup['max_steps']}, max_epochs {setup['max_epochs']}, eval_frequency {setup['eval_frequency']}, "
            f"batcher {setup['batcher']}, accumulate_gradient {setup['accumulate_gradient']}. "
            f"Training file `{section['train']}`; {section['dev_documents']} dev documents. " + self_check_text(section),
            "",
            comparison_table(section, main=True),
            "",
            "Other scores:",
            "",
            comparison_table(section, main=False) if any(row["score"] != MAIN for row in section["rows"])
            else "(none besides the main score)",
            "",
            "Cost, measured in these runs (wall time; a busy machine inflates both sides):",
            "",
            cost_table(section),
            "",
            "Dev curve, main score ×100, mean over seeds at every evaluation (a lasting gain or only a faster start?):",
            "",
            curve_table(section),
        ]
        if section.get("between_variants"):
            parts += [
                "",
                "Main score between the variants other than vanilla, the earlier minus the later (SLA − window: does "
                "the parse add anything to a positional window?; not adjusted):",
                "",
                bootstrap_table({"rows": section["between_variants"]}),
            ]
        if "by_mask" in section:
            parts += [
                "",
                "Main score by what each variant's local mask hides (where a difference is made; the local branch is "
                "global attention where the mask hides nothing; not adjusted):",
                "",
                strata_table(section["by_mask"]["rows"]) if section["by_mask"]["rows"] else "(no variant has a local mask)",
            ]
            parts += [f"- {variant}: left out, {reason}" for variant, reason in section["by_mask"]["skipped"].items()]
        methods = {key: "/".join(method) for key, method in section["methods"].items()}
        parts += ["", "Bootstrap statistic per score: " + ", ".join(f"{key}: {method}" for key, method in methods.items())]
    return "\n".join(parts) + "\n"
