"""`spacy sla ab`: does SLA help *your* pipeline? An A/B comparison, on your
data, of the attention variants `spacy sla init-config` made of your config."""
import sys
from pathlib import Path
from typing import Dict, List, Optional

import typer
from spacy.cli._util import Arg, Opt, parse_config_overrides
from wasabi import msg

from spacy_sla.tools.ab.evaluation import CONFIG_CORPUS
from spacy_sla.tools.ab.failures import repeating_failure
from spacy_sla.tools.ab.outputs import AB_FILES, INTERIM_FILES, INTERIM_REPORT, REPORT
from spacy_sla.tools.ab.plan import AbPlan, dry_run_lines, finished_part, parse_size_overrides, parse_sizes, prepare
from spacy_sla.tools.ab.processes import AbInterrupted, stop_on_signals
from spacy_sla.tools.ab.runs import (
    NOT_RUN,
    AbResult,
    execute_logged,
    lost_run,
    not_run,
    progress_line,
    run_sequentially,
)

from ..ab.earlier_runs import runs_to_train
from ..ab.errors import Errors
from ..ab.lock import hold_output_dir, live_holder
from ..ab.report import write_report
from ..ab.timing import TIME_STEPS, estimate_lines
from ..init_config.manifest import MANIFEST, edited_arms, manifest_variants
from ._app import CODE_HELP, comma_separated, sla_cli

OVERRIDES = {"allow_extra_args": True, "ignore_unknown_options": True}


