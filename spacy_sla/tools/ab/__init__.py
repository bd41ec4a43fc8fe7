"""Does syntax-aware local attention help *your* pipeline? The library
behind `spacy sla init-config` and `spacy sla ab`: your spacy-transformers
config as one config per attention variant (spacy_sla.tools.init_config), every variant
trained with every seed and scored on your dev set (plan.py, runs.py,
evaluation.py), and one report of the paired differences to vanilla over
seeds and over resampled dev documents (report.py). A scorer of your own
gets per-document statistics for the bootstrap with
register_scorer_statistics (counts.py).

    from pathlib import Path
    from spacy_sla.tools.ab import AbPlan, init_variant_configs, prepare, run_sequentially, write_report

    init_variant_configs(Path("config.cfg"), Path("arms"), ["sla", "window"])
    plan = AbPlan(Path("arms"), Path("ab"), Path("train.spacy"), Path("dev.spacy"),
                  variants=["sla", "window"], seeds=[0, 1, 2])
    runs = prepare(plan)  # checks the plan and the data, draws the samples
    results = run_sequentially(runs)  # `spacy train` and the evaluation, run by run
    if not any(result.failed for result in results):
        paths = write_report(plan, runs)  # report.md, report.json, report.png
"""
from ..init_config.configs import init_variant_configs, make_variant_configs
from ..init_config.manifest import manifest_variants
from ..init_config.variant_blocks import REFERENCE
from .counts import cats_statistics, ner_statistics, register_scorer_statistics, token_attr_statistics
from .plan import AbPlan, dry_run_lines, finished_part, parse_size_overrides, parse_sizes, prepare
from .report import write_report
from .runs import AbResult, AbRun, execute, lost_run, progress_line, run_sequentially
from .statistics import AucStatistic, CountStatistic

__all__ = [
    "REFERENCE", "init_variant_configs", "make_variant_configs", "manifest_variants",
    "AbPlan", "dry_run_lines", "finished_part", "parse_size_overrides", "parse_sizes", "prepare",
    "write_report", "AbResult", "AbRun", "execute", "lost_run", "progress_line", "run_sequentially",
    # per-document statistics of a scorer of your own, for the bootstrap (register in your --code file)
    "register_scorer_statistics", "AucStatistic", "CountStatistic", "cats_statistics", "ner_statistics",
    "token_attr_statistics",
]
