"""The report files of `spacy sla ab`: report.json (the numbers,
comparison.py), report.md (report_markdown.py) and report.png
(report_figure.py), written together and only over ab's own files. The
report supersedes an interim report (report-interim.*, written by
--report-only beside a running call): those files are deleted once the
report is written, unless someone else wrote or changed them."""
import json
from pathlib import Path
from typing import Dict, Sequence

from spacy_sla.tools.ab.outputs import (
    AB_FILES,
    INTERIM_FILES,
    INTERIM_REPORT,
    REPORT,
    check_outputs,
    record_outputs,
    remove_outputs,
    report_names,
)
from spacy_sla.tools.ab.plan import AbPlan
from spacy_sla.tools.ab.runs import AbRun

from ..support.files import write_atomically
from .comparison import build_report
from .report_figure import plot_report
from .report_markdown import markdown_report


def write_report(plan: AbPlan, runs: Sequence[AbRun], figure: bool = True, by_mask: bool = False,
                 left_out: Sequence[str] = (), stem: str = REPORT, record: str = AB_FILES) -> Dict[str, Path]:
    """STEM.json, STEM.md (and STEM.png), written only once all of them
    could be made, and only over files of those names that ab wrote
    ([SLA-E064]); recorded in OUTPUT_DIR/RECORD as ab's."""
    check_outputs(plan.output_dir, report_names(stem), record)
    report = build_report(plan, runs, by_mask, left_out)
    paths = {"json": plan.output_dir / f"{stem}.json", "md": plan.output_dir / f"{stem}.md"}
    if figure:
        try:
            import matplotlib  # noqa: F401
        except ImportError:  # the plots extra is not installed: the tables alone
            figure = False
    text = markdown_report(report, f"{stem}.png" if figure else None)
    if figure:
        paths["png"] = plan.output_dir / f"{stem}.png"
        plot_report(report, paths["png"])
    write_atomically(paths["json"], json.dumps(report, indent=2, default=str).encode("utf8"))
    write_atomically(paths["md"], text.encode("utf8"))
    record_outputs(plan.output_dir, list(paths.values()), record)
    if stem == REPORT:
        remove_outputs(plan.output_dir, report_names(INTERIM_REPORT), INTERIM_FILES)
    return paths