@sla_cli.command("ab", context_settings=OVERRIDES)
def ab_cli(
    ctx: typer.Context,
    config_dir: Path = Arg(..., help="The configs of `spacy sla init-config`", exists=True, file_okay=False),
    output_dir: Path = Arg(..., help="Runs go to OUTPUT_DIR/[size-N/]VARIANT/seedN; report.md, report.json, report.png"),
    variants: str = Opt("", "--variants", help=f"Comma-separated, among the arms of CONFIG_DIR/{MANIFEST} (default: all of them)"),
    seeds: str = Opt("0,1,2", "--seeds", help="Comma-separated seeds, one run per variant each"),
    train_sizes: str = Opt("all", "--train-sizes", help="Comma-separated training sizes in documents, or all"),
    size_override: List[str] = Opt([], "--size-override", help="SIZE:KEY=VALUE[,KEY=VALUE] (SIZE a number or all): settings for one training size only, e.g. a longer budget for a larger sample; repeatable"),
    sample_seed: int = Opt(0, "--sample-seed", help="The seed of the training samples' draw"),
    best: bool = Opt(False, "--best", help="Score model-best (chosen on the dev set) instead of model-last"),
    resamples: int = Opt(10000, "--resamples", help="Draws of the dev documents for the bootstrap"),
    gpu_id: int = Opt(-1, "--gpu-id", help="GPU id, or -1 for the CPU"),
    dry_run: bool = Opt(False, "--dry-run", help="List the runs (kept, would replace, to train) and their commands, and estimate their time (--time-steps); nothing is written to OUTPUT_DIR"),
    time_steps: int = Opt(TIME_STEPS, "--time-steps", help="With --dry-run: train the first run to train for this many steps, in a temporary folder, to estimate the time of the runs (0: no estimate)"),
    replace: bool = Opt(False, "--replace", help="Train again the finished runs in OUTPUT_DIR whose settings differ from this call's (refused without it); the others are kept"),
    report_only: bool = Opt(False, "--report-only", help="Train nothing: write the report of the seeds every variant has finished so far (while the others train, or after an interruption)"),
    ray: bool = Opt(False, "--ray", help="Run every run as a Ray task: on a local Ray instance, or on --ray-address"),
    ray_address: Optional[str] = Opt(None, "--ray-address", help="A Ray cluster to join (implies --ray)"),
    ray_cpus_per_run: float = Opt(1.0, "--ray-cpus-per-run"),
    ray_gpus_per_run: float = Opt(0.0, "--ray-gpus-per-run"),
    no_figure: bool = Opt(False, "--no-figure", help="Write report.md and report.json only"),
    by_mask: bool = Opt(False, "--by-mask", help="Also compare the main score where each variant's mask restricts and where it hides nothing"),
    drop_models: bool = Opt(False, "--drop-models", help="Delete each run's model-last and model-best once it is scored: the runs' records (a few MB) are what the report and a later call need"),
    code_path: Optional[Path] = Opt(None, "--code", "-c", help=CODE_HELP + "; passed on to every `spacy train` and evaluation", exists=True, dir_okay=False),
    eval_corpus: str = Opt(CONFIG_CORPUS, "--eval-corpus", help="How the dev examples are read for scoring: config (each arm's [training] dev_corpus reader with --paths.dev, as `spacy train` scores) or plain (spaCy's Corpus over --paths.dev, as `spacy evaluate` scores)"),
):
    """Train vanilla and each variant with every seed (`spacy train`), score
    the last models on the dev set, and write a report: per score, the
    paired difference to vanilla over seeds and over resampled dev
    documents, verdicts, cost and dev curves. Needs --paths.train and
    --paths.dev; other `--section.key value` arguments override the configs.
    One call at a time holds OUTPUT_DIR (OUTPUT_DIR/.ab.lock); SIGTERM or
    Ctrl-C stops the run that trains, which the next call trains again."""
    overrides: Dict[str, object] = parse_config_overrides(ctx.args)
    missing = [key for key in ("paths.train", "paths.dev") if key not in overrides]
    if missing:
        msg.fail(Errors.E155.format(missing=" and ".join(f"`--{key} PATH`" for key in missing)), exits=1)
    if resamples < 1:
        msg.fail(f"--resamples takes a whole number >= 1; got {resamples}", exits=1)
    train_path, dev_path = Path(str(overrides.pop("paths.train"))), Path(str(overrides.pop("paths.dev")))
    try:
        chosen = comma_separated(variants) or manifest_variants(config_dir)
        plan = AbPlan(config_dir, output_dir, train_path, dev_path, chosen, [int(seed) for seed in comma_separated(seeds)],
                      parse_sizes(comma_separated(train_sizes)), sample_seed, overrides, gpu_id,
                      "best" if best else "last", resamples, size_overrides=parse_size_overrides(size_override),
                      by_mask=by_mask, drop_models=drop_models,
                      code_path=None if code_path is None else code_path.resolve(), eval_corpus=eval_corpus)
        if dry_run:
            plan.check()
            _warn_of_edited_arms(plan)
            for warning in plan.budget_warnings():
                msg.warn(warning)
            runs, redrawn = plan.runs(), plan.samples_redrawn()
            for line in dry_run_lines(runs, replace, redrawn):
                print(line)
            holder = live_holder(output_dir)
            busy = None if holder is None else (f"pid {holder.get('pid')} on {holder.get('host')} is training into "
                                                f"{output_dir}, and a timing run would slow it down")
            for line in estimate_lines(runs, runs_to_train(runs, redrawn), time_steps, train_path, busy):
                print(line)
            return
        if report_only:
            _report_finished_part(plan, no_figure, by_mask)
            return
        with stop_on_signals(), hold_output_dir(output_dir, notify=msg.warn):
            _compare(plan, ray or ray_address is not None, ray_address, ray_cpus_per_run, ray_gpus_per_run,
                     no_figure, by_mask, replace)
    except AbInterrupted as stop:
        msg.fail(Errors.E063.format(signal=str(stop), run=stop.run_name or "no run had started"))
        sys.exit(128 + stop.signum)
    except (ValueError, OSError) as error:
        msg.fail(str(error), exits=1)


def _compare(plan: AbPlan, ray: bool, ray_address: Optional[str], ray_cpus_per_run: float, ray_gpus_per_run: float,
             no_figure: bool, by_mask: bool, replace: bool = False) -> None:
    """Check, train and evaluate every run, and write the report (OUTPUT_DIR held)."""
    runs = prepare(plan, replace)
    _warn_of_edited_arms(plan)
    for warning in plan.budget_warnings():
        msg.warn(warning)
    if ray:
        from ..support.ray_session import run_grid

        if plan.gpu_id >= 0 and ray_gpus_per_run <= 0:
            msg.warn(f"--gpu-id {plan.gpu_id} is ignored with --ray; give each run a GPU with --ray-gpus-per-run 1")
        results: List[AbResult] = run_grid(
            runs, address=ray_address, cpus_per_run=ray_cpus_per_run, gpus_per_run=ray_gpus_per_run,
            execute=execute_logged, lost=lost_run, describe=progress_line, not_run=not_run,
            stop=lambda finished, latest: repeating_failure(finished, plan.arms, latest) if latest.failed else None)
    else:
        results = run_sequentially(runs)
    failed = [result for result in results if result.failed]
    for result in failed:  # a failure read from its log says what it is; others show the log's tail
        tail = "" if result.failure is not None else result.log_tail
        print(f"FAILED {result.run.name}: {result.error}\n" + "\n".join("    " + line for line in tail.splitlines()))
    stopped = [result for result in results if result.status == NOT_RUN]
    if stopped:
        msg.fail(Errors.E101.format(done=len(results) - len(stopped), total=len(results), reason=stopped[0].error,
                                    not_run=", ".join(result.run.name for result in stopped)))
    if failed or stopped:
        msg.fail(f"{len(failed)} of {len(results)} runs failed (see above)"
                 + (f" and {len(stopped)} did not run" if stopped else "")
                 + "; run the same command again to retry them. No report was written.", exits=1)
    paths = write_report(plan, runs, figure=not no_figure, by_mask=by_mask)
    print(paths["md"].read_text(encoding="utf8"))
    msg.good("Wrote " + ", ".join(str(path) for path in paths.values()))


def _warn_of_edited_arms(plan: AbPlan) -> None:
    for path in edited_arms(plan.config_dir, plan.arms):
        msg.warn(f"{path} was changed after `spacy sla init-config` wrote it; it is compared as it differs from "
                 "vanilla in attention only.")


def _report_finished_part(plan: AbPlan, no_figure: bool, by_mask: bool) -> None:
    """--report-only: the report of the seeds finished by every variant. It
    reads records only, so it may run while another call trains into
    OUTPUT_DIR; then it writes report-interim.* and leaves the report files
    to that call. Otherwise it holds OUTPUT_DIR while it writes."""
    plan.check(train_data=False)
    _warn_of_edited_arms(plan)
    holder = live_holder(plan.output_dir)
    if holder is not None:
        msg.warn(f"pid {holder.get('pid', 'unknown')} on {holder.get('host', 'an unknown host')} is training into "
                 f"{plan.output_dir}: writing the interim report as {INTERIM_REPORT}.*")
        _write_finished_part(plan, no_figure, by_mask, INTERIM_REPORT, INTERIM_FILES)
        return
    with hold_output_dir(plan.output_dir, notify=msg.warn):
        _write_finished_part(plan, no_figure, by_mask)


def _write_finished_part(plan: AbPlan, no_figure: bool, by_mask: bool, stem: str = REPORT,
                         record: str = AB_FILES) -> None:
    finished_plan, runs, left_out = finished_part(plan, plan.runs())
    paths = write_report(finished_plan, runs, figure=not no_figure, by_mask=by_mask, left_out=left_out, stem=stem,
                         record=record)
    print(paths["md"].read_text(encoding="utf8"))
    if left_out:
        msg.warn(f"Left out with their seeds: {', '.join(left_out)}")
    msg.good("Wrote " + ", ".join(str(path) for path in paths.values()))
